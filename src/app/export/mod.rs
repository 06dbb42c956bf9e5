//! Every report file, made from what is saved in a run folder and nothing else, so `harness
//! report` (`app::report`) regenerates exactly what the run wrote. One [`Exporter`] per file format, each
//! in its own file, registered in [`exporters`]; the names are `store::run_folder::names`'.

mod csv;
mod gso;
mod gso_logs;
pub mod html;
mod json;
mod junit;
mod markdown;
mod text;

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::core::summary::Summary;
use crate::store::run_folder::{RunDir, write_atomic};

pub use json::json_summary;
pub use junit::junit_xml;
pub use markdown::summary_markdown;
pub use text::{columns, run_ending, terminal_summary, to_the_minute};

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
        Box::new(gso_logs::GsoLogs { run: run.clone() }),
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
/// and GSO-layout files an earlier write left that this one does not hold (K, the rollout
/// names or a sample's outcome changed).
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
    let gso = run.root.join(crate::store::run_folder::names::GSO_DIR);
    remove_stale(
        &run.root.join(crate::store::run_folder::names::ROLLOUTS_DIR),
        &written,
    );
    remove_stale(&gso.join("predictions"), &written);
    let logs = gso.join("logs/run_evaluation").join(&summary.info.run_id);
    remove_stale(&logs, &written);
    if let Ok(rollouts) = std::fs::read_dir(&logs) {
        for dir in rollouts.filter_map(|e| e.ok()).map(|e| e.path()) {
            for instance in std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
            {
                remove_stale(&instance.path(), &written);
            }
            remove_stale(&dir, &written);
        }
    }
    Ok(written)
}

/// Removes what `dir` holds that no written path is in or under.
fn remove_stale(dir: &std::path::Path, written: &[PathBuf]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for sub in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
        if written.iter().any(|w| w.starts_with(&sub)) {
            continue;
        }
        let _ = if sub.is_dir() {
            std::fs::remove_dir_all(&sub)
        } else {
            std::fs::remove_file(&sub)
        };
    }
}
