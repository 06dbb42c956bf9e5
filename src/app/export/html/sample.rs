//! One sample's drill-down: the verdict's arithmetic in words, links to its files, every
//! timed run of base, human and the sample per bench (a strip plot, with a text table of
//! the same runs' spread), and for GPU tasks what the GPUs did over each run and the
//! energy per round.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::page::{Cell, Table, anchor, esc, headers, href};
use super::{SampleFiles, svg};
use crate::core::criterion::DecidedBy;
use crate::core::estimator::Estimator;
use crate::core::records::SampleReport;
use crate::core::stats::Decision;
use crate::core::summary::Summary;
use crate::core::timings::{BenchLog, RunRecord};
use crate::store::run_folder::names;

pub fn detail(summary: &Summary, s: &SampleReport, files: &SampleFiles) -> String {
    let id = anchor(&[&s.instance_id, &s.sample.to_string()]);
    let mut out = format!(
        "<details id=\"{id}\"><summary>{} · sample {} — {}{}</summary>",
        esc(&s.instance_id),
        s.sample,
        esc(s.status.as_str()),
        if s.opt_commit {
            " — opt_commit"
        } else if s.opt_base {
            " — opt_base"
        } else {
            ""
        }
    );
    let _ = write!(
        out,
        "<div class=\"verdict\">{}</div>",
        verdict_words(summary, s)
    );
    let _ = write!(
        out,
        "<p class=\"change\">Change: {}{}</p>",
        esc(&crate::app::export::spend::change_cell(s)),
        s.agent
            .as_ref()
            .map(|a| format!(
                ". Agent: {}",
                esc(&crate::app::export::spend::usage_words(&a.usage, a.seconds))
            ))
            .unwrap_or_default()
    );
    out.push_str("<p>Files: ");
    let links: Vec<String> = [
        names::PATCH_DIFF,
        names::APPLY_LOG,
        names::BUILD_LOG,
        names::TEST_OUTPUT,
        names::BENCH_JSON,
        names::REPORT_JSON,
    ]
    .iter()
    .map(|f| {
        format!(
            "<a href=\"{}\">{}</a>",
            href(&format!("{}/{f}", files.rel_dir)),
            esc(f)
        )
    })
    .collect();
    out.push_str(&links.join(" · "));
    out.push_str("</p>");
    if let Some(p) = &files.patch {
        let _ = write!(
            out,
            "<details class=\"inline\"><summary>{} ({} lines{})</summary><pre>{}</pre></details>",
            names::PATCH_DIFF,
            p.text.lines().count(),
            if p.whole { "" } else { ", the first 6 KiB" },
            esc(&p.text)
        );
    }
    if let Some((file, t)) = &files.failure_tail {
        let _ = write!(
            out,
            "<details class=\"inline failure\"><summary>{file}, {}</summary><pre>{}</pre></details>",
            if t.whole {
                "all of it"
            } else {
                "its last 2 KiB"
            },
            esc(&t.text)
        );
    }
    if let Some(log) = &files.log {
        let label = log
            .sample_variant
            .clone()
            .unwrap_or_else(|| format!("s{}", s.sample));
        out.push_str(&runs_section(log, &label));
        out.push_str(&energy_section(&log.runs, log.runs_of(&label), &label));
    }
    if !files.telemetry.is_empty() {
        out.push_str(&telemetry_section(files));
    }
    out.push_str("</details>");
    out
}

fn decision_word(d: Decision) -> &'static str {
    match d {
        Decision::Yes => "<span class=\"yes\">yes</span>",
        Decision::No => "<span class=\"no\">no</span>",
        Decision::Undecided => "<span class=\"undecided\">undecided</span>",
    }
}

fn estimator_words(e: Estimator) -> String {
    match e {
        Estimator::Mean => "the mean of its runs".into(),
        Estimator::Quantile(q) if q <= 0.0 => "the fastest of its runs".into(),
        Estimator::Quantile(q) if (q - 0.5).abs() < 1e-9 => "the median of its runs".into(),
        Estimator::Quantile(q) => format!("the {:.0}th percentile of its runs", q * 100.0),
    }
}

