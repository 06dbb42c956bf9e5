//! The decision rule: how a verdict is reached from timings (criterion, thresholds,
//! confidence, bootstrap), fixed once per run and recorded in run.json and every report.

use serde::{Deserialize, Serialize};

use crate::criterion::Criterion;
use crate::estimator::Estimator;
use crate::metrics::Thresholds;

pub const CONFIDENCE: f64 = 0.95;
pub const RESAMPLES: usize = 2000;

/// The estimator strict applies: the fastest run (per container). Noise on a shared machine
/// only ever adds time; the minimum is the figure it disturbs least (the validation script
/// compares mean, median, low percentiles and the minimum on the same runs: the minimum gave
/// the narrowest intervals with full coverage of known speedups).
pub const ESTIMATOR: Estimator = Estimator::Quantile(0.0);

/// How verdicts are reached; recorded in run.json and every report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecisionRule {
    pub criterion: Criterion,
    pub thresholds: Thresholds,
    pub seed: u64,
    pub confidence: f64,
    pub resamples: usize,
    /// The figure of a variant's runs under strict (gso always takes means). Runs folders
    /// of older builds, without it, were judged on means.
    #[serde(default)]
    pub estimator: Estimator,
}

impl DecisionRule {
    /// The estimator the rule's criterion applies: GSO's means under gso.
    pub fn figure(&self) -> Estimator {
        if self.criterion.uses_estimator() {
            self.estimator
        } else {
            Estimator::Mean
        }
    }
}
