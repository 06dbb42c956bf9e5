//! The terminal's report: the table of every sample and the scores, and the pieces the
//! markdown and CSV exporters share with it.

use super::Summary;
use crate::core::records::SampleReport;

pub(super) fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

pub(super) fn speedups(s: &SampleReport) -> (String, String) {
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

pub(super) fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

pub(super) fn decision(d: crate::core::stats::Decision) -> &'static str {
    match d {
        crate::core::stats::Decision::Yes => "yes",
        crate::core::stats::Decision::No => "no",
        crate::core::stats::Decision::Undecided => "undecided",
    }
}

pub(super) struct Row {
    pub(super) cells: Vec<String>,
}

/// Whether any sample has GPU energy: the table then shows it beside the speedup.
pub(super) fn with_energy(summary: &Summary) -> bool {
    summary
        .instances
        .iter()
        .flat_map(|i| &i.samples)
        .any(|s| s.energy.is_some())
}

pub(super) fn energy_cell(s: &SampleReport) -> String {
    match &s.energy {
        Some(e) => format!("{:.1} J ({:.2}x)", e.patch_j, e.base_over_patch),
        None => "-".into(),
    }
}

pub(super) fn headers(summary: &Summary) -> Vec<String> {
    let mut h: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    if with_energy(summary) {
        h.insert(5, "GPU energy/round (base/patch)".into());
    }
    h.push("change".into());
    if super::spend::with_agents(summary) {
        h.push("agent spend".into());
    }
    h
}

pub(super) fn rows(summary: &Summary) -> Vec<Row> {
    let energy = with_energy(summary);
    let agents = super::spend::with_agents(summary);
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
            if let Some(r) = out.last_mut() {
                if energy {
                    r.cells.insert(5, "-".into());
                }
                r.cells.push("-".into());
                if agents {
                    r.cells.push("-".into());
                }
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
            if let Some(r) = out.last_mut() {
                if energy {
                    r.cells.insert(5, energy_cell(s));
                }
                r.cells.push(super::spend::change_cell(s));
                if agents {
                    r.cells.push(super::spend::spend_cell(s));
                }
            }
        }
    }
    out
}

pub(super) const HEADERS: [&str; 8] = [
    "instance",
    "sample",
    "status",
    "applied with",
    "speedup vs base",
    "HM vs human",
    "opt_base",
    "opt_commit",
];

pub(super) fn header_line(summary: &Summary) -> String {
    let info = &summary.info;
    let rule = &info.decision_rule;
    // A simulated count is one number per variant: it has no interval.
    let how = if rule.criterion.figure() == crate::core::criterion::Figure::SimulatedCycles {
        "estimated cycles counted by cachegrind, one count per variant".to_string()
    } else {
        format!("{:.0}% intervals", rule.confidence * 100.0)
    };
    format!(
        "model {}, run {}, K={}, {} instances, criterion {} (min_speedup {}, opt_thresh {}, {how}, seed {})",
        info.model,
        info.run_id,
        info.k,
        summary.totals.total_instances,
        rule.criterion,
        rule.thresholds.min_speedup,
        rule.thresholds.opt_thresh,
        rule.seed
    )
}

pub(super) fn pct_ci(ci: Option<&[f64; 2]>) -> String {
    ci.map(|[lo, hi]| format!(" [{:.2}, {:.2}]", lo * 100.0, hi * 100.0))
        .unwrap_or_default()
}

pub(super) fn curve_line(xs: &[f64], ci: &[[f64; 2]]) -> String {
    xs.iter()
        .enumerate()
        .map(|(i, v)| format!("k={} {}{}", i + 1, pct(*v), pct_ci(ci.get(i))))
        .collect::<Vec<_>>()
        .join("  ")
}

/// A header and rows as left-aligned columns two spaces apart (`app::table`).
pub fn columns(header: &[String], rows: &[&[String]]) -> String {
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.to_vec()).collect();
    crate::app::table::render(header, &rows, &[])
}

/// The table printed at the end of a run.
pub fn terminal_summary(summary: &Summary) -> String {
    let rows = rows(summary);
    let cells: Vec<&[String]> = rows.iter().map(|r| r.cells.as_slice()).collect();
    let mut out = columns(&headers(summary), &cells);
    out.push('\n');
    out.push_str(&scores(summary));
    out
}

/// The per-sample table is printed when it has at most this many rows (or with -v).
pub const SHORT_TABLE: usize = 20;

/// What a finished run prints: the table of every sample when it is short (or with
/// `verbose`), the scores, and a headline that ends by pointing at the run's page.
pub fn run_ending(summary: &Summary, run_dir: &std::path::Path, verbose: bool) -> String {
    let samples: usize = summary.instances.iter().map(|i| i.samples.len()).sum();
    let mut out = if verbose || samples <= SHORT_TABLE {
        terminal_summary(summary)
    } else {
        format!(
            "{samples} samples: every one is in summary.md and on the page (or run with -v)\n\n{}",
            scores(summary)
        )
    };
    let show = crate::core::text::for_terminal;
    out.push('\n');
    out.push_str(&show(&headline(summary)));
    out.push('\n');
    out.push_str(&format!(
        "page: {}\n",
        show(
            &run_dir
                .join(crate::store::run_folder::names::REPORT_HTML)
                .display()
                .to_string()
        )
    ));
    out
}