/// The verdict's arithmetic, in sentences.
fn verdict_words(summary: &Summary, s: &SampleReport) -> String {
    let rule = &summary.info.decision_rule;
    let th = &rule.thresholds;
    let mut out = String::new();
    if let Some(w) = &s.shared_with {
        let _ = write!(
            out,
            "<p>This sample's tree is the same code as {}'s, so it was not measured again and takes those timings.</p>",
            esc(w)
        );
    }
    let (Some(st), true) = (&s.opt_stats, s.passed()) else {
        let _ = write!(
            out,
            "<p>Not measured: the sample ended <b>{}</b>{}. It counts as neither opt_base nor opt_commit.</p>",
            esc(s.status.as_str()),
            if s.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", esc(&s.detail))
            }
        );
        return out;
    };
    let conf = rule.confidence * 100.0;
    let figure = estimator_words(rule.figure());
    match (&s.intervals, rule.criterion.decided_by()) {
        (Some(iv), DecidedBy::Interval) => {
            let _ = write!(
                out,
                "<p>Speedup over base: each variant's figure per bench is {figure}; base's over the patch's, geometric mean over the benches: <b>{:.3}x</b>, {conf:.0}% interval [{:.3}, {:.3}] from {} paired rounds resampled {} times. opt_base needs the whole interval at or above {}: {}.</p>",
                st.gm_speedup_patch_base,
                iv.gm_speedup_patch_base.lo,
                iv.gm_speedup_patch_base.hi,
                iv.rounds,
                iv.resamples,
                th.min_speedup,
                decision_word(s.decision_base)
            );
            let _ = write!(
                out,
                "<p>Against human: human's figure over the patch's, harmonic mean over the benches: <b>{:.3}</b>, {conf:.0}% interval [{:.3}, {:.3}] from {} rounds paired with human. opt_commit needs opt_base and the whole interval above {}: {}.</p>",
                st.hm_speedup_patch_commit,
                iv.hm_speedup_patch_commit.lo,
                iv.hm_speedup_patch_commit.hi,
                iv.rounds_with_human,
                th.opt_thresh,
                decision_word(s.decision_commit)
            );
        }
        _ => {
            let _ = write!(
                out,
                "<p>GSO's rule on the means of the runs: speedup over base (geometric mean over the benches) <b>{:.3}x</b>, rounded to one decimal and compared with {}: {}; harmonic-mean speedup over human <b>{:.3}</b>, above {}: {}.</p>",
                st.gm_speedup_patch_base,
                th.min_speedup,
                decision_word(s.decision_base),
                st.hm_speedup_patch_commit,
                th.opt_thresh,
                decision_word(s.decision_commit)
            );
        }
    }
    if s.inconclusive {
        out.push_str("<p class=\"undecided\">Inconclusive: the measurement ended before the intervals fell on one side of a threshold.</p>");
    }
    if !s.bench_means.is_empty() {
        let rows = s
            .bench_means
            .iter()
            .map(|b| {
                vec![
                    Cell::text(&b.bench),
                    Cell::num(format!("{:.6}", b.base), b.base),
                    Cell::num(format!("{:.6}", b.human), b.human),
                    Cell::num(format!("{:.6}", b.patch), b.patch),
                ]
            })
            .collect();
        out.push_str(
            &Table {
                caption: "mean figure per bench (seconds, or the bench's own metric)".into(),
                headers: headers(&["bench", "base", "human", "patch"]),
                rows,
                sortable: false,
            }
            .render(),
        );
    }
    out
}

/// Why a run is marked in the strip plot, if it is.
fn flag(r: &RunRecord) -> Option<String> {
    if r.exit_code != 0 {
        return Some(format!("exit code {}", r.exit_code));
    }
    if r.gpu.as_ref().is_some_and(|g| g.throttled) {
        return Some("GPU clocks throttled".into());
    }
    r.disturbed.clone()
}

