//! The settings a run is measured and judged under: the decision rule and the measurement
//! budget, in one type shared by the command line (`cli::settings_args` maps its flags onto
//! it), the batch file (every key optional, over the same defaults), `run.json` and the
//! result key (serialised).

use serde::{Deserialize, Serialize};

use crate::criterion::Criterion;
use crate::estimator::Estimator;
use crate::metrics::Thresholds;
use crate::rule::{CONFIDENCE, DecisionRule, ESTIMATOR, RESAMPLES};

/// How samples are measured and judged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Decision rule for opt_base / opt_commit.
    pub criterion: Criterion,
    /// Seed of the bootstrap behind every confidence interval.
    pub seed: u64,
    /// The figure strict takes of a variant's runs (per container): min (default), mean,
    /// median or pNN (a percentile). GSO's means under gso.
    #[serde(with = "estimator_text")]
    pub estimator: Option<Estimator>,
    /// Measured rounds at least, for every task (default: the most `runs` of its benches).
    pub min_rounds: Option<u32>,
    /// Measured rounds at most under strict (default: the most `max_runs` of its benches).
    /// Strict needs 5 paired rounds for an interval: below that nothing is decided.
    pub max_rounds: Option<u32>,
    /// Wall-time budget of each task's measurement (default: the task's measure.max_seconds).
    pub max_measure_seconds: Option<f64>,
    /// Containers per variant under strict (default: the task's measure.replicas, else 5).
    pub replicas: Option<u32>,
    /// Timed repetitions of a bench in one exec under strict, the fastest taken (default:
    /// the task's measure.repetitions, else 3).
    pub repetitions: Option<u32>,
    /// opt_base needs round(GM speedup over base, 1) >= this.
    pub min_speedup: f64,
    /// opt_commit needs HM of (human time / patch time) > this.
    pub opt_thresh: f64,
    /// Multiply every timeout by this.
    pub timeout_scale: f64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            criterion: Criterion::STRICT,
            seed: 0,
            estimator: None,
            min_rounds: None,
            max_rounds: None,
            max_measure_seconds: None,
            replicas: None,
            repetitions: None,
            min_speedup: 1.2,
            opt_thresh: 0.95,
            timeout_scale: 1.0,
        }
    }
}

/// What the measurement may spend, from the command line over each task's own settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub min_rounds: Option<u32>,
    pub max_rounds: Option<u32>,
    /// None: the task's own `measure.max_seconds`.
    pub max_seconds: Option<f64>,
    pub timeout_scale: f64,
    /// Containers per variant (None: the task's, or the default).
    pub replicas: Option<u32>,
    /// Repetitions per exec (None: the task's, or the default).
    pub repetitions: Option<u32>,
}

impl Settings {
    /// The names of the settings, as the batch file and run.json spell them.
    pub fn keys() -> Vec<String> {
        match serde_json::to_value(Settings::default()) {
            Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// Every problem, as (setting, why): the caller names the setting its way (`--seed`,
    /// `seed`).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (key, v) in [
            ("timeout_scale", Some(self.timeout_scale)),
            ("min_speedup", Some(self.min_speedup)),
            ("opt_thresh", Some(self.opt_thresh)),
            ("max_measure_seconds", self.max_measure_seconds),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v > 0.0)
            {
                out.push((key, format!("{v} is not a positive number")));
            }
        }
        for (key, v) in [
            ("min_rounds", self.min_rounds),
            ("max_rounds", self.max_rounds),
            ("replicas", self.replicas),
            ("repetitions", self.repetitions),
        ] {
            if v == Some(0) {
                out.push((key, "must be at least 1".into()));
            }
        }
        if let (Some(min), Some(max)) = (self.min_rounds, self.max_rounds)
            && max < min
        {
            out.push(("max_rounds", format!("{max} is below min_rounds {min}")));
        }
        out
    }

    /// The rule the verdicts are reached by.
    pub fn rule(&self) -> DecisionRule {
        DecisionRule {
            criterion: self.criterion,
            thresholds: Thresholds {
                min_speedup: self.min_speedup,
                opt_thresh: self.opt_thresh,
            },
            seed: self.seed,
            confidence: CONFIDENCE,
            resamples: RESAMPLES,
            estimator: self.estimator.unwrap_or(ESTIMATOR),
        }
    }

    /// What every task's measurement may spend.
    pub fn budget(&self) -> Budget {
        Budget {
            min_rounds: self.min_rounds,
            max_rounds: self.max_rounds,
            max_seconds: self.max_measure_seconds,
            timeout_scale: self.timeout_scale,
            replicas: self.replicas,
            repetitions: self.repetitions,
        }
    }
}

/// An estimator as the command line spells it (`min`, `median`, `p10`...).
mod estimator_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::estimator::Estimator;

    pub fn serialize<S: Serializer>(e: &Option<Estimator>, s: S) -> Result<S::Ok, S::Error> {
        match e {
            None => s.serialize_none(),
            Some(e) => s.serialize_str(&e.as_flag()),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Estimator>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| t.parse::<Estimator>().map_err(serde::de::Error::custom))
            .transpose()
    }
}