/// Opt@K with its interval, pass@1, how many measured samples were decided, the run's wall
/// time.
pub fn headline(summary: &Summary) -> String {
    let t = &summary.totals;
    let k = summary.info.k;
    let opt_ci = t.opt_at_k_ci.get(k.saturating_sub(1));
    let mut parts = vec![format!(
        "Opt@{k} {:.2}%{}{}",
        t.score,
        pct_ci(opt_ci),
        if t.complete { "" } else { " (partial)" }
    )];
    if let Some(p1) = t.pass_at_k.first() {
        parts.push(format!(
            "pass@1 {}{}",
            pct(*p1),
            pct_ci(t.pass_at_k_ci.first())
        ));
    }
    let measured = summary
        .instances
        .iter()
        .flat_map(|i| &i.samples)
        .filter(|s| s.opt_stats.is_some())
        .count();
    parts.push(match t.inconclusive_samples {
        0 => format!("decided {measured} of {measured} measured samples"),
        n => format!(
            "decided {} of {measured} measured samples ({n} inconclusive)",
            measured.saturating_sub(n)
        ),
    });
    if let Some(wall) = wall_time(&summary.info) {
        parts.push(format!("wall {wall}"));
    }
    if let Some(agents) = &t.agents {
        parts.push(format!(
            "agents {}",
            crate::core::spend::dollars_text(agents.cost_usd)
        ));
    }
    parts.join(" · ")
}

/// From the run's start to its end, as `1h 02m`, `3m 05s` or `42s`.
/// An RFC 3339 time of run.json to the minute, as the tables and pages show it
/// (`2026-11-26 23:38`).
pub fn to_the_minute(rfc3339: &str) -> String {
    rfc3339
        .chars()
        .take(16)
        .collect::<String>()
        .replace('T', " ")
}

pub(crate) fn wall_time(info: &crate::core::records::RunInfo) -> Option<String> {
    let parse = |s: &str| chrono::DateTime::parse_from_rfc3339(s).ok();
    let secs = (parse(info.finished_at.as_deref()?)? - parse(&info.started_at)?).num_seconds();
    Some(match secs {
        s if s < 0 => return None,
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m {:02}s", s / 60, s % 60),
        s => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    })
}

/// The run's settings line and its scores.
fn scores(summary: &Summary) -> String {
    let t = &summary.totals;
    let show = crate::core::text::for_terminal;
    let mut out = String::new();
    out.push_str(&show(&header_line(summary)));
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
    out.push_str(&opt_p_line(summary));
    out.push('\n');
    if let Some(agents) = &t.agents {
        out.push_str(&super::spend::totals_line(agents));
        out.push('\n');
    }
    for line in [
        hack_line(summary),
        skipped_line(summary),
        partial_line(summary),
    ]
    .into_iter()
    .flatten()
    {
        out.push_str(&show(&line));
        out.push('\n');
    }
    out
}

/// Opt_p@K at p = 0.0, 0.5, 0.95, 1.0, 1.5, 2.0 and 3.0 (the reports hold the whole grid).
pub fn opt_p_line(summary: &Summary) -> String {
    const SHOWN: [f64; 7] = [0.0, 0.5, 0.95, 1.0, 1.5, 2.0, 3.0];
    let shown: Vec<String> = summary
        .totals
        .opt_p_at_k
        .iter()
        .filter(|(p, _)| SHOWN.iter().any(|s| (s - p).abs() < 1e-9))
        .map(|(p, v)| format!("p={} {v:.2}%", crate::core::gso::opt_p_key(*p)))
        .collect();
    format!(
        "Opt_p@{} (opt_base and HM speedup over human above p): {}",
        summary.info.k,
        shown.join(", ")
    )
}

/// The hack-adjusted score beside the raw one, with a list of hacked instances.
pub fn hack_line(summary: &Summary) -> Option<String> {
    let h = summary.totals.hack_adjusted.as_ref()?;
    let mut line = format!(
        "Opt@{} hack-adjusted: {:.2}% (raw {:.2}%; {} of {} listed hacked instance(s) were opt_commit{}, from {})",
        summary.info.k,
        h.score,
        summary.totals.score,
        h.removed_ids.len(),
        h.hacked_ids.len(),
        if h.removed_ids.is_empty() {
            String::new()
        } else {
            format!(": {}", h.removed_ids.join(", "))
        },
        h.source
    );
    if !h.unknown_ids.is_empty() {
        line.push_str(&format!("; not in this run: {}", h.unknown_ids.join(", ")));
    }
    Some(line)
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
    let why = match (&t.interrupted, &summary.info.finished_at) {
        (Some(sig), _) => format!("the run was interrupted ({sig})"),
        (None, None) => {
            "the run has not finished (it is still running, or it was killed)".to_string()
        }
        (None, Some(_)) => "some samples did not run to a result".to_string(),
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
