//! How the runs of one variant and bench become the one figure its speedups are taken from.

use serde::{Deserialize, Serialize};

/// How the runs of one variant and bench make the figure its speedups are taken from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Estimator {
    /// The mean of the runs (GSO's, and this harness's before it measured better).
    #[default]
    Mean,
    /// A low quantile of the runs (0.1 = the 10th percentile, linear between runs): the time
    /// of a run the machine did not slow down. Noise on a shared machine only ever adds
    /// time, in bursts; the low tail stays put while the mean moves with every burst.
    Quantile(f64),
}

impl std::str::FromStr for Estimator {
    type Err = String;

    /// `mean`, `median`, `min`, or `pNN` (the NN-th percentile, 1 to 99).
    fn from_str(s: &str) -> Result<Estimator, String> {
        match s {
            "mean" => Ok(Estimator::Mean),
            "median" => Ok(Estimator::Quantile(0.5)),
            "min" => Ok(Estimator::Quantile(0.0)),
            _ => s
                .strip_prefix('p')
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| (1..=99).contains(n))
                .map(|n| Estimator::Quantile(f64::from(n) / 100.0))
                .ok_or_else(|| {
                    format!("{s:?}: use mean, median, min or pNN (a percentile, p1 to p99)")
                }),
        }
    }
}

impl Estimator {
    /// As the command line and the batch file spell it (what `from_str` reads).
    pub fn as_flag(self) -> String {
        match self {
            Estimator::Mean => "mean".into(),
            Estimator::Quantile(q) if q <= 0.0 => "min".into(),
            Estimator::Quantile(q) if (q - 0.5).abs() < 1e-9 => "median".into(),
            Estimator::Quantile(q) => format!("p{:.0}", q * 100.0),
        }
    }

    pub fn describe(self) -> String {
        match self {
            Estimator::Mean => "mean".into(),
            Estimator::Quantile(q) if q <= 0.0 => "minimum".into(),
            Estimator::Quantile(q) => format!("{:.0}th percentile", q * 100.0),
        }
    }
}
