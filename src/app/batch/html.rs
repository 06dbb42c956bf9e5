//! The batch folder's `report.html`: the ranking with each entry's figures and a link to
//! its own run page, then the entries compared task by task (`harness compare`'s sections)
//! when they can be.

use std::fmt::Write;
use std::path::Path;

use super::BatchReport;
use crate::app::export::html::{Cell, Table, document, esc, headers, href};
use crate::store::run_folder::names;

pub fn page(report: &BatchReport, batch_dir: &Path) -> String {
    let mut body = format!(
        "<h1>Batch {} <span class=\"muted\">· {} entries</span></h1>",
        esc(&report.name),
        report.entries.len()
    );
    if !report.complete {
        let _ = write!(
            body,
            "<p class=\"banner\" role=\"status\" id=\"partial\"><b>Partial batch.</b> Not every entry is complete{}; partial entries are not ranked.</p>",
            report
                .interrupted
                .as_ref()
                .map(|s| format!(" (interrupted: {})", esc(s)))
                .unwrap_or_default()
        );
    }
    for n in &report.notes {
        let _ = write!(body, "<p class=\"muted\">{}</p>", esc(n));
    }
    let ci = |v: f64, c: [f64; 2]| Cell::num(format!("{v:.2}% [{:.2}, {:.2}]", c[0], c[1]), v);
    let rows = report
        .entries
        .iter()
        .map(|e| {
            let page = Path::new(&e.run_dir).join(names::REPORT_HTML);
            let rel = page
                .strip_prefix(batch_dir)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| page.to_string_lossy().into_owned());
            let mut row = vec![
                Cell::num(
                    e.rank.map_or("-".into(), |r| r.to_string()),
                    e.rank.map_or(f64::NAN, |r| r as f64),
                ),
                Cell::html(format!("<a href=\"{}\">{}</a>", href(&rel), esc(&e.label))),
                Cell::text(&e.model),
                Cell::num(e.k.to_string(), e.k as f64),
            ];
            match &e.figures {
                Some(f) => row.extend([
                    ci(f.opt_at_k, f.opt_at_k_ci),
                    ci(f.pass_at_1, f.pass_at_1_ci),
                    ci(f.pass_at_k, f.pass_at_k_ci),
                    Cell::num(
                        format!("{} / {}", f.opt_commit, f.instances),
                        f.opt_commit as f64,
                    ),
                ]),
                None => row.extend((0..4).map(|_| Cell::text("-"))),
            }
            row.push(Cell::text(e.state.as_str()));
            row[1].attrs = format!(" data-entry=\"{}\"", esc(&e.label));
            row
        })
        .collect();
    let table = Table {
        caption:
            "95% bootstrap intervals over instances; only complete entries of one group are ranked"
                .into(),
        headers: headers(&[
            "rank",
            "entry",
            "model",
            "K",
            "Opt@K",
            "pass@1",
            "pass@K",
            "opt_commit",
            "state",
        ]),
        rows,
        sortable: true,
    };
    let _ = write!(
        body,
        "<h2>Ranking</h2><div id=\"ranking-entries\">{}</div>",
        table.render()
    );
    let runs: Vec<std::path::PathBuf> = report
        .entries
        .iter()
        .map(|e| std::path::PathBuf::from(&e.run_dir))
        .filter(|d| d.join(names::RUN_JSON).is_file())
        .collect();
    if runs.len() >= 2 {
        match crate::app::compare::compare_folders(
            &runs,
            false,
            crate::core::compare::BETWEEN_RUN_SD,
        ) {
            Ok(c) => body.push_str(&crate::app::compare::html::body(&c)),
            Err(e) => {
                let _ = write!(
                    body,
                    "<h2>Task by task</h2><p>Not compared: {}</p>",
                    esc(&format!("{e:#}"))
                );
            }
        }
    }
    document(&format!("batch {}", report.name), &body)
}
