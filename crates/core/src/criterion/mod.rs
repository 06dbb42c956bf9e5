//! The criterion: how a run measures and judges. Each criterion is one [`Strategy`] in a
//! file of its own (`strict.rs`, `gso.rs`, `simulated.rs`), holding everything it decides:
//! the measurement plan (containers, repetitions, warm-up, rounds), when a sample has been
//! measured enough, the figure it compares, how a verdict is reached, and which reports it
//! writes. The rest of the harness asks the strategy and never names a criterion, so a
//! fourth criterion is one new file and one line in [`Criterion::ALL`].

mod gso;
mod simulated;
pub mod strict;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a criterion compares: seconds from a clock, or a simulator's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Seconds,
    /// Estimated cycles from cachegrind's counts: one deterministic number per variant.
    SimulatedCycles,
}

/// How a verdict is reached from the paired figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecidedBy {
    /// The thresholds must hold for the whole confidence interval (undecided until they do
    /// or the budget ends).
    Interval,
    /// The thresholds on the means, always decided (GSO's rule).
    Means,
}

/// What a task and the command line say about its measurement, for [`Strategy::plan`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanInputs {
    /// `--replicas`, else the task's `measure.replicas`.
    pub replicas: Option<u32>,
    /// `--repetitions`, else the task's `measure.repetitions`.
    pub repetitions: Option<u32>,
    /// `--min-rounds` / `--max-rounds`.
    pub min_rounds: Option<u32>,
    pub max_rounds: Option<u32>,
    /// The most `warmups`, `runs` and `max_runs` of the task's benches.
    pub bench_warmups: u32,
    pub bench_runs: u32,
    pub bench_max_runs: Option<u32>,
}

/// The numbers of a task's measurement a strategy decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasurePlan {
    /// Containers per variant at the start, and the most a variant may grow to.
    pub replicas: u32,
    pub max_replicas: u32,
    /// Timed repetitions of a bench in one exec.
    pub repetitions: u32,
    pub warmup_rounds: u32,
    pub min_rounds: u32,
    pub max_rounds: u32,
}

/// One criterion: everything it decides, in one place.
pub trait Strategy: Sync + Send {
    /// Its name on the command line, in run.json and in every report.
    fn name(&self) -> &'static str;
    /// One line of what it does (`--help`).
    fn help(&self) -> &'static str;
    /// The measurement plan of a task.
    fn plan(&self, inputs: &PlanInputs) -> MeasurePlan;
    /// Whether the measurement adds rounds and containers while a verdict is undecided.
    fn adaptive(&self) -> bool;
    /// Whether a sample needs no more rounds, after `paired_rounds` of them.
    fn finished(&self, plan: (u32, u32), paired_rounds: u32, decided: bool) -> bool;
    fn figure(&self) -> Figure;
    fn decided_by(&self) -> DecidedBy;
    /// Whether the figure of a variant's runs is the rule's estimator (else the mean).
    fn uses_estimator(&self) -> bool;
    /// Whether GSO's reports and GSO's per-sample means are written (they are seconds: never
    /// made of simulated counts).
    fn gso_reports(&self) -> bool;
    /// Whether Opt@K is over the whole dataset (GSO's) rather than the selected instances.
    fn opt_at_k_over_dataset(&self) -> bool;
}

/// A criterion, by the strategy it names. Compared, printed and saved by its name.
#[derive(Clone, Copy)]
pub struct Criterion(&'static dyn Strategy);

impl Criterion {
    pub const STRICT: Criterion = Criterion(&strict::Strict);
    pub const GSO: Criterion = Criterion(&gso::Gso);
    pub const SIMULATED: Criterion = Criterion(&simulated::Simulated);
    /// Every criterion, the default first.
    pub const ALL: &[Criterion] = &[Criterion::STRICT, Criterion::GSO, Criterion::SIMULATED];

    pub fn as_str(self) -> &'static str {
        self.0.name()
    }

    pub fn by_name(name: &str) -> Option<Criterion> {
        Criterion::ALL.iter().copied().find(|c| c.as_str() == name)
    }

    pub fn names() -> Vec<&'static str> {
        Criterion::ALL.iter().map(|c| c.as_str()).collect()
    }
}

impl std::ops::Deref for Criterion {
    type Target = dyn Strategy;

    fn deref(&self) -> &(dyn Strategy + 'static) {
        self.0
    }
}

impl PartialEq for Criterion {
    fn eq(&self, other: &Criterion) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Criterion {}

impl std::fmt::Debug for Criterion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Criterion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Criterion {
    type Err = String;

    fn from_str(s: &str) -> Result<Criterion, String> {
        Criterion::by_name(s).ok_or_else(|| {
            format!(
                "{s:?} is not a criterion (one of {})",
                Criterion::names().join(", ")
            )
        })
    }
}

impl Serialize for Criterion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Criterion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Criterion, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> PlanInputs {
        PlanInputs {
            replicas: None,
            repetitions: None,
            min_rounds: None,
            max_rounds: None,
            bench_warmups: 2,
            bench_runs: 10,
            bench_max_runs: Some(40),
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for c in Criterion::ALL {
            let json = serde_json::to_string(c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(serde_json::from_str::<Criterion>(&json).unwrap(), *c);
            assert_eq!(c.as_str().parse::<Criterion>().unwrap(), *c);
        }
        assert_eq!(Criterion::names(), ["strict", "gso", "simulated"]);
        let e = serde_json::from_str::<Criterion>("\"fast\"").unwrap_err();
        assert!(
            e.to_string().contains("one of strict, gso, simulated"),
            "{e}"
        );
    }

    #[test]
    fn each_strategy_plans_its_own_measurement() {
        let strict = Criterion::STRICT.plan(&inputs());
        // Three repetitions per exec: ten runs are met in four rounds, raised to the five an
        // interval needs; five containers growing to eleven; two warm-up rounds per container.
        assert_eq!(
            strict,
            MeasurePlan {
                replicas: 5,
                max_replicas: 11,
                repetitions: 3,
                warmup_rounds: 10,
                min_rounds: 5,
                max_rounds: 40
            }
        );
        let fixed = Criterion::STRICT.plan(&PlanInputs {
            replicas: Some(2),
            ..inputs()
        });
        assert_eq!((fixed.replicas, fixed.max_replicas), (2, 2));
        // GSO: one container, one repetition, no warm-up, the runs as the fixed round count.
        let gso = Criterion::GSO.plan(&inputs());
        assert_eq!(
            gso,
            MeasurePlan {
                replicas: 1,
                max_replicas: 1,
                repetitions: 1,
                warmup_rounds: 0,
                min_rounds: 10,
                max_rounds: 10
            }
        );
        // Simulated: one count.
        let sim = Criterion::SIMULATED.plan(&inputs());
        assert_eq!(
            (sim.min_rounds, sim.max_rounds, sim.warmup_rounds),
            (1, 1, 0)
        );
        assert!(Criterion::STRICT.adaptive() && !Criterion::GSO.adaptive());
        assert!(!Criterion::STRICT.finished((5, 40), 5, false));
        assert!(Criterion::STRICT.finished((5, 40), 5, true));
        assert!(Criterion::STRICT.finished((5, 40), 40, false));
        assert!(Criterion::GSO.finished((10, 10), 10, false));
        assert_eq!(Criterion::SIMULATED.figure(), Figure::SimulatedCycles);
        assert!(!Criterion::SIMULATED.gso_reports() && Criterion::GSO.opt_at_k_over_dataset());
    }
}
