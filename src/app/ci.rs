//! CI gates: `--fail-under opt@K=X` / `pass@k=X`, judged on a run's summary.
//!
//! Exit codes of `opt-at-k` (and `report`): 0 ok, 1 bad input or a sample ended `error`,
//! 2 a `--fail-under` threshold missed, 130 SIGINT, 143 SIGTERM; the first that applies in
//! the order 130/143, 1, 2 wins.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::core::summary::Summary;

/// The CI outputs a run's command was asked for (`opt-at-k`, `report`, `merge`).
#[derive(Debug, Clone, Default)]
pub struct CiOptions {
    /// `--junit FILE`: also write the run's JUnit XML there.
    pub junit: Option<PathBuf>,
    /// `--fail-under`, as given.
    pub fail_under: Vec<String>,
    /// `--markdown FILE`: append the summary and the thresholds' outcomes.
    pub markdown: Option<PathBuf>,
}

/// What a command prints with `--json`: the summary, the `--fail-under` outcomes when any
/// were asked, and what this invocation did (`opt-at-k`).
pub fn json_output(
    summary: &Summary,
    judged: &[GateResult],
    ci: &CiOptions,
    invocation: Option<serde_json::Value>,
) -> Result<serde_json::Value> {
    let mut json = crate::app::export::json_summary(summary);
    if let serde_json::Value::Object(m) = &mut json {
        if !ci.fail_under.is_empty() {
            m.insert("fail_under".into(), serde_json::to_value(judged)?);
        }
        if let Some(inv) = invocation {
            m.insert("invocation".into(), inv);
        }
    }
    Ok(json)
}

/// `--fail-under` thresholds as given, read (a malformed one is bad input).
pub fn parse_gates(given: &[String]) -> Result<Vec<FailUnder>> {
    given
        .iter()
        .map(|g| {
            g.parse::<FailUnder>()
                .map_err(|e| anyhow::anyhow!("--fail-under {e}"))
        })
        .collect()
}

impl CiOptions {
    /// The `--fail-under` thresholds, checked against the run's K.
    pub fn gates(&self, k_run: usize) -> Result<Vec<FailUnder>> {
        let gates = parse_gates(&self.fail_under)?;
        check_k(&gates, k_run)?;
        Ok(gates)
    }

    /// `--junit` and `--markdown` of a finished (or interrupted) run, and the thresholds
    /// judged.
    pub fn write_outputs(&self, gates: &[FailUnder], summary: &Summary) -> Result<Vec<GateResult>> {
        if let Some(path) = &self.junit {
            crate::store::run_folder::write_atomic(
                path,
                crate::app::export::junit_xml(summary).as_bytes(),
            )
            .with_context(|| format!("--junit {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        let judged = judge(summary, gates);
        if let Some(path) = &self.markdown {
            let mut text = crate::app::export::summary_markdown(summary);
            if !judged.is_empty() {
                text.push_str("\n## Thresholds\n\n");
                for line in describe(&judged).lines() {
                    text.push_str(&format!("- {}\n", line.trim()));
                }
            }
            text.push('\n');
            // Appended, not replaced: a CI job summary collects every step's text.
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .with_context(|| format!("--markdown {}: cannot append", path.display()))?;
            eprintln!("appended the summary to {}", path.display());
        }
        Ok(judged)
    }
}

/// The exit code of a run whose `--fail-under` threshold was missed.
pub const EXIT_BELOW_THRESHOLD: i32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// opt@k: unbiased over the K samples; at k = K it is Opt@K (GSO's score).
    Opt,
    /// pass@k: unbiased; pass = applied, built, test passed.
    Pass,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Opt => "opt",
            Metric::Pass => "pass",
        }
    }
}

/// One `--fail-under METRIC@k=PERCENT`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FailUnder {
    pub metric: Metric,
    pub k: usize,
    /// Percent, 0 to 100.
    pub percent: f64,
}

impl std::fmt::Display for FailUnder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}={}", self.metric.as_str(), self.k, self.percent)
    }
}

impl std::str::FromStr for FailUnder {
    type Err = String;

