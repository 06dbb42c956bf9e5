//! `simulated`: each variant's cost counted once by a CPU simulator (cachegrind's
//! instructions and simulated cache misses, as estimated cycles) instead of a clock: the
//! same code gives the same number on any machine and any hour. GSO's thresholds on those
//! costs; no GSO report (GSO's numbers are seconds).

use super::{DecidedBy, Figure, MeasurePlan, PlanInputs, Strategy};

pub struct Simulated;

impl Strategy for Simulated {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn help(&self) -> &'static str {
        "Each variant's cost counted once by a CPU simulator (cachegrind's instructions and simulated cache misses, as estimated cycles) instead of a clock: the same code gives the same number on any machine and any hour. GSO's thresholds on those costs"
    }

    fn plan(&self, _: &PlanInputs) -> MeasurePlan {
        // One count per variant and bench: a count has no warm state and does not vary.
        MeasurePlan {
            replicas: 1,
            max_replicas: 1,
            repetitions: 1,
            warmup_rounds: 0,
            min_rounds: 1,
            max_rounds: 1,
        }
    }

    fn adaptive(&self) -> bool {
        false
    }

    fn finished(&self, (min_rounds, _): (u32, u32), paired: u32, _decided: bool) -> bool {
        paired >= min_rounds
    }

    fn figure(&self) -> Figure {
        Figure::SimulatedCycles
    }

    fn decided_by(&self) -> DecidedBy {
        DecidedBy::Means
    }

    fn uses_estimator(&self) -> bool {
        false
    }

    fn gso_reports(&self) -> bool {
        false
    }

    fn opt_at_k_over_dataset(&self) -> bool {
        false
    }
}
