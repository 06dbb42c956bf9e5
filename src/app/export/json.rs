//! `summary.json`: what `--json` prints, as a file of the run folder.

use super::{Exporter, Summary};
use crate::store::run_folder::names;

/// `summary.json`.
pub struct JsonSummary;

impl Exporter for JsonSummary {
    fn files(&self, summary: &Summary) -> anyhow::Result<Vec<super::ReportFile>> {
        let mut text = serde_json::to_string_pretty(&json_summary(summary))?;
        text.push('\n');
        super::single(names::SUMMARY_JSON, text.into_bytes())
    }
}

/// `--json`: the machine-readable summary on stdout.
pub fn json_summary(summary: &Summary) -> serde_json::Value {
    serde_json::json!({
        "run_id": summary.info.run_id,
        "model": summary.info.model,
        "k": summary.info.k,
        "criterion": summary.info.decision_rule.criterion,
        "thresholds": summary.info.decision_rule.thresholds,
        "decision_rule": summary.info.decision_rule,
        "totals": summary.totals,
        "instances": summary.instances.iter().map(|i| serde_json::json!({
            "instance_id": i.instance_id,
            "best_status": i.best_status.map(|s| s.as_str()),
            "opt_base": i.opt_base,
            "opt_commit": i.opt_commit,
            "inconclusive": i.inconclusive,
            "samples": i.samples.iter().map(|s| serde_json::json!({
                "sample": s.sample,
                "status": s.status.as_str(),
                "opt_base": s.opt_base,
                "opt_commit": s.opt_commit,
                "inconclusive": s.inconclusive,
                "measured_rounds": s.measured_rounds,
                "gm_speedup_patch_base": s.opt_stats.as_ref().map(|x| x.gm_speedup_patch_base),
                "hm_speedup_patch_commit": s.opt_stats.as_ref().map(|x| x.hm_speedup_patch_commit),
                "gm_speedup_patch_base_ci": s.intervals.as_ref().map(|x| [x.gm_speedup_patch_base.lo, x.gm_speedup_patch_base.hi]),
                "hm_speedup_patch_commit_ci": s.intervals.as_ref().map(|x| [x.hm_speedup_patch_commit.lo, x.hm_speedup_patch_commit.hi]),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
