//! Human-readable reports: the terminal table, `summary.md`, `results.csv`.

use super::Summary;
use crate::results::SampleReport;

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

fn speedups(s: &SampleReport) -> (String, String) {
    match (&s.opt_stats, &s.intervals) {
        (Some(st), Some(iv)) => (
            format!(
                "{:.2}x [{:.2}, {:.2}]",
                st.gm_speedup_patch_base, iv.gm_speedup_patch_base.lo, iv.gm_speedup_patch_base.hi
            ),
            format!(
                "{:.2} [{:.2}, {:.2}]",
                st.hm_speedup_patch_commit,
                iv.hm_speedup_patch_commit.lo,
                iv.hm_speedup_patch_commit.hi
            ),
        ),
        (Some(st), None) => (
            format!("{:.2}x", st.gm_speedup_patch_base),
            format!("{:.2}", st.hm_speedup_patch_commit),
        ),
        _ => ("-".into(), "-".into()),
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn decision(d: crate::stats::Decision) -> &'static str {
    match d {
        crate::stats::Decision::Yes => "yes",
        crate::stats::Decision::No => "no",
        crate::stats::Decision::Undecided => "undecided",
    }
}

struct Row {
    cells: Vec<String>,
}

/// Whether any sample has GPU energy: the table then shows it beside the speedup.
fn with_energy(summary: &Summary) -> bool {
    summary
        .instances
        .iter()
        .flat_map(|i| &i.samples)
        .any(|s| s.energy.is_some())
}

fn energy_cell(s: &SampleReport) -> String {
    match &s.energy {
        Some(e) => format!("{:.1} J ({:.2}x)", e.patch_j, e.base_over_patch),
        None => "-".into(),
    }
}

fn headers(summary: &Summary) -> Vec<String> {
    let mut h: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    if with_energy(summary) {
        h.insert(5, "GPU energy/round (base/patch)".into());
    }
    h
}

fn rows(summary: &Summary) -> Vec<Row> {
    let energy = with_energy(summary);
    let mut out = Vec::new();
    for inst in &summary.instances {
        if inst.samples.is_empty() {
            out.push(Row {
                cells: vec![
                    inst.instance_id.clone(),
                    "-".into(),
                    "not submitted".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "no".into(),
                    "no".into(),
                ],
            });
            if energy && let Some(r) = out.last_mut() {
                r.cells.insert(5, "-".into());
            }
        }
        for s in &inst.samples {
            let (gm, hm) = speedups(s);
            out.push(Row {
                cells: vec![
                    inst.instance_id.clone(),
                    s.sample.to_string(),
                    s.status.to_string(),
                    s.apply_strategy.clone().unwrap_or_else(|| "-".into()),
                    gm,
                    hm,
                    decision(s.decision_base).into(),
                    decision(s.decision_commit).into(),
                ],
            });
            if energy && let Some(r) = out.last_mut() {
                r.cells.insert(5, energy_cell(s));
            }
        }
    }
    out
}

const HEADERS: [&str; 8] = [
    "instance",
    "sample",
    "status",
    "applied with",
    "speedup vs base",
    "HM vs human",
    "opt_base",
    "opt_commit",
];

fn header_line(summary: &Summary) -> String {
    let info = &summary.info;
    format!(
        "model {}, run {}, K={}, {} instances, criterion {} (min_speedup {}, opt_thresh {}, {:.0}% intervals, seed {})",
        info.model,
        info.run_id,
        info.k,
        summary.totals.total_instances,
        info.criterion,
        info.thresholds.min_speedup,
        info.thresholds.opt_thresh,
        info.decision_rule.confidence * 100.0,
        info.decision_rule.seed
    )
}

fn pct_ci(ci: Option<&[f64; 2]>) -> String {
    ci.map(|[lo, hi]| format!(" [{:.2}, {:.2}]", lo * 100.0, hi * 100.0))
        .unwrap_or_default()
}

fn curve_line(xs: &[f64], ci: &[[f64; 2]]) -> String {
    xs.iter()
        .enumerate()
        .map(|(i, v)| format!("k={} {}{}", i + 1, pct(*v), pct_ci(ci.get(i))))
        .collect::<Vec<_>>()
        .join("  ")
}

/// A header and rows as left-aligned columns two spaces apart, one line each.
pub fn columns(header: &[String], rows: &[&[String]]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = String::new();
    for cells in std::iter::once(header).chain(rows.iter().copied()) {
        out.push_str(&line(cells));
        out.push('\n');
    }
    out
}

/// The table printed at the end of a run.
pub fn terminal_summary(summary: &Summary) -> String {
    let rows = rows(summary);
    let cells: Vec<&[String]> = rows.iter().map(|r| r.cells.as_slice()).collect();
    let mut out = columns(&headers(summary), &cells);
    let t = &summary.totals;
    out.push('\n');
    out.push_str(&header_line(summary));
    out.push('\n');
    let statuses: Vec<String> = t
        .by_status
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    out.push_str(&format!("best-of-K status: {}\n", statuses.join(", ")));
    out.push_str(&format!(
        "pass@k: {}\n",
        curve_line(&t.pass_at_k, &t.pass_at_k_ci)
    ));
    out.push_str(&format!(
        "opt@k:  {}\n",
        curve_line(&t.opt_at_k, &t.opt_at_k_ci)
    ));
    if t.inconclusive_samples > 0 {
        out.push_str(&format!(
            "inconclusive: {} sample(s), {} instance(s) — undecided within the measurement budget, counted as not optimised\n",
            t.inconclusive_samples, t.inconclusive
        ));
    }
    out.push_str(&format!(
        "Opt@{}: {:.2}%{}  ({} of {} instances opt_commit; opt_base {})\n",
        summary.info.k,
        t.score,
        if t.complete { "" } else { " (partial)" },
        t.opt_commit,
        t.total_instances,
        t.opt_base
    ));
    if let Some(line) = skipped_line(summary) {
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(line) = partial_line(summary) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// One line naming the instances skipped for want of GPUs, when there are some.
pub fn skipped_line(summary: &Summary) -> Option<String> {
    let ids = &summary.totals.skipped_ids;
    (!ids.is_empty()).then(|| {
        format!(
            "skipped (--skip-gpu; this host cannot run GPU tasks): {} instance(s), not counted in any score: {}",
            ids.len(),
            ids.join(", ")
        )
    })
}

/// One line saying why the scores above are partial, when they are.
pub fn partial_line(summary: &Summary) -> Option<String> {
    let t = &summary.totals;
    if t.complete {
        return None;
    }
    let why = match &t.interrupted {
        Some(sig) => format!("the run was interrupted ({sig})"),
        None => "some samples did not run to a result".to_string(),
    };
    let list = if t.not_run_ids.len() > 8 {
        format!("{} …", t.not_run_ids[..8].join(", "))
    } else {
        t.not_run_ids.join(", ")
    };
    Some(format!(
        "PARTIAL: {why}; {} instance(s) not run or ended `error`{}{list} — the scores count them as failures; repeat the command to finish the run",
        t.not_run_ids.len(),
        if list.is_empty() { "" } else { ": " }
    ))
}

/// `summary.md`.
pub fn summary_markdown(summary: &Summary) -> String {
    let t = &summary.totals;
    let info = &summary.info;
    let mut out = format!(
        "# {} — Opt@{} = {:.2}%{}\n\n",
        info.model,
        info.k,
        t.score,
        if t.complete { "" } else { " (partial)" }
    );
    if let Some(line) = skipped_line(summary) {
        out.push_str(&format!("{line}\n\n"));
    }
    if let Some(line) = partial_line(summary) {
        out.push_str(&format!("**{line}**\n\n"));
    }
    out.push_str(&format!("{}\n\n", header_line(summary)));
    let fp = &info.fingerprint;
    let gpus = if fp.gpus.is_empty() {
        String::new()
    } else {
        format!(
            ", GPUs: {} (driver {})",
            fp.gpus.join(", "),
            fp.gpu_driver.as_deref().unwrap_or("unknown")
        )
    };
    out.push_str(&format!(
        "Dataset `{}` (digest `{}`), machine: {} ({} cores){gpus}, Docker {}, harness {} ({}).\n\n",
        info.dataset,
        &info.dataset_digest[..info.dataset_digest.len().min(16)],
        fp.cpu_model,
        fp.cores,
        fp.docker_version,
        info.harness_version,
        fp.harness_commit
    ));
    out.push_str(&format!(
        "Measurement budget overrides: min rounds {}, max rounds {}, max seconds {} (none: each task's own).\n\n",
        info.min_rounds.map(|v| v.to_string()).unwrap_or_else(|| "none".into()),
        info.max_rounds.map(|v| v.to_string()).unwrap_or_else(|| "none".into()),
        info.max_measure_seconds.map(|v| v.to_string()).unwrap_or_else(|| "none".into()),
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
            inst.instance_id,
            inst.best_status
                .map(|s| s.as_str())
                .unwrap_or("not submitted"),
            yes(inst.opt_base),
            yes(inst.opt_commit)
        ));
    }
    out.push_str("\n## Samples\n\n| ");
    out.push_str(&HEADERS.join(" | "));
    out.push_str(" | detail |\n|");
    out.push_str(&"---|".repeat(HEADERS.len() + 1));
    out.push('\n');
    for inst in &summary.instances {
        for s in &inst.samples {
            let (gm, hm) = speedups(s);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                inst.instance_id,
                s.sample,
                s.status,
                s.apply_strategy.as_deref().unwrap_or("-"),
                gm,
                hm,
                decision(s.decision_base),
                decision(s.decision_commit),
                s.detail.replace('|', "\\|").replace('\n', " ")
            ));
        }
    }
    if !info.warnings.is_empty() {
        out.push_str("\n## Input warnings\n\n");
        for w in &info.warnings {
            out.push_str(&format!("- {}\n", w.replace('\n', " ")));
        }
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `results.csv`: one row per sample.
pub fn results_csv(summary: &Summary) -> String {
    let mut out = String::from(
        "instance_id,sample,status,apply_strategy,opt_base,opt_commit,inconclusive,gm_speedup_patch_base,gm_ci_lo,gm_ci_hi,hm_speedup_patch_commit,hm_ci_lo,hm_ci_hi,base_mean,patch_mean,commit_mean,measured_rounds,energy_base_j,energy_patch_j,energy_base_over_patch,detail\n",
    );
    for inst in &summary.instances {
        for s in &inst.samples {
            let num = |f: fn(&crate::metrics::OptStats) -> f64| {
                s.opt_stats
                    .as_ref()
                    .map(|st| format!("{}", f(st)))
                    .unwrap_or_default()
            };
            let ci = |f: fn(&crate::stats::SpeedupIntervals) -> f64| {
                s.intervals
                    .as_ref()
                    .map(|iv| format!("{}", f(iv)))
                    .unwrap_or_default()
            };
            let energy = |f: fn(&crate::timings::EnergySummary) -> f64| {
                s.energy
                    .as_ref()
                    .map(|e| format!("{}", f(e)))
                    .unwrap_or_default()
            };
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                csv_field(&inst.instance_id),
                s.sample,
                s.status,
                csv_field(s.apply_strategy.as_deref().unwrap_or("")),
                s.opt_base,
                s.opt_commit,
                s.inconclusive,
                num(|x| x.gm_speedup_patch_base),
                ci(|iv| iv.gm_speedup_patch_base.lo),
                ci(|iv| iv.gm_speedup_patch_base.hi),
                num(|x| x.hm_speedup_patch_commit),
                ci(|iv| iv.hm_speedup_patch_commit.lo),
                ci(|iv| iv.hm_speedup_patch_commit.hi),
                num(|x| x.base_mean),
                num(|x| x.patch_mean),
                num(|x| x.commit_mean),
                s.measured_rounds,
                energy(|e| e.base_j),
                energy(|e| e.patch_j),
                energy(|e| e.base_over_patch),
                csv_field(&s.detail)
            ));
        }
    }
    out
}
