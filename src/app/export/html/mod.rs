//! `report.html`: one self-contained page for a run folder, made from what the folder holds
//! (the summary, and every sample's `bench.json` and `telemetry.jsonl`). Charts are inline
//! SVG drawn here (`svg`): three small kinds, each with an accessible name and its numbers
//! as text beside it, which keeps a 1000-sample page within a few megabytes and every
//! string under one escaping function.

mod page;
mod sample;
pub mod svg;

use std::fmt::Write;
use std::path::PathBuf;

use crate::core::criterion::DecidedBy;
use crate::core::records::SampleReport;
use crate::core::stats::Decision;
use crate::core::summary::Summary;
use crate::core::timings::BenchLog;
use crate::store::run_folder::{RunDir, names};

pub use page::{Cell, Table, document, esc, headers, href, script_source_hash};

/// `report.html` of a run folder.
pub struct HtmlReport {
    pub run: RunDir,
}

impl super::Exporter for HtmlReport {
    fn files(&self, summary: &Summary) -> anyhow::Result<Vec<super::ReportFile>> {
        super::single(
            names::REPORT_HTML,
            run_page(summary, &self.run).into_bytes(),
        )
    }
}

/// What the page shows of one sample beyond its report: its timings and GPU samples.
pub struct SampleFiles {
    /// The sample's folder, relative to the run folder (for links).
    pub rel_dir: String,
    pub log: Option<BenchLog>,
    pub telemetry: Vec<crate::telemetry::TelemetryLine>,
    /// The patch's first bytes (whole when short), shown folded.
    pub patch: Option<Inline>,
    /// Where it failed, the last bytes of that log: the test's output, the install's, the
    /// cascade's.
    pub failure_tail: Option<(&'static str, Inline)>,
}

/// Part of a file shown on the page, and whether it is all of it.
pub struct Inline {
    pub text: String,
    pub whole: bool,
}

/// Bytes of a patch, and of a log's tail, shown inline (the page stays a few megabytes at
/// 1,000 samples; the links have all of it).
const INLINE_PATCH: usize = 6 * 1024;
const INLINE_TAIL: usize = 2 * 1024;

fn inline(path: &std::path::Path, limit: usize, tail: bool) -> Option<Inline> {
    let bytes = std::fs::read(path).ok()?;
    let whole = bytes.len() <= limit;
    let part = match (whole, tail) {
        (true, _) => &bytes[..],
        (false, false) => &bytes[..limit],
        (false, true) => &bytes[bytes.len() - limit..],
    };
    let text = String::from_utf8_lossy(part).into_owned();
    (!text.trim().is_empty()).then_some(Inline { text, whole })
}

impl SampleFiles {
    fn load(run: &RunDir, model: &str, s: &SampleReport) -> SampleFiles {
        let dir = run.sample_dir(model, &s.instance_id, s.sample);
        let rel_dir = dir
            .strip_prefix(&run.root)
            .map(PathBuf::from)
            .unwrap_or_else(|_| dir.clone())
            .to_string_lossy()
            .into_owned();
        let log = std::fs::read_to_string(dir.join(names::BENCH_JSON))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let telemetry = std::fs::read_to_string(dir.join(names::TELEMETRY_JSONL))
            .map(|t| {
                t.lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect()
            })
            .unwrap_or_default();
        use crate::core::status::Status;
        let failed_in = match s.status {
            Status::TestFailed | Status::Timeout => Some(names::TEST_OUTPUT),
            Status::BuildFailed => Some(names::BUILD_LOG),
            Status::PatchFailed => Some(names::APPLY_LOG),
            _ => None,
        };
        SampleFiles {
            patch: inline(&dir.join(names::PATCH_DIFF), INLINE_PATCH, false),
            failure_tail: failed_in
                .and_then(|f| Some((f, inline(&dir.join(f), INLINE_TAIL, true)?))),
            rel_dir,
            log,
            telemetry,
        }
    }
}

/// The whole page of a run.
pub fn run_page(summary: &Summary, run: &RunDir) -> String {
    let info = &summary.info;
    let mut body = header(summary);
    body.push_str(&curves_section(summary));
    body.push_str(&instances_section(summary));
    let axis = svg::LogAxis::spanning(
        summary
            .instances
            .iter()
            .flat_map(|i| &i.samples)
            .flat_map(sample_figures)
            .chain([
                info.decision_rule.thresholds.min_speedup,
                info.decision_rule.thresholds.opt_thresh,
            ]),
        150.0,
    );
    body.push_str(&samples_section(summary, &axis));
    body.push_str("<h2 id=\"samples-detail\">Every sample in detail</h2>");
    for inst in &summary.instances {
        for s in &inst.samples {
            let files = SampleFiles::load(run, &info.model, s);
            body.push_str(&sample::detail(summary, s, &files));
        }
    }
    body.push_str(&footer(summary));
    document(
        &format!("{} — Opt@{} — {}", info.model, info.k, info.run_id),
        &body,
    )
}

/// Every estimate and interval end of a sample, for the shared axis.
fn sample_figures(s: &SampleReport) -> Vec<f64> {
    let mut v = Vec::new();
    if let Some(st) = &s.opt_stats {
        v.extend([st.gm_speedup_patch_base, st.hm_speedup_patch_commit]);
    }
    if let Some(iv) = &s.intervals {
        v.extend([
            iv.gm_speedup_patch_base.lo,
            iv.gm_speedup_patch_base.hi,
            iv.hm_speedup_patch_commit.lo,
            iv.hm_speedup_patch_commit.hi,
        ]);
    }
    v
}

fn pct_ci(v: f64, ci: Option<&[f64; 2]>) -> String {
    match ci {
        Some([lo, hi]) => format!("{:.2}% [{:.2}, {:.2}]", v * 100.0, lo * 100.0, hi * 100.0),
        None => format!("{:.2}%", v * 100.0),
    }
}

fn header(summary: &Summary) -> String {
    let info = &summary.info;
    let t = &summary.totals;
    let k = info.k;
    let rule = &info.decision_rule;
    let mut out = format!(
        "<header><h1>{} <span class=\"muted\">· run {}</span></h1>",
        esc(&info.model),
        esc(&info.run_id)
    );
    let day = crate::app::export::text::to_the_minute;
    let _ = write!(
        out,
        "<p class=\"muted\" id=\"run-when\">Started {} UTC{}</p>",
        esc(&day(&info.started_at)),
        match (&info.finished_at, crate::app::export::text::wall_time(info)) {
            (Some(end), Some(wall)) =>
                format!(", finished {} UTC ({})", esc(&day(end)), esc(&wall)),
            _ => ", not finished".to_string(),
        }
    );
    if let Some(line) = crate::app::export::text::partial_line(summary) {
        let _ = write!(
            out,
            "<p class=\"banner\" role=\"status\" id=\"partial\"><b>Partial run.</b> {}</p>",
            esc(&line)
        );
    }
    let at = |xs: &[f64], i: usize| xs.get(i).copied().unwrap_or(0.0);
    let cards = [
        (
            format!("Opt@{k}"),
            format!("{:.2}%", t.score),
            t.opt_at_k_ci
                .get(k.wrapping_sub(1))
                .map(|c| format!("[{:.2}, {:.2}]", c[0] * 100.0, c[1] * 100.0))
                .unwrap_or_default(),
            "opt-at-k",
        ),
        (
            "pass@1".to_string(),
            format!("{:.2}%", at(&t.pass_at_k, 0) * 100.0),
            String::new(),
            "pass-at-1",
        ),
        (
            format!("pass@{k}"),
            format!("{:.2}%", at(&t.pass_at_k, k.wrapping_sub(1)) * 100.0),
            String::new(),
            "pass-at-k",
        ),
        (
            "opt_commit".to_string(),
            format!("{} / {}", t.opt_commit, t.total_instances),
            format!("opt_base {}", t.opt_base),
            "opt-commit",
        ),
        (
            "inconclusive".to_string(),
            t.inconclusive.to_string(),
            format!("{} sample(s)", t.inconclusive_samples),
            "inconclusive",
        ),
    ];
    let mut cards = cards.to_vec();
    cards.extend(agents_card(summary));
    out.push_str("<div class=\"cards\">");
    for (name, value, sub, id) in cards {
        let _ = write!(
            out,
            "<div class=\"card\" id=\"card-{id}\">{}<b>{}</b><span class=\"muted\">{}</span></div>",
            esc(&name),
            esc(&value),
            esc(&sub)
        );
    }
    out.push_str("</div>");
    let fp = &info.fingerprint;
    let _ = write!(
        out,
        "<p class=\"muted\">Criterion <b>{}</b>: opt_base when the speedup over base is at least {}, opt_commit when the harmonic-mean speedup over human is above {}{}. Dataset <code>{}</code>, machine {} ({} cores{}), Docker {}, harness {}.</p></header>",
        esc(rule.criterion.as_str()),
        rule.thresholds.min_speedup,
        rule.thresholds.opt_thresh,
        if rule.criterion.decided_by() == DecidedBy::Means {
            String::new()
        } else {
            format!(
                " (the whole {:.0}% interval on that side)",
                rule.confidence * 100.0
            )
        },
        esc(&info.dataset),
        esc(&fp.cpu_model),
        fp.cores,
        if fp.gpus.is_empty() {
            String::new()
        } else {
            format!(", GPUs {}", esc(&fp.gpus.join(", ")))
        },
        esc(&fp.docker_version),
        esc(&info.harness_version)
    );
    if let Some(line) = crate::app::export::text::hack_line(summary) {
        let _ = write!(out, "<p>{}</p>", esc(&line));
    }
    if let Some(a) = &t.agents {
        let _ = write!(
            out,
            "<p id=\"agent-spend\">{}</p>",
            esc(&crate::app::export::spend::totals_line(a))
        );
    }
    out
}

/// The agents' cost as a card, when the samples' rows say what their agents spent.
fn agents_card(summary: &Summary) -> Option<(String, String, String, &'static str)> {
    let a = summary.totals.agents.as_ref()?;
    Some((
        "agents' cost".to_string(),
        crate::core::spend::dollars_text(a.cost_usd),
        format!("{} requests, {} tokens", a.requests, a.tokens_text()),
        "agent-cost",
    ))
}

fn curves_section(summary: &Summary) -> String {
    let t = &summary.totals;
    let pass: Vec<f64> = t.pass_at_k.iter().map(|v| v * 100.0).collect();
    let opt: Vec<f64> = t.opt_at_k.iter().map(|v| v * 100.0).collect();
    let scale = |xs: &[[f64; 2]]| -> Vec<[f64; 2]> {
        xs.iter().map(|[a, b]| [a * 100.0, b * 100.0]).collect()
    };
    let (pass_ci, opt_ci) = (scale(&t.pass_at_k_ci), scale(&t.opt_at_k_ci));
    let label = format!(
        "pass@k and opt@k for k from 1 to {}: pass@k from {:.1}% to {:.1}%, opt@k from {:.1}% to {:.1}%; the table below gives every value",
        pass.len(),
        pass.first().unwrap_or(&0.0),
        pass.last().unwrap_or(&0.0),
        opt.first().unwrap_or(&0.0),
        opt.last().unwrap_or(&0.0)
    );
    let chart = svg::curves(
        &[
            svg::Curve {
                name: "pass@k",
                values: &pass,
                bands: &pass_ci,
            },
            svg::Curve {
                name: "opt@k",
                values: &opt,
                bands: &opt_ci,
            },
        ],
        &label,
    );
    let rows = (0..t.pass_at_k.len())
        .map(|i| {
            vec![
                Cell::num((i + 1).to_string(), (i + 1) as f64),
                Cell::num(
                    pct_ci(t.pass_at_k[i], t.pass_at_k_ci.get(i)),
                    t.pass_at_k[i],
                ),
                Cell::num(
                    pct_ci(
                        t.opt_at_k.get(i).copied().unwrap_or(0.0),
                        t.opt_at_k_ci.get(i),
                    ),
                    t.opt_at_k.get(i).copied().unwrap_or(0.0),
                ),
            ]
        })
        .collect();
    let table = Table {
        caption: "95% bootstrap intervals over instances".into(),
        headers: vec!["k".into(), "pass@k".into(), "opt@k".into()],
        rows,
        sortable: false,
    };
    let mut out = format!(
        "<h2>pass@k and opt@k</h2><div class=\"grid2\"><div style=\"flex:1 1 340px;max-width:480px\"><p class=\"legend\" id=\"curves-legend\">{}</p>{chart}</div><div id=\"curves-table\">{}</div></div>",
        svg::legend_keys(&["pass@k", "opt@k"]),
        table.render()
    );
    if !t.opt_p_at_k.is_empty() {
        let rows = t
            .opt_p_at_k
            .iter()
            .map(|(p, v)| {
                vec![
                    Cell::num(format!("{p}"), *p),
                    Cell::num(format!("{v:.2}%"), *v),
                ]
            })
            .collect();
        let _ = write!(
            out,
            "<details><summary>Opt_p@{} over p (opt_base and HM speedup over human above p)</summary>{}</details>",
            summary.info.k,
            Table {
                caption: String::new(),
                headers: vec!["p".into(), format!("Opt_p@{}", summary.info.k)],
                rows,
                sortable: false,
            }
            .render()
        );
    }
    out
}

fn yes_cell(b: bool) -> Cell {
    Cell {
        html: if b { "yes" } else { "no" }.to_string(),
        class: if b { "yes" } else { "no" },
        ..Cell::default()
    }
}

fn decision_cell(d: Decision) -> Cell {
    let (text, class) = match d {
        Decision::Yes => ("yes", "yes"),
        Decision::No => ("no", "no"),
        Decision::Undecided => ("undecided", "undecided"),
    };
    Cell {
        html: text.into(),
        class,
        ..Cell::default()
    }
}

fn instances_section(summary: &Summary) -> String {
    let rows = summary
        .instances
        .iter()
        .map(|inst| {
            vec![
                Cell::text(&inst.instance_id),
                Cell::text(
                    inst.best_status
                        .map(|s| s.as_str())
                        .unwrap_or("not submitted"),
                ),
                yes_cell(inst.opt_base),
                yes_cell(inst.opt_commit),
                yes_cell(inst.inconclusive),
                Cell::num(inst.samples.len().to_string(), inst.samples.len() as f64),
            ]
        })
        .collect();
    let table = Table {
        caption: format!("{} instance(s); best of K", summary.instances.len()),
        headers: headers(&[
            "instance",
            "best status",
            "opt_base",
            "opt_commit",
            "inconclusive",
            "samples",
        ]),
        rows,
        sortable: true,
    };
    format!(
        "<h2>Instances</h2><div id=\"instances\">{}</div>",
        table.render()
    )
}

/// A speedup cell: the number and interval as text, and the chart on the shared axis.
fn speedup_cell(
    axis: &svg::LogAxis,
    estimate: Option<f64>,
    iv: Option<(f64, f64)>,
    decided: bool,
    threshold: f64,
    what: &str,
) -> Cell {
    let Some(est) = estimate else {
        return Cell::num("-".into(), f64::NAN);
    };
    let text = match iv {
        Some((lo, hi)) => format!("{est:.2}x [{lo:.2}, {hi:.2}]"),
        None => format!("{est:.2}x"),
    };
    let label = format!(
        "{what} {text}, threshold {threshold}, {}",
        if decided { "decided" } else { "undecided" }
    );
    let mark = svg::Mark {
        estimate: est,
        interval: iv,
        decided,
    };
    Cell {
        html: format!(
            "<span class=\"figure\">{}</span>{}",
            esc(&text),
            svg::interval_mark(axis, mark, threshold, &label)
        ),
        sort: Some(format!("{est}")),
        class: "num",
        attrs: format!(" data-estimate=\"{est}\""),
    }
}

fn samples_section(summary: &Summary, axis: &svg::LogAxis) -> String {
    let th = &summary.info.decision_rule.thresholds;
    let agents = crate::app::export::spend::with_agents(summary);
    let mut rows = Vec::new();
    for inst in &summary.instances {
        for s in &inst.samples {
            let iv = s.intervals.as_ref();
            let st = s.opt_stats.as_ref();
            let anchor = page::anchor(&[&s.instance_id, &s.sample.to_string()]);
            // The patch's size, and whose timings it took when its tree is another's.
            let patch = crate::app::export::spend::change_cell(s)
                + &s.shared_with
                    .as_ref()
                    .map(|w| format!("; shares {w}'s timings"))
                    .unwrap_or_default();
            let mut row = vec![
                Cell::html(format!("<a href=\"#{anchor}\">{}</a>", esc(&s.instance_id))),
                Cell::num(s.sample.to_string(), s.sample as f64),
                Cell {
                    attrs: format!(" data-status=\"{}\"", s.status.as_str()),
                    ..Cell::text(s.status.as_str())
                },
                Cell {
                    class: "wrap narrow",
                    ..Cell::text(s.apply_strategy.as_deref().unwrap_or("-"))
                },
                speedup_cell(
                    axis,
                    st.map(|x| x.gm_speedup_patch_base),
                    iv.map(|x| (x.gm_speedup_patch_base.lo, x.gm_speedup_patch_base.hi)),
                    s.decision_base != Decision::Undecided,
                    th.min_speedup,
                    "speedup over base",
                ),
                speedup_cell(
                    axis,
                    st.map(|x| x.hm_speedup_patch_commit),
                    iv.map(|x| (x.hm_speedup_patch_commit.lo, x.hm_speedup_patch_commit.hi)),
                    s.decision_commit != Decision::Undecided,
                    th.opt_thresh,
                    "HM speedup over human",
                ),
                decision_cell(s.decision_base),
                decision_cell(s.decision_commit),
                Cell {
                    class: "wrap narrow",
                    ..Cell::text(&patch)
                },
            ];
            if agents {
                row.push(Cell {
                    class: "wrap narrow",
                    ..Cell::text(&crate::app::export::spend::spend_cell(s))
                });
            }
            let mut detail = Cell::text(&shorten(&s.detail, 160));
            detail.class = "wrap";
            row.push(detail);
            row[0].attrs = format!(
                " data-instance=\"{}\" data-sample=\"{}\"",
                esc(&s.instance_id),
                s.sample
            );
            rows.push(row);
        }
    }
    let mut headers = vec![
        "instance".to_string(),
        "sample".into(),
        "status".into(),
        "applied by".into(),
        format!("vs base{}", svg::axis_legend(axis)),
        format!("HM vs human{}", svg::axis_legend(axis)),
        "opt_base".into(),
        "opt_commit".into(),
        "patch".into(),
    ];
    if agents {
        headers.push("agent spend".into());
    }
    headers.push("detail".into());
    let table = Table {
        caption: format!(
            "Speedups with their {:.0}% intervals on one log axis: dashed red line the threshold, grey 1x; a filled dot is decided, a hollow one undecided",
            summary.info.decision_rule.confidence * 100.0
        ),
        headers,
        rows,
        sortable: true,
    };
    let mut statuses: Vec<&str> = summary
        .instances
        .iter()
        .flat_map(|i| &i.samples)
        .map(|s| s.status.as_str())
        .collect();
    statuses.sort_unstable();
    statuses.dedup();
    let options: String = statuses
        .iter()
        .map(|s| format!("<option value=\"{s}\">{s}</option>"))
        .collect();
    format!(
        "<h2>Samples</h2><p class=\"filters\"><label>status <select id=\"status-filter\">\
         <option value=\"\">all</option>{options}</select></label> <label>search \
         <input type=\"search\" id=\"sample-search\" placeholder=\"instance, status, detail\"></label> \
         <span class=\"muted\" id=\"filter-count\" aria-live=\"polite\"></span></p>\
         <div id=\"samples\">{}</div>",
        table.render()
    )
}

/// The first `n` characters of `text` on one line, with an ellipsis when cut (the drill-down
/// has all of it).
fn shorten(text: &str, n: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= n {
        return one_line;
    }
    let mut out: String = one_line.chars().take(n).collect();
    out.push('…');
    out
}

fn footer(summary: &Summary) -> String {
    let mut out = String::new();
    let warnings: Vec<String> = summary
        .info
        .warnings
        .iter()
        .cloned()
        .chain(summary.instances.iter().flat_map(|i| {
            i.samples.iter().flat_map(move |s| {
                s.warnings
                    .iter()
                    .map(move |w| format!("{}: {w}", i.instance_id))
            })
        }))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let unique: Vec<&String> = warnings.iter().filter(|w| seen.insert(*w)).collect();
    if !unique.is_empty() {
        out.push_str("<h2>Warnings</h2><ul>");
        for w in unique {
            let _ = write!(out, "<li>{}</li>", esc(w));
        }
        out.push_str("</ul>");
    }
    let _ = write!(
        out,
        "<p class=\"muted\">Written by harness {} from the run folder; <code>harness report</code> rebuilds it. Other files: <a href=\"{}\">summary.md</a>, <a href=\"{}\">results.csv</a>, <a href=\"{}\">run.json</a>.</p>",
        esc(&summary.info.harness_version),
        href(names::SUMMARY_MD),
        href(names::RESULTS_CSV),
        href(names::RUN_JSON)
    );
    out
}
