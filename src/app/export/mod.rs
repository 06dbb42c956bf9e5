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
pub mod spend;
mod text;

use std::path::PathBuf;

use anyhow::Result;

use crate::core::summary::Summary;
use crate::store::confined::Confined;
use crate::store::run_folder::RunDir;

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

/// Writes every report of the run folder (atomically, each, never through a link), and removes rollout reports
/// and GSO-layout files an earlier write left that this one does not hold (K, the rollout
/// names or a sample's outcome changed).
pub fn write_all(run: &RunDir, summary: &Summary) -> Result<Vec<PathBuf>> {
    let store = run.store();
    let mut written = Vec::new();
    for e in exporters(run) {
        for f in e.files(summary)? {
            let path = run.root.join(&f.name);
            // Its error names the path, or the link on its way.
            store.write_atomic(&path, &f.bytes)?;
            written.push(path);
        }
    }
    let gso = run.root.join(crate::store::run_folder::names::GSO_DIR);
    remove_stale(
        &store,
        &run.root.join(crate::store::run_folder::names::ROLLOUTS_DIR),
        &written,
    );
    remove_stale(&store, &gso.join("predictions"), &written);
    let logs = gso.join("logs/run_evaluation").join(&summary.info.run_id);
    remove_stale(&store, &logs, &written);
    for dir in store.entries(&logs).unwrap_or_default() {
        for instance in store.entries(&dir).unwrap_or_default() {
            remove_stale(&store, &instance, &written);
        }
        remove_stale(&store, &dir, &written);
    }
    Ok(written)
}

/// Removes what `dir` holds that no written path is in or under (never through a link:
/// a link is removed itself, a folder reached through one is left alone).
fn remove_stale(store: &Confined, dir: &std::path::Path, written: &[PathBuf]) {
    for sub in store.entries(dir).unwrap_or_default() {
        if written.iter().any(|w| w.starts_with(&sub)) {
            continue;
        }
        let _ = store.remove(&sub);
    }
}
