//! `harness status RUN_DIR`: what a run folder holds — done, failed, left — per model and
//! task, read from run.json and the samples' report.json files. Nothing is run, no Docker.
//!
//! A sample counts with the same rule the reports use: only the samples of the run's current
//! predictions (run.json `samples`), each only with a report.json whose `result_key` matches.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;

use crate::store::run_folder::RunDir;

use crate::app::run_state::{RunStatus, SampleState, run_folders, run_status, status_of};

/// The first row is the header.
fn table(rows: &[Vec<String>]) -> String {
    match rows.split_first() {
        Some((header, rest)) => crate::app::table::render(header, rest, &[]),
        None => String::new(),
    }
}

/// The text `harness status` prints for one run folder.
pub fn render(s: &RunStatus) -> String {
    use crate::core::text::for_terminal as show;
    let mut out = format!(
        "run {} (model {}, K={}): {}\n",
        show(&s.run_id),
        show(&s.model),
        s.k,
        show(&s.run_dir.display().to_string())
    );
    let mut rows = vec![
        ["instance", "expected", "done", "failed", "skipped", "left"]
            .iter()
            .map(|h| h.to_string())
            .collect::<Vec<_>>(),
    ];
    for i in &s.instances {
        let c = &i.counts;
        rows.push(vec![
            show(&i.instance_id),
            if c.expected == 0 {
                "0 (not submitted)".into()
            } else {
                c.expected.to_string()
            },
            c.done.to_string(),
            c.failed.to_string(),
            c.skipped.to_string(),
            c.left.to_string(),
        ]);
    }
    out.push_str(&table(&rows));
    for i in &s.instances {
        for smp in i.samples.iter().filter(|x| x.state == SampleState::Failed) {
            out.push_str(&format!(
                "failed: {}/{} {}: {}\n",
                show(&i.instance_id),
                smp.sample,
                show(smp.status.as_deref().unwrap_or("-")),
                show(&smp.detail)
            ));
        }
    }
    let t = &s.totals;
    out.push_str(&format!(
        "total: {} expected sample(s): {} done, {} failed (error {}, base_failed {}), {} skipped, {} left; {} of {} instance(s) finished\n",
        t.expected,
        t.done,
        t.failed,
        t.error,
        t.base_failed,
        t.skipped,
        t.left,
        s.finished_instances,
        s.instances.len()
    ));
    if s.expected_unknown {
        out.push_str(
            "note: run.json is from an older harness build and does not list the expected samples; the first K sample folders of each instance are counted as expected\n",
        );
    }
    let mut why = Vec::new();
    if t.left > 0 {
        why.push(format!("{} sample(s) left", t.left));
    }
    if t.error > 0 {
        why.push(format!("{} ended error", t.error));
    }
    if let Some(sig) = &s.interrupted {
        why.push(format!("the run was interrupted by {}", show(sig)));
    }
    if s.complete {
        out.push_str("complete: yes\n");
    } else {
        out.push_str(&format!(
            "complete: no ({}): repeat the run command to finish it\n",
            why.join(", ")
        ));
    }
    out
}

/// `harness status`: the table of every run folder, or JSON.
pub fn command(run_dirs: &[PathBuf], json: bool) -> Result<i32> {
    let runs = status_of(run_dirs)?;
    let fanouts = super::fanout::fanouts(&runs);
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "runs": runs, "fanouts": fanouts }))?
        );
    } else {
        let text: Vec<String> = runs.iter().map(render).collect();
        // Each field went through `for_terminal` already; the whole text once more.
        let text = crate::core::text::for_terminal_block(&text.join("\n"));
        crate::out!("{text}");
        for f in &fanouts {
            crate::out!(
                "\n{}",
                crate::core::text::for_terminal_block(&super::fanout::render(f))
            );
        }
    }
    Ok(0)
}

/// One line of `harness status` with no run folder named.
#[derive(Debug, Clone, Serialize)]
pub struct RunLine {
    pub run_dir: PathBuf,
    pub run_id: String,
    pub model: String,
    pub k: usize,
    pub started_at: String,
    /// complete, partial (finished with samples left or failed), running or stopped (no
    /// end recorded), interrupted.
    pub state: &'static str,
    pub done: usize,
    pub expected: usize,
    /// Opt@K in percent, from the run's summary.json (written with its reports).
    pub opt_at_k: Option<f64>,
}

/// `harness status` with no run folder: every run under `results_dir` (batch entries and
/// fan-out parts included), newest first, one line each.
pub fn list(results_dir: &Path, json: bool) -> Result<i32> {
    let lines = lines(results_dir)?;
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "runs": lines }))?
        );
        return Ok(0);
    }
    if lines.is_empty() {
        crate::outln!("no run under {}", results_dir.display());
        return Ok(0);
    }
    let header: Vec<String> = [
        "started", "run", "model", "K", "done", "state", "Opt@K", "folder",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            vec![
                crate::app::export::to_the_minute(&l.started_at),
                l.run_id.clone(),
                l.model.clone(),
                l.k.to_string(),
                format!("{}/{}", l.done, l.expected),
                l.state.to_string(),
                l.opt_at_k.map_or("-".into(), |s| format!("{s:.2}%")),
                l.run_dir.display().to_string(),
            ]
        })
        .collect();
    crate::out!("{}", crate::app::table::render(&header, &rows, &[3]));
    Ok(0)
}

/// Every run under `results_dir`, newest first.
pub fn lines(results_dir: &Path) -> Result<Vec<RunLine>> {
    if !results_dir.is_dir() {
        bail!(
            "{}: no results folder here (runs go to evaluation_results/ unless --results-dir \
             says otherwise)",
            results_dir.display()
        );
    }
    let mut lines: Vec<RunLine> = Vec::new();
    for dir in run_folders(results_dir)? {
        let s = match run_status(&dir) {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "warning: skipped {}: {}",
                    dir.display(),
                    crate::core::text::for_terminal(&format!("{e:#}"))
                );
                continue;
            }
        };
        let info = RunDir { root: dir.clone() }.load_run_info()?;
        let score = std::fs::read(dir.join(crate::store::run_folder::names::SUMMARY_JSON))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["totals"]["score"].as_f64());
        lines.push(RunLine {
            state: match (&s.interrupted, s.finished, s.complete) {
                (Some(_), _, _) => "interrupted",
                (None, false, _) => "running or stopped",
                (None, true, true) => "complete",
                (None, true, false) => "partial",
            },
            run_dir: dir,
            run_id: s.run_id,
            model: s.model,
            k: s.k,
            started_at: info.started_at,
            done: s.totals.done,
            expected: s.totals.expected,
            opt_at_k: score,
        });
    }
    lines.sort_by(|a, b| b.started_at.cmp(&a.started_at));
    Ok(lines)
}
