//! The decision rule: how a verdict is reached from timings (criterion, thresholds,
//! confidence, bootstrap), fixed once per run and recorded in run.json and every report.

use serde::{Deserialize, Serialize};

use crate::metrics::Thresholds;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Criterion {
    /// GSO's thresholds on the 95% interval, with adaptive rounds; undecided at the budget
    /// = inconclusive (not optimised).
    Strict,
    /// GSO's rule on means, to reproduce published numbers.
    Gso,
}

impl Criterion {
    pub fn as_str(self) -> &'static str {
        match self {
            Criterion::Strict => "strict",
            Criterion::Gso => "gso",
        }
    }
}

pub const CONFIDENCE: f64 = 0.95;
pub const RESAMPLES: usize = 2000;

/// How verdicts are reached; recorded in run.json and every report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecisionRule {
    pub criterion: Criterion,
    pub thresholds: Thresholds,
    pub seed: u64,
    pub confidence: f64,
    pub resamples: usize,
}
