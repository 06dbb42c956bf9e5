//! `summary.md`: the run's tables for people.

use super::text::*;
use super::{Exporter, Summary};
use crate::core::text::for_markdown as md;
use crate::store::run_folder::names;

/// `summary.md`.
pub struct SummaryMarkdown;

impl Exporter for SummaryMarkdown {
    fn files(&self, summary: &Summary) -> anyhow::Result<Vec<super::ReportFile>> {
        super::single(names::SUMMARY_MD, summary_markdown(summary).into_bytes())
    }
}

/// `summary.md`. Every piece of text the harness did not write itself (a detail, a
/// warning, an id, a model or machine name read from the run folder) goes through
/// `core::text::for_markdown`: GitHub renders this file (and `--markdown`'s copy of it).
pub fn summary_markdown(summary: &Summary) -> String {
    let t = &summary.totals;
    let info = &summary.info;
    let mut out = format!(
        "# {} — Opt@{} = {:.2}%{}\n\n",
        md(&info.model),
        info.k,
        t.score,
        if t.complete { "" } else { " (partial)" }
    );
    out.push_str(&format!("{}\n\n", super::text::opt_p_line(summary)));
    if let Some(agents) = &t.agents {
        out.push_str(&format!("{}\n\n", super::spend::totals_line(agents)));
    }
    if let Some(line) = super::text::hack_line(summary) {
        out.push_str(&format!("{}\n\n", md(&line)));
    }
    if let Some(line) = skipped_line(summary) {
        out.push_str(&format!("{}\n\n", md(&line)));
    }
    if let Some(line) = partial_line(summary) {
        out.push_str(&format!("**{}**\n\n", md(&line)));
    }
    out.push_str(&format!("{}\n\n", md(&header_line(summary))));
    let fp = &info.fingerprint;
    let gpus = if fp.gpus.is_empty() {
        String::new()
    } else {
        format!(
            ", GPUs: {} (driver {})",
            md(&fp.gpus.join(", ")),
            md(fp.gpu_driver.as_deref().unwrap_or("unknown"))
        )
    };
    out.push_str(&format!(
        "Dataset {} (digest {}), machine: {} ({} cores){gpus}, Docker {}, harness {} ({}).\n\n",
        md(&info.dataset),
        md(&info.dataset_digest.chars().take(16).collect::<String>()),
        md(&fp.cpu_model),
        fp.cores,
        md(&fp.docker_version),
        md(&info.harness_version),
        md(&fp.harness_commit)
    ));
    out.push_str(&format!(
        "Measurement budget overrides: min rounds {}, max rounds {}, max seconds {} (none: each task's own).\n\n",
        info.settings.min_rounds.map(|v| v.to_string()).unwrap_or_else(|| "none".into()),
        info.settings.max_rounds.map(|v| v.to_string()).unwrap_or_else(|| "none".into()),
        info.settings.max_measure_seconds.map(|v| v.to_string()).unwrap_or_else(|| "none".into()),
    ));
    out.push_str(&format!(
        "| k | pass@k | {:.0}% CI | opt@k | {:.0}% CI |\n|---|---|---|---|---|\n",
        info.decision_rule.confidence * 100.0,
        info.decision_rule.confidence * 100.0
    ));
    for (i, (p, o)) in t.pass_at_k.iter().zip(&t.opt_at_k).enumerate() {
        out.push_str(&format!(
            "| {} | {} |{} | {} |{} |\n",
            i + 1,
            pct(*p),
            pct_ci(t.pass_at_k_ci.get(i)),
            pct(*o),
            pct_ci(t.opt_at_k_ci.get(i))
        ));
    }
    out.push_str("\n## Instances (best of K)\n\n| instance | best status | opt_base | opt_commit |\n|---|---|---|---|\n");
    for inst in &summary.instances {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            md(&inst.instance_id),
            inst.best_status
                .map(|s| s.as_str())
                .unwrap_or("not submitted"),
            yes(inst.opt_base),
            yes(inst.opt_commit)
        ));
    }
    out.push_str(&samples_table(summary));
    let mut task_warnings: Vec<String> = Vec::new();
    for inst in &summary.instances {
        for w in inst.samples.iter().flat_map(|s| &s.warnings) {
            let line = md(&format!("{}: {w}", inst.instance_id));
            if !task_warnings.contains(&line) {
                task_warnings.push(line);
            }
        }
    }
    if !task_warnings.is_empty() {
        out.push_str("\n## Task warnings\n\n");
        for w in &task_warnings {
            out.push_str(&format!("- {w}\n"));
        }
    }
    if !info.warnings.is_empty() {
        out.push_str("\n## Input warnings\n\n");
        for w in &info.warnings {
            out.push_str(&format!("- {}\n", md(w)));
        }
    }
    out
}

/// The "Samples" section: one row per sample.
fn samples_table(summary: &Summary) -> String {
    let mut out = String::new();
    let agents = super::spend::with_agents(summary);
    let mut headers: Vec<&str> = HEADERS.to_vec();
    headers.push("change");
    if agents {
        headers.push("agent spend");
    }
    headers.push("detail");
    out.push_str("\n## Samples\n\n| ");
    out.push_str(&headers.join(" | "));
    out.push_str(" |\n|");
    out.push_str(&"---|".repeat(headers.len()));
    out.push('\n');
    for inst in &summary.instances {
        for s in &inst.samples {
            let (gm, hm) = speedups(s);
            let spend = if agents {
                format!("{} | ", md(&super::spend::spend_cell(s)))
            } else {
                String::new()
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {spend}{} |\n",
                md(&inst.instance_id),
                s.sample,
                s.status,
                md(s.apply_strategy.as_deref().unwrap_or("-")),
                gm,
                hm,
                decision(s.decision_base),
                decision(s.decision_commit),
                super::spend::change_cell(s),
                md(&s.detail)
            ));
        }
    }
    out
}
