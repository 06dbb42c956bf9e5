//! `harness report RUN_DIR`: every report rebuilt from the saved results, with no Docker;
//! with a rule option, every sample judged again from its saved timings first.

pub mod regrade;

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::app::ci::CiOptions;
use crate::core::criterion::Criterion;
use crate::core::estimator::Estimator;
use crate::core::rule::DecisionRule;
use crate::store::run_folder::RunDir;

/// A rule to judge the samples again under: each option over the run's current rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuleOverrides {
    pub criterion: Option<Criterion>,
    pub min_speedup: Option<f64>,
    pub opt_thresh: Option<f64>,
    pub seed: Option<u64>,
    pub estimator: Option<Estimator>,
}

impl RuleOverrides {
    fn any(&self) -> bool {
        self.criterion.is_some()
            || self.min_speedup.is_some()
            || self.opt_thresh.is_some()
            || self.seed.is_some()
            || self.estimator.is_some()
    }

    /// `old` with the overrides, checked.
    fn over(&self, old: DecisionRule) -> Result<DecisionRule> {
        let criterion = self.criterion.unwrap_or(old.criterion);
        if criterion.figure() != old.criterion.figure() {
            anyhow::bail!(
                "--criterion {criterion}: the run was measured under {}; simulated counts and clock timings cannot be regraded into each other (run the command again with --criterion {criterion})",
                old.criterion
            );
        }
        let rule = DecisionRule {
            criterion,
            thresholds: crate::core::metrics::Thresholds {
                min_speedup: self.min_speedup.unwrap_or(old.thresholds.min_speedup),
                opt_thresh: self.opt_thresh.unwrap_or(old.thresholds.opt_thresh),
            },
            seed: self.seed.unwrap_or(old.seed),
            estimator: self.estimator.unwrap_or(old.estimator),
            ..old
        };
        for (flag, v) in [
            ("--min-speedup", rule.thresholds.min_speedup),
            ("--opt-thresh", rule.thresholds.opt_thresh),
        ] {
            if !(v.is_finite() && v > 0.0) {
                anyhow::bail!("{flag}: {v} is not a positive number");
            }
        }
        Ok(rule)
    }
}

/// What `harness report` is asked.
pub struct ReportOptions {
    pub run_dir: PathBuf,
    pub json: bool,
    pub allow_mixed_machines: bool,
    pub regrade: RuleOverrides,
    /// `--hacked-ids FILE`: recorded in run.json, so later reports keep it.
    pub hacked_ids: Option<PathBuf>,
    pub ci: CiOptions,
    /// `-q`: the summary without the list of files written; `-v`: the table of every sample
    /// however long.
    pub verbosity: crate::core::events::Verbosity,
}

pub fn command(o: ReportOptions) -> Result<i32> {
    let run = RunDir {
        root: o.run_dir.clone(),
    };
    let gates = if o.ci.fail_under.is_empty() {
        Vec::new()
    } else {
        o.ci.gates(run.load_run_info()?.k)?
    };
    if o.regrade.any() {
        let rule = o.regrade.over(run.load_run_info()?.decision_rule)?;
        let r = regrade::regrade(&run, rule)?;
        eprintln!(
            "regraded {} measured sample(s) from their saved timings under criterion {} (min_speedup {}, opt_thresh {}, seed {}); {} changed verdict",
            r.samples,
            rule.criterion.as_str(),
            rule.thresholds.min_speedup,
            rule.thresholds.opt_thresh,
            rule.seed,
            r.changed
        );
    }
    if let Some(path) = &o.hacked_ids {
        let hacked = crate::store::inputs::load_hacked_ids(path)?;
        let mut info = run.load_run_info()?;
        info.hacked = Some(hacked);
        run.store().write_json(&run.run_json(), &info)?;
    }
    let summary = crate::store::run_folder::summarise(&run)
        .with_context(|| format!("{}: cannot summarise", o.run_dir.display()))?;
    let mixed = crate::core::summary::mixed_fingerprints(&summary);
    if !mixed.is_empty() {
        if !o.allow_mixed_machines {
            anyhow::bail!(
                "{}: {} sample(s) were measured on another machine or harness build than run.json's ({}): {}\n\
                 rerun them here (repeat the run command), or pass --allow-mixed-machines to report anyway",
                o.run_dir.display(),
                mixed.len(),
                summary.info.fingerprint_id,
                mixed.join(", ")
            );
        }
        eprintln!(
            "warning: reporting samples from other machines: {}",
            crate::core::text::for_terminal(&mixed.join(", "))
        );
    }
    let files = crate::app::export::write_all(&run, &summary)?;
    let judged = o.ci.write_outputs(&gates, &summary)?;
    if o.json {
        let json = crate::app::ci::json_output(&summary, &judged, &o.ci, None)?;
        crate::outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let verbose = o.verbosity == crate::core::events::Verbosity::Verbose;
        crate::out!(
            "{}",
            crate::app::export::run_ending(&summary, &o.run_dir, verbose)
        );
        let quiet = o.verbosity == crate::core::events::Verbosity::Quiet;
        for f in files.iter().filter(|_| !quiet) {
            crate::outln!("wrote {}", f.display());
        }
    }
    eprint!("{}", crate::app::ci::describe(&judged));
    Ok(crate::app::ci::exit_code(&judged))
}