    /// `opt@K=X` or `pass@k=X` (case-insensitive metric, X percent, an optional `%`).
    fn from_str(s: &str) -> Result<FailUnder, String> {
        let usage = || {
            format!(
                "{s:?}: use opt@K=X or pass@k=X (k a number of samples, X a percent), e.g. opt@3=50"
            )
        };
        let (lhs, rhs) = s.split_once('=').ok_or_else(usage)?;
        let (name, k) = lhs.trim().split_once('@').ok_or_else(usage)?;
        let metric = match name.trim().to_ascii_lowercase().as_str() {
            "opt" => Metric::Opt,
            "pass" => Metric::Pass,
            _ => return Err(usage()),
        };
        let k: usize = k.trim().parse().map_err(|_| usage())?;
        if k == 0 {
            return Err(format!("{s:?}: k must be at least 1"));
        }
        let x = rhs.trim();
        let x = x.strip_suffix('%').unwrap_or(x).trim();
        let percent: f64 = x.parse().map_err(|_| usage())?;
        if !(0.0..=100.0).contains(&percent) {
            return Err(format!("{s:?}: the threshold is a percent, 0 to 100"));
        }
        Ok(FailUnder { metric, k, percent })
    }
}

/// Refuses thresholds whose k is outside 1..=K of the run.
pub fn check_k(gates: &[FailUnder], k_run: usize) -> anyhow::Result<()> {
    for g in gates {
        if g.k > k_run {
            anyhow::bail!(
                "--fail-under {g}: k = {} is outside 1..{k_run} (the run evaluates K = {k_run} samples per instance)",
                g.k
            );
        }
    }
    Ok(())
}

/// One threshold, judged.
#[derive(Debug, Clone, Serialize)]
pub struct GateResult {
    pub gate: String,
    pub metric: Metric,
    pub k: usize,
    pub threshold: f64,
    /// The run's figure in percent, two decimals (as printed).
    pub value: f64,
    pub met: bool,
}

/// The run's figure for a metric at k, in percent with two decimals: Opt@K's score at
/// k = K, else the unbiased estimate.
pub fn value(summary: &Summary, metric: Metric, k: usize) -> Option<f64> {
    let t = &summary.totals;
    let frac = match metric {
        Metric::Opt if k == summary.info.k => return Some(t.score),
        Metric::Opt => *t.opt_at_k.get(k.checked_sub(1)?)?,
        Metric::Pass => *t.pass_at_k.get(k.checked_sub(1)?)?,
    };
    // `+ 0.0` turns a -0.0 (an empty curve) into 0.0.
    Some((frac * 10000.0).round() / 100.0 + 0.0)
}

/// Judges every gate (a figure the run does not have counts as 0).
pub fn judge(summary: &Summary, gates: &[FailUnder]) -> Vec<GateResult> {
    gates
        .iter()
        .map(|g| {
            let v = value(summary, g.metric, g.k).unwrap_or(0.0);
            GateResult {
                gate: g.to_string(),
                metric: g.metric,
                k: g.k,
                threshold: g.percent,
                value: v,
                met: v >= g.percent,
            }
        })
        .collect()
}

/// One line per gate, for stderr.
pub fn describe(results: &[GateResult]) -> String {
    results
        .iter()
        .map(|r| {
            format!(
                "fail-under {}@{}: {:.2}% {} {}% {}\n",
                r.metric.as_str(),
                r.k,
                r.value,
                if r.met { ">=" } else { "<" },
                r.threshold,
                if r.met { "ok" } else { "MISSED" }
            )
        })
        .collect()
}

/// 2 when a gate was missed, else 0.
pub fn exit_code(results: &[GateResult]) -> i32 {
    if results.iter().any(|r| !r.met) {
        EXIT_BELOW_THRESHOLD
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_gates() {
        let g: FailUnder = "opt@3=50".parse().unwrap();
        assert_eq!(
            g,
            FailUnder {
                metric: Metric::Opt,
                k: 3,
                percent: 50.0
            }
        );
        let g: FailUnder = "PASS@1 = 62.5%".parse().unwrap();
        assert_eq!((g.metric, g.k, g.percent), (Metric::Pass, 1, 62.5));
        for bad in [
            "opt3=50",
            "opt@3",
            "opt@0=5",
            "foo@1=5",
            "opt@x=5",
            "opt@1=101",
            "opt@1=-1",
            "opt@1=abc",
        ] {
            assert!(bad.parse::<FailUnder>().is_err(), "{bad} should not parse");
        }
        assert!(check_k(&["opt@3=1".parse().unwrap()], 3).is_ok());
        let e = check_k(&["pass@4=1".parse().unwrap()], 3).unwrap_err();
        assert!(e.to_string().contains("outside 1..3"), "{e}");
    }
}
