//! What each run folder holds and how far it got, read from run.json and the samples'
//! report.json files (the rule the reports use: only the samples of the run's current
//! predictions, each only with a report.json whose `result_key` matches). `status` prints
//! it; `fanout` adds up a fan-out's parts from it.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;

use crate::core::status::Status;
use crate::store::run_folder::RunDir;

/// Where one expected sample stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleState {
    /// A result with a model outcome (passed, test_failed, ..., empty_patch).
    Done,
    /// A result that is not the model's (`error` or `base_failed`): run again on resume.
    Failed,
    /// Not attempted on this host (a GPU task under `--skip-gpu`): run again on resume.
    Skipped,
    /// No report.json for the current prediction: not run yet, or its prediction changed.
    Left,
}

#[derive(Debug, Clone, Serialize)]
pub struct SampleStatus {
    pub sample: usize,
    pub state: SampleState,
    /// The saved status, when there is a result.
    pub status: Option<String>,
    /// The result's one-line reason (failed samples).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Counts over some samples.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub expected: usize,
    pub done: usize,
    /// `error` plus `base_failed`.
    pub failed: usize,
    pub error: usize,
    pub base_failed: usize,
    pub skipped: usize,
    pub left: usize,
}

impl Counts {
    fn add(&mut self, s: &SampleStatus) {
        self.expected += 1;
        match s.state {
            SampleState::Done => self.done += 1,
            SampleState::Failed => {
                self.failed += 1;
                if s.status.as_deref() == Some(Status::Error.as_str()) {
                    self.error += 1;
                } else {
                    self.base_failed += 1;
                }
            }
            SampleState::Skipped => self.skipped += 1,
            SampleState::Left => self.left += 1,
        }
    }

    fn merge(&mut self, o: &Counts) {
        self.expected += o.expected;
        self.done += o.done;
        self.failed += o.failed;
        self.error += o.error;
        self.base_failed += o.base_failed;
        self.skipped += o.skipped;
        self.left += o.left;
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct InstanceStatus {
    pub instance_id: String,
    #[serde(flatten)]
    pub counts: Counts,
    pub samples: Vec<SampleStatus>,
}

/// One run folder (one model).
#[derive(Debug, Clone, Serialize)]
pub struct RunStatus {
    pub run_dir: PathBuf,
    pub run_id: String,
    pub model: String,
    pub k: usize,
    pub totals: Counts,
    /// Instances with every expected sample done or failed as `base_failed` (nothing left,
    /// no `error`).
    pub finished_instances: usize,
    pub interrupted: Option<String>,
    /// The reports' rule: every expected sample has a result that is not `error`, and the
    /// run was not interrupted.
    pub complete: bool,
    /// run.json comes from an older harness build that did not list the expected samples:
    /// the first K sample folders are taken as expected.
    pub expected_unknown: bool,
    /// `--partition I/N` runs: [I, N].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<[usize; 2]>,
    /// run.json records the run's end (a run still going, or killed, has none).
    pub finished: bool,
    pub instances: Vec<InstanceStatus>,
}

/// Reads one run folder.
pub fn run_status(root: &Path) -> Result<RunStatus> {
    let run = RunDir {
        root: root.to_path_buf(),
    };
    let info = run.load_run_info()?;
    let k = info.k;
    let mut instances = Vec::new();
    let mut totals = Counts::default();
    for id in &info.instance_ids {
        // (sample index, result key it must have: None for old run folders)
        let expected: Vec<(usize, Option<&str>)> = match &info.samples {
            Some(map) => map
                .get(id)
                .map(Vec::as_slice)
                .unwrap_or(&[])
                .iter()
                .filter(|e| e.sample < k)
                .map(|e| (e.sample, Some(e.result_key.as_str())))
                .collect(),
            None => (0..k).map(|i| (i, None)).collect(),
        };
        let mut counts = Counts::default();
        let mut samples = Vec::new();
        for (sample, key) in expected {
            let report = run
                .load_sample(&info.model, id, sample)
                .filter(|r| key.is_none_or(|k| r.result_key == k));
            let s = match report {
                None => SampleStatus {
                    sample,
                    state: SampleState::Left,
                    status: None,
                    detail: String::new(),
                },
                Some(r) => {
                    let state = match r.status {
                        Status::Error | Status::BaseFailed => SampleState::Failed,
                        Status::Skipped => SampleState::Skipped,
                        _ => SampleState::Done,
                    };
                    SampleStatus {
                        sample,
                        state,
                        status: Some(r.status.as_str().to_string()),
                        detail: if state == SampleState::Done {
                            String::new()
                        } else {
                            r.detail.lines().next().unwrap_or("").to_string()
                        },
                    }
                }
            };
            counts.add(&s);
            samples.push(s);
        }
        samples.sort_by_key(|s| s.sample);
        totals.merge(&counts);
        instances.push(InstanceStatus {
            instance_id: id.clone(),
            counts,
            samples,
        });
    }
    let finished_instances = instances
        .iter()
        .filter(|i| i.counts.expected > 0 && i.counts.left == 0 && i.counts.error == 0)
        .count();
    Ok(RunStatus {
        run_dir: root.to_path_buf(),
        run_id: info.run_id.clone(),
        model: info.model.clone(),
        k,
        complete: totals.left == 0 && totals.error == 0 && info.interrupted.is_none(),
        totals,
        finished_instances,
        interrupted: info.interrupted.clone(),
        expected_unknown: info.samples.is_none(),
        partition: info.partition.as_ref().map(|p| [p.index, p.count]),
        finished: info.finished_at.is_some(),
        instances,
    })
}

/// The run folders under `path`: itself when it has a run.json, else its sub-folders that
/// have one (a folder holding several models' runs) and their sub-folders that have one (a
/// fan-out folder's `parts/`), sorted.
pub fn run_folders(path: &Path) -> Result<Vec<PathBuf>> {
    if path
        .join(crate::store::run_folder::names::RUN_JSON)
        .is_file()
    {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        bail!("{}: not a folder", path.display());
    }
    let has_run = |p: &PathBuf| p.join(crate::store::run_folder::names::RUN_JSON).is_file();
    let mut found = Vec::new();
    // Folders only, never links: a part folder that links elsewhere would bring another
    // place's files into what is read (and merged).
    let real_dirs = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    for sub in real_dirs(path) {
        if has_run(&sub) {
            found.push(sub);
        } else {
            // A fan-out folder keeps its parts one level further down (`parts/`).
            found.extend(real_dirs(&sub).into_iter().filter(has_run));
        }
    }
    found.sort();
    if found.is_empty() {
        bail!(
            "{}: no run.json here or in its sub-folders (is this a run folder, evaluation_results/<run_id>?)",
            path.display()
        );
    }
    Ok(found)
}

/// Every run folder named (or found under a named folder).
pub fn status_of(paths: &[PathBuf]) -> Result<Vec<RunStatus>> {
    let mut out = Vec::new();
    for p in paths {
        for dir in run_folders(p)? {
            out.push(run_status(&dir)?);
        }
    }
    Ok(out)
}
