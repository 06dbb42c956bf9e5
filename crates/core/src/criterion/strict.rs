//! `strict` (the default): GSO's thresholds applied to the whole 95% confidence interval,
//! rounds and containers added while a sample is undecided; undecided at the budget is
//! inconclusive (not optimised).

use super::{DecidedBy, Figure, MeasurePlan, PlanInputs, Strategy};
use crate::stats::MIN_INTERVAL_ROUNDS;

/// Containers per variant, unless the task or the command line says.
pub const DEFAULT_REPLICAS: u32 = 5;

/// Containers a variant may grow to when neither the task nor the command line fixed the
/// count.
pub const MAX_REPLICAS: u32 = 11;

/// Timed repetitions per exec, unless the task or the command line says: the floor of three
/// cost the exec's own overhead once instead of three times, and was the better or equal
/// figure per second on the real tasks (scripts/probe_strategies.py).
pub const DEFAULT_REPETITIONS: u32 = 3;

pub struct Strict;

impl Strategy for Strict {
    fn name(&self) -> &'static str {
        "strict"
    }

    fn help(&self) -> &'static str {
        "GSO's thresholds applied to the 95% confidence interval, rounds added until decided; undecided at the budget = inconclusive (not optimised)"
    }

    fn plan(&self, i: &PlanInputs) -> MeasurePlan {
        let replicas = i.replicas.unwrap_or(DEFAULT_REPLICAS).max(1);
        let max_replicas = match i.replicas {
            Some(_) => replicas,
            None => replicas.max(MAX_REPLICAS),
        };
        let repetitions = i.repetitions.unwrap_or(DEFAULT_REPETITIONS).max(1);
        // A bench's `runs` counts timed runs: each exec times `repetitions` of them, so its
        // minimum is met in runs/repetitions rounds, but never fewer than an interval needs.
        let rounds_for = |runs: u32| {
            if repetitions > 1 {
                runs.div_ceil(repetitions).max(MIN_INTERVAL_ROUNDS as u32)
            } else {
                runs
            }
        };
        let min_rounds = i
            .min_rounds
            .unwrap_or_else(|| rounds_for(i.bench_runs))
            .max(1);
        let max_rounds = i
            .max_rounds
            .unwrap_or(i.bench_max_runs.unwrap_or(min_rounds))
            .max(min_rounds);
        MeasurePlan {
            replicas,
            max_replicas,
            repetitions,
            // Round r runs in replica r mod C: the first warmups x C rounds warm every one.
            warmup_rounds: i.bench_warmups * replicas,
            min_rounds,
            max_rounds,
        }
    }

    fn adaptive(&self) -> bool {
        true
    }

    fn finished(&self, (min_rounds, max_rounds): (u32, u32), paired: u32, decided: bool) -> bool {
        (paired >= min_rounds && decided) || paired >= max_rounds
    }

    fn figure(&self) -> Figure {
        Figure::Seconds
    }

    fn decided_by(&self) -> DecidedBy {
        DecidedBy::Interval
    }

    fn uses_estimator(&self) -> bool {
        true
    }

    fn gso_reports(&self) -> bool {
        true
    }

    fn opt_at_k_over_dataset(&self) -> bool {
        false
    }
}
