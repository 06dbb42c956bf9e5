//! The plan of a task's measurement: containers per variant, repetitions per exec, warmup,
//! minimum and maximum rounds and the time budget. The criterion's strategy decides each
//! number (`harness_core::criterion`) from what the task and the command line say.

use harness_core::criterion::{MeasurePlan, PlanInputs};
use harness_core::rule::DecisionRule;
use harness_core::settings::Budget;
use harness_core::task::Task;
use harness_core::timings::Schedule;

/// What the task and the command line say about the measurement (the command line first).
fn inputs(task: &Task, budget: &Budget) -> PlanInputs {
    PlanInputs {
        replicas: budget.replicas.or(task.replicas),
        repetitions: budget.repetitions.or(task.repetitions),
        min_rounds: budget.min_rounds,
        max_rounds: budget.max_rounds,
        bench_warmups: task.benches.iter().map(|b| b.warmups).max().unwrap_or(0),
        bench_runs: task.benches.iter().map(|b| b.runs).max().unwrap_or(1),
        bench_max_runs: task.benches.iter().map(|b| b.max_runs).max(),
    }
}

/// The criterion's plan of this task's measurement.
pub fn measure_plan(task: &Task, rule: &DecisionRule, budget: &Budget) -> MeasurePlan {
    rule.criterion.plan(&inputs(task, budget))
}

/// Containers per variant at the start.
pub fn replicas(task: &Task, rule: &DecisionRule, budget: &Budget) -> usize {
    measure_plan(task, rule, budget).replicas as usize
}

/// The most containers a variant may have.
pub fn max_replicas(task: &Task, rule: &DecisionRule, budget: &Budget) -> usize {
    measure_plan(task, rule, budget).max_replicas as usize
}

/// The schedule for a task: the criterion's plan, the time budget and the cores.
pub fn schedule(
    task: &Task,
    rule: &DecisionRule,
    budget: &Budget,
    cpuset: Option<String>,
) -> Schedule {
    let plan = measure_plan(task, rule, budget);
    Schedule {
        criterion: rule.criterion,
        warmup_rounds: plan.warmup_rounds,
        min_rounds: plan.min_rounds,
        max_rounds: plan.max_rounds,
        max_seconds: budget.max_seconds.unwrap_or(task.measure_max_seconds),
        cpuset,
        replicas: plan.replicas,
        repetitions: plan.repetitions,
        max_replicas: plan.max_replicas,
    }
}
