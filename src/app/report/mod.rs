//! Every report, made from what is saved in a run folder and nothing else, so `harness
//! report` regenerates exactly what the run wrote. One [`Exporter`] per file format, each
//! in its own file, registered in [`exporters`]; the names are `core::results::names`'.

pub mod command;
mod csv;
mod gso;
pub mod html;
mod json;
mod junit;
mod markdown;
pub mod regrade;
mod text;

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::core::results::{RunDir, write_atomic};
use crate::core::summary::Summary;

pub use json::json_summary;
pub use junit::junit_xml;
pub use markdown::summary_markdown;
pub use text::{columns, terminal_summary};

/// One file of a report: its path relative to the run folder and its bytes.
pub struct ReportFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// One report format: the files it writes, from the summary alone.
pub trait Exporter {
    fn files(&self, summary: &Summary) -> Result<Vec<ReportFile>>;
}

/// A format of one file whose name does not depend on the run.
fn single(name: &str, bytes: Vec<u8>) -> Result<Vec<ReportFile>> {
    Ok(vec![ReportFile {
        name: name.to_string(),
        bytes,
    }])
}

/// Every report a run folder holds, in the order they are written.
pub fn exporters(run: &RunDir) -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(gso::RolloutReports),
        Box::new(gso::RunReports),
        Box::new(markdown::SummaryMarkdown),
        Box::new(csv::ResultsCsv),
        Box::new(json::JsonSummary),
        Box::new(junit::Junit),
        Box::new(html::HtmlReport { run: run.clone() }),
    ]
}

/// The report files of a run, by path.
pub fn report_paths(run: &RunDir, summary: &Summary) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in exporters(run) {
        out.extend(e.files(summary)?.into_iter().map(|f| run.root.join(f.name)));
    }
    Ok(out)
}

/// Writes every report of the run folder (atomically, each), and removes rollout reports
/// an earlier write left that this one does not hold (K or the rollout names changed).
pub fn write_all(run: &RunDir, summary: &Summary) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for e in exporters(run) {
        for f in e.files(summary)? {
            let path = run.root.join(&f.name);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("{}: cannot create", dir.display()))?;
            }
            write_atomic(&path, &f.bytes)
                .with_context(|| format!("{}: cannot write", path.display()))?;
            written.push(path);
        }
    }
    remove_stale_rollouts(run, &written);
    Ok(written)
}

fn remove_stale_rollouts(run: &RunDir, written: &[PathBuf]) {
    let dir = run.root.join(crate::core::results::names::ROLLOUTS_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for sub in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
        let keep = written.iter().any(|w| w.starts_with(&sub));
        if !keep && sub.is_dir() {
            let _ = std::fs::remove_dir_all(&sub);
        }
    }
}
