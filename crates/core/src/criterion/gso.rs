//! `gso`: GSO's own protocol, to reproduce published numbers: one container per variant,
//! every run timed on its own, no warm-up (GSO's eval.sh has none), a fixed number of rounds,
//! GSO's thresholds on the means (always decided), and Opt@K over the whole dataset.

use super::{DecidedBy, Figure, MeasurePlan, PlanInputs, Strategy};

pub struct Gso;

impl Strategy for Gso {
    fn name(&self) -> &'static str {
        "gso"
    }

    fn help(&self) -> &'static str {
        "GSO's rule applied to means (reproduces published numbers)"
    }

    fn plan(&self, i: &PlanInputs) -> MeasurePlan {
        let rounds = i.min_rounds.unwrap_or(i.bench_runs).max(1);
        MeasurePlan {
            replicas: 1,
            max_replicas: 1,
            repetitions: 1,
            warmup_rounds: 0,
            min_rounds: rounds,
            max_rounds: rounds,
        }
    }

    fn adaptive(&self) -> bool {
        false
    }

    fn finished(&self, (min_rounds, _): (u32, u32), paired: u32, _decided: bool) -> bool {
        paired >= min_rounds
    }

    fn figure(&self) -> Figure {
        Figure::Seconds
    }

    fn decided_by(&self) -> DecidedBy {
        DecidedBy::Means
    }

    fn uses_estimator(&self) -> bool {
        false
    }

    fn gso_reports(&self) -> bool {
        true
    }

    fn opt_at_k_over_dataset(&self) -> bool {
        true
    }
}
