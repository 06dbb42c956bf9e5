//! `index.html` of a results folder: every run on one page (when, what, how it ended, Opt@K
//! with its interval, pass@1, a link to its page), newest first, and for each set of runs
//! that can be ranked against each other (the same dataset, criterion and machine) a
//! comparison page made by `compare` (who is faster per task, with intervals; ranks).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::app::export::html::{Cell, Table, document, esc, href};
use crate::store::confined::Confined;
use crate::store::run_folder::{RunDir, names};

struct Run {
    dir: PathBuf,
    line: crate::app::status::RunLine,
    opt_ci: Option<[f64; 2]>,
    pass1: Option<f64>,
    group: (String, String, String),
}

/// Writes `<results>/index.html` (and its comparison pages) and returns its path.
pub fn write(results: &Path) -> Result<PathBuf> {
    let mut runs = Vec::new();
    for line in crate::app::status::lines(results)? {
        let info = RunDir {
            root: line.run_dir.clone(),
        }
        .load_run_info()?;
        let summary = std::fs::read(line.run_dir.join(names::SUMMARY_JSON))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        let totals = summary.as_ref().map(|s| &s["totals"]);
        let k = info.k;
        runs.push(Run {
            dir: line.run_dir.clone(),
            opt_ci: totals
                .zip(k.checked_sub(1))
                .and_then(|(t, i)| serde_json::from_value(t["opt_at_k_ci"][i].clone()).ok()),
            pass1: totals.and_then(|t| t["pass_at_k"][0].as_f64()),
            group: (
                info.dataset_digest.clone(),
                info.decision_rule.criterion.as_str().to_string(),
                info.fingerprint_id.clone(),
            ),
            line,
        });
    }
    let comparisons = comparison_pages(results, &runs);
    let mut body = format!(
        "<header><h1>Runs <span class=\"muted\">· {}</span></h1><p class=\"muted\">{} run(s), \
         newest first; each links to its page. Made by <code>harness view</code>.</p></header>",
        esc(&results.display().to_string()),
        runs.len()
    );
    body.push_str(&runs_table(results, &runs).render());
    body.push_str("<h2>Rankings</h2>");
    if comparisons.is_empty() {
        body.push_str(
            "<p class=\"muted\">No two runs share a dataset, criterion and machine: nothing to rank.</p>",
        );
    }
    for (what, page) in &comparisons {
        match page {
            Some(p) => {
                let _ = write!(
                    body,
                    "<p>{what}: <a href=\"{}\">ranked, and compared task by task</a></p>",
                    href(p)
                );
            }
            None => {
                let _ = write!(body, "<p>{what}</p>");
            }
        }
    }
    let html = document("harness runs", &body);
    let path = results.join("index.html");
    Confined::beneath(results)
        .write_atomic(&path, html.as_bytes())
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(path)
}

fn runs_table(results: &Path, runs: &[Run]) -> Table {
    let rel = |dir: &Path| {
        dir.strip_prefix(results)
            .unwrap_or(dir)
            .display()
            .to_string()
    };
    let rows = runs
        .iter()
        .map(|r| {
            let l = &r.line;
            let score = match (l.opt_at_k, r.opt_ci) {
                (Some(s), Some([lo, hi])) => {
                    format!("{s:.2}% [{:.2}, {:.2}]", lo * 100.0, hi * 100.0)
                }
                (Some(s), None) => format!("{s:.2}%"),
                _ => "-".into(),
            };
            vec![
                Cell::text(&crate::app::export::to_the_minute(&l.started_at)),
                Cell::html(format!(
                    "<a href=\"{}\">{}</a>",
                    href(&format!("{}/{}", rel(&r.dir), names::REPORT_HTML)),
                    esc(&l.run_id)
                )),
                Cell::text(&l.model),
                Cell::num(l.k.to_string(), l.k as f64),
                Cell::text(&format!("{}/{}", l.done, l.expected)),
                Cell::text(l.state),
                Cell::num(score, l.opt_at_k.unwrap_or(-1.0)),
                Cell::num(
                    r.pass1.map_or("-".into(), |p| format!("{:.2}%", p * 100.0)),
                    r.pass1.unwrap_or(-1.0),
                ),
            ]
        })
        .collect();
    Table {
        caption: "Opt@K with its 95% interval".into(),
        headers: [
            "started (UTC)",
            "run",
            "model",
            "K",
            "done",
            "state",
            "Opt@K",
            "pass@1",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect(),
        rows,
        sortable: true,
    }
}

/// For each set of two or more runs on one dataset, criterion and machine: a sentence, and
/// the comparison page (`compare-<n>.html`) when `compare` takes them.
fn comparison_pages(results: &Path, runs: &[Run]) -> Vec<(String, Option<String>)> {
    let mut groups: BTreeMap<&(String, String, String), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        groups.entry(&r.group).or_default().push(r);
    }
    let mut out = Vec::new();
    for (n, ((_, criterion, _), members)) in groups.iter().filter(|(_, m)| m.len() > 1).enumerate()
    {
        let names: Vec<String> = members.iter().map(|r| esc(&r.line.run_id)).collect();
        let dirs: Vec<PathBuf> = members.iter().map(|r| r.dir.clone()).collect();
        let file = format!("compare-{}.html", n + 1);
        match crate::app::compare::html_page(&dirs) {
            Ok(page) => {
                let written =
                    Confined::beneath(results).write_atomic(&results.join(&file), page.as_bytes());
                out.push((
                    format!(
                        "{} ({}, one dataset and machine)",
                        names.join(", "),
                        esc(criterion)
                    ),
                    written.ok().map(|()| file),
                ));
            }
            Err(e) => out.push((
                format!(
                    "{}: not ranked ({})",
                    names.join(", "),
                    esc(&format!("{e:#}"))
                ),
                None,
            )),
        }
    }
    out
}
