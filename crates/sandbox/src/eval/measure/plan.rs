//! The plan of a task's measurement: containers per variant, repetitions per exec, warmup,
//! minimum and maximum rounds and the time budget, from the task and the command line.

use harness_core::rule::{Criterion, DecisionRule};
use harness_core::settings::Budget;
use harness_core::task::Task;
use harness_core::timings::Schedule;

/// Containers per variant: `--replicas`, else the task's `measure.replicas`, else
/// [`DEFAULT_REPLICAS`] under strict; one under gso (GSO's protocol).
pub fn replicas(task: &Task, rule: &DecisionRule, budget: &Budget) -> usize {
    match rule.criterion {
        Criterion::Gso | Criterion::Simulated => 1,
        Criterion::Strict => budget
            .replicas
            .or(task.replicas)
            .unwrap_or(DEFAULT_REPLICAS)
            .max(1) as usize,
    }
}

/// Containers per variant under strict, unless the task or the command line says.
pub const DEFAULT_REPLICAS: u32 = 5;

/// Containers a variant may grow to under strict when neither the task nor the command line
/// fixed the count.
pub const MAX_REPLICAS: u32 = 11;

/// The most containers a variant may have: [`MAX_REPLICAS`] when the count is the default
/// under strict, else the count itself.
pub fn max_replicas(task: &Task, rule: &DecisionRule, budget: &Budget) -> usize {
    let fixed = budget.replicas.or(task.replicas).is_some();
    let start = replicas(task, rule, budget);
    if rule.criterion == Criterion::Strict && !fixed {
        start.max(MAX_REPLICAS as usize)
    } else {
        start
    }
}

/// Paired rounds strict needs for an interval at all.
pub const MIN_INTERVAL_ROUNDS: u32 = 5;

/// Timed repetitions per exec under strict, unless the task or the command line says: the
/// floor of three cost the exec's own overhead once instead of three times, and was the
/// better or equal figure per second on the real tasks (scripts/probe_strategies.py).
pub const DEFAULT_REPETITIONS: u32 = 3;

/// Repetitions per exec: `--repetitions`, else the task's, else [`DEFAULT_REPETITIONS`]
/// under strict; one under gso (GSO times each run on its own) and simulated (a count does
/// not vary).
pub fn repetitions(task: &Task, rule: &DecisionRule, budget: &Budget) -> u32 {
    match rule.criterion {
        Criterion::Gso | Criterion::Simulated => 1,
        Criterion::Strict => budget
            .repetitions
            .or(task.repetitions)
            .unwrap_or(DEFAULT_REPETITIONS)
            .max(1),
    }
}

/// The schedule for a task: warmups = the most any bench asks, in every container (round r
/// runs in replica r mod C, so the first warmups × C rounds are warmups); rounds from `runs`
/// (min) and `max_runs` (max), overridden from the command line. Under `gso` the number of
/// rounds is fixed at the minimum and none is a warmup, as GSO does.
pub fn schedule(
    task: &Task,
    rule: &DecisionRule,
    budget: &Budget,
    cpuset: Option<String>,
) -> Schedule {
    let replicas = replicas(task, rule, budget) as u32;
    let simulated = rule.criterion == Criterion::Simulated;
    // Simulated: one count per variant and bench, no warmup (a count has no warm state).
    // gso: GSO's protocol counts every run of every variant (its eval.sh has no warmup).
    let warmup_rounds = if simulated || rule.criterion == Criterion::Gso {
        0
    } else {
        task.benches.iter().map(|b| b.warmups).max().unwrap_or(0) * replicas
    };
    let reps = repetitions(task, rule, budget);
    // A bench's `runs` counts timed runs: under strict each exec times `reps` of them, so
    // its minimum is met in runs/reps rounds, but never fewer than an interval needs.
    let task_min = |runs: u32| match rule.criterion {
        Criterion::Strict if reps > 1 => runs.div_ceil(reps).max(MIN_INTERVAL_ROUNDS),
        _ => runs,
    };
    let min_rounds = if simulated {
        1
    } else {
        budget
            .min_rounds
            .unwrap_or_else(|| task_min(task.benches.iter().map(|b| b.runs).max().unwrap_or(1)))
            .max(1)
    };
    let max_rounds = match rule.criterion {
        Criterion::Gso | Criterion::Simulated => min_rounds,
        Criterion::Strict => budget
            .max_rounds
            .unwrap_or_else(|| {
                task.benches
                    .iter()
                    .map(|b| b.max_runs)
                    .max()
                    .unwrap_or(min_rounds)
            })
            .max(min_rounds),
    };
    Schedule {
        criterion: rule.criterion,
        warmup_rounds,
        min_rounds,
        max_rounds,
        max_seconds: budget.max_seconds.unwrap_or(task.measure_max_seconds),
        cpuset,
        replicas,
        repetitions: reps,
        max_replicas: max_replicas(task, rule, budget) as u32,
    }
}