fn runs_section(log: &BenchLog, label: &str) -> String {
    let source = log.runs_of(label).to_string();
    let shown = ["base", "human", source.as_str()];
    let mut out = String::new();
    for bench in &log.benches {
        let unit = if bench.metric == "wall" { "s" } else { "" };
        let mut series = Vec::new();
        let mut rows = Vec::new();
        for v in shown {
            let runs: Vec<&RunRecord> = log
                .runs
                .iter()
                .filter(|r| r.variant == v && r.bench == bench.name && !r.warmup)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let points: Vec<svg::StripPoint> = runs
                .iter()
                .filter_map(|r| {
                    Some(svg::StripPoint {
                        round: r.round,
                        value: r.value?,
                        flag: flag(r),
                    })
                })
                .collect();
            let mut values: Vec<f64> = points.iter().map(|p| p.value).collect();
            values.sort_by(f64::total_cmp);
            let flagged: BTreeMap<String, usize> = points
                .iter()
                .filter_map(|p| p.flag.clone())
                .fold(BTreeMap::new(), |mut m, f| {
                    *m.entry(f).or_default() += 1;
                    m
                });
            let name = if v == source && v != label {
                format!("{label} (runs of {v})")
            } else {
                v.to_string()
            };
            rows.push(spread_row(&name, &values, unit, &flagged));
            series.push((name, points));
        }
        if series.is_empty() {
            continue;
        }
        let text: Vec<String> = series
            .iter()
            .map(|(n, p)| format!("{n} {} runs", p.len()))
            .collect();
        let label = format!(
            "every timed run of bench {} by round: {}; the table beside it gives their spread",
            bench.name,
            text.join(", ")
        );
        let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
        let legend = svg::legend_keys(&names);
        let table = Table {
            caption: "timed runs (warmups left out); a flagged run still counts".into(),
            headers: headers(&["variant", "runs", "fastest", "median", "slowest", "flagged"]),
            rows,
            sortable: false,
        };
        let _ = write!(
            out,
            "<h3>Bench {}</h3><p class=\"legend\">{legend}</p><div class=\"grid2\"><div style=\"flex:1 1 420px\">{}</div><div>{}</div></div>",
            esc(&bench.name),
            svg::strip_plot(&series, unit, &label),
            table.render()
        );
    }
    out
}

fn spread_row(
    name: &str,
    sorted: &[f64],
    unit: &str,
    flagged: &BTreeMap<String, usize>,
) -> Vec<Cell> {
    let at = |i: usize| sorted.get(i).copied().unwrap_or(f64::NAN);
    let fmt = |v: f64| {
        if v.is_finite() {
            svg::format_value(v, unit)
        } else {
            "-".into()
        }
    };
    let flags: Vec<String> = flagged.iter().map(|(f, n)| format!("{n}: {f}")).collect();
    vec![
        Cell::text(name),
        Cell::num(sorted.len().to_string(), sorted.len() as f64),
        Cell::num(fmt(at(0)), at(0)),
        Cell::num(fmt(at(sorted.len() / 2)), at(sorted.len() / 2)),
        Cell::num(
            fmt(at(sorted.len().saturating_sub(1))),
            at(sorted.len().saturating_sub(1)),
        ),
        Cell::text(&flags.join("; ")),
    ]
}

/// Joules per measured round, base, human and the sample (whose runs are `source`'s), from
/// each run's GPU energy.
fn energy_section(runs: &[RunRecord], source: &str, label: &str) -> String {
    let mut per: BTreeMap<u32, [Option<f64>; 3]> = BTreeMap::new();
    for r in runs.iter().filter(|r| !r.warmup) {
        let Some(j) = r.gpu.as_ref().and_then(|g| g.energy_j) else {
            continue;
        };
        let col = match r.variant.as_str() {
            "base" => 0,
            "human" => 1,
            v if v == source => 2,
            _ => continue,
        };
        let cell = &mut per.entry(r.round).or_default()[col];
        *cell = Some(cell.unwrap_or(0.0) + j);
    }
    if per.is_empty() {
        return String::new();
    }
    let fmt = |v: Option<f64>| {
        v.map(|j| Cell::num(format!("{j:.2} J"), j))
            .unwrap_or_else(|| Cell::text("-"))
    };
    let rows = per
        .iter()
        .map(|(round, v)| {
            vec![
                Cell::num(round.to_string(), *round as f64),
                fmt(v[0]),
                fmt(v[1]),
                fmt(v[2]),
            ]
        })
        .collect();
    format!(
        "<h3>GPU energy per round</h3>{}",
        Table {
            caption: "every bench of the round, every GPU of the task".into(),
            headers: vec!["round".into(), "base".into(), "human".into(), esc(label)],
            rows,
            sortable: true,
        }
        .render()
    )
}

/// Power, SM clock, utilisation and temperature over each run of the sample's measurement.
fn telemetry_section(files: &SampleFiles) -> String {
    type Getter = fn(&crate::telemetry::GpuSample) -> Option<f64>;
    let metrics: [(&str, &str, Getter); 4] = [
        ("power", "W", |s| s.power_w),
        ("SM clock", "MHz", |s| s.sm_clock_mhz.map(f64::from)),
        ("utilisation", "%", |s| s.gpu_util.map(f64::from)),
        ("temperature", "°C", |s| s.temperature_c.map(f64::from)),
    ];
    // One series per run (and device): its samples from the run's first.
    let mut runs: BTreeMap<(String, u32, u32, u32), Vec<&crate::telemetry::GpuSample>> =
        BTreeMap::new();
    for line in &files.telemetry {
        let t = &line.tag;
        runs.entry((t.variant.clone(), t.round, t.run, line.sample.device_index))
            .or_default()
            .push(&line.sample);
    }
    let throttled: Vec<String> = runs
        .iter()
        .filter(|(_, samples)| samples.iter().any(|s| s.throttled_thermal_or_power))
        .map(|((v, round, run, dev), _)| format!("{v} round {round} run {run} (GPU {dev})"))
        .collect();
    let name = |(v, round, run, dev): &(String, u32, u32, u32), hot: bool| {
        format!(
            "{v} r{round}.{run} gpu{dev}{}",
            if hot { " THROTTLED" } else { "" }
        )
    };
    let mut out = format!(
        "<h3>GPU telemetry</h3><p>{} run(s) sampled{}.</p><div class=\"grid2\">",
        runs.len(),
        if throttled.is_empty() {
            "; no thermal or power throttling".to_string()
        } else {
            format!("; throttled: {}", esc(&throttled.join(", ")))
        }
    );
    for (what, unit, get) in metrics {
        let series: Vec<(String, Vec<(f64, f64)>)> = runs
            .iter()
            .map(|(key, samples)| {
                let t0 = samples.first().map(|s| s.t).unwrap_or(0.0);
                let hot = samples.iter().any(|s| s.throttled_thermal_or_power);
                let pts = samples
                    .iter()
                    .filter_map(|s| get(s).map(|v| (s.t - t0, v)))
                    .collect();
                (name(key, hot), pts)
            })
            .collect();
        let (lo, hi) = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|x| x.1))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let label = if lo.is_finite() {
            format!("GPU {what} over each run, {lo:.0} to {hi:.0} {unit}")
        } else {
            format!("GPU {what}: not read")
        };
        let _ = write!(
            out,
            "<figure><figcaption>{}</figcaption>{}</figure>",
            esc(&label),
            svg::line_chart(&series, unit, &label)
        );
    }
    out.push_str("</div>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::timings::RunGpu;
    use crate::telemetry::{GpuSample, RunTag, TelemetryLine};

    fn line(variant: &str, t: f64, power: f64, hot: bool) -> TelemetryLine {
        let mut s = GpuSample::empty(t, 0, "GPU-0");
        s.power_w = Some(power);
        s.sm_clock_mhz = Some(1410);
        s.gpu_util = Some(97);
        s.temperature_c = Some(61);
        s.throttled_thermal_or_power = hot;
        TelemetryLine {
            tag: RunTag {
                variant: variant.into(),
                round: 0,
                run: 0,
            },
            sample: s,
        }
    }

    #[test]
    fn every_gpu_run_is_drawn_and_throttled_ones_are_named() {
        let files = SampleFiles {
            rel_dir: "m/t/0".into(),
            log: None,
            telemetry: vec![
                line("base", 10.0, 200.0, false),
                line("base", 10.1, 210.0, false),
                line("s0", 20.0, 150.0, true),
                line("s0", 20.1, 160.0, true),
            ],
            patch: None,
            failure_tail: None,
        };
        let html = telemetry_section(&files);
        // Four charts (power, SM clock, utilisation, temperature), one line per run.
        assert_eq!(html.matches("<polyline").count(), 8, "{html}");
        assert!(
            html.contains("throttled: s0 round 0 run 0 (GPU 0)"),
            "{html}"
        );
        assert!(
            html.contains("GPU power over each run, 150 to 210 W"),
            "{html}"
        );
        assert!(html.contains("s0 r0.0 gpu0 THROTTLED"), "{html}");
    }

    #[test]
    fn energy_is_summed_per_round_over_benches_and_gpus() {
        let run = |variant: &str, round: u32, bench: &str, j: f64| {
            let mut r = RunRecord::plain(variant, bench, round, 0.1);
            r.gpu = Some(RunGpu {
                energy_j: Some(j),
                throttled: false,
                devices: Vec::new(),
            });
            r
        };
        let runs = vec![
            run("base", 0, "a", 10.0),
            run("base", 0, "b", 5.0),
            run("human", 0, "a", 4.0),
            run("s1", 0, "a", 2.5),
            run("s2", 0, "a", 99.0),
        ];
        let html = energy_section(&runs, "s1", "s1");
        assert!(html.contains(">15.00 J<"), "{html}");
        assert!(
            html.contains(">4.00 J<") && html.contains(">2.50 J<"),
            "{html}"
        );
        assert!(
            !html.contains("99.00"),
            "another sample's runs are not this one's"
        );
        assert_eq!(
            energy_section(&[RunRecord::plain("base", "a", 0, 0.1)], "s1", "s1"),
            ""
        );
    }
}
