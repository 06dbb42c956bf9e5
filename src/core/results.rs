//! What a run writes, per sample, and how it is read back: the results store.
//!
//! A sample is finished when its `report.json` exists; every write is a temp file + rename,
//! so a killed run leaves either the old file or the new one, never half of one.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::core::metrics::{BenchMeans, OptStats};
use crate::core::stats::{Decision, SpeedupIntervals};

pub const SCHEMA_VERSION: u32 = 1;

/// A sample's outcome. Model outcomes first; `base_failed` and `error` are not the model's
/// fault, are counted apart and retried on resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    TestFailed,
    Timeout,
    Oom,
    BuildFailed,
    PatchFailed,
    PatchRejected,
    EmptyPatch,
    BaseFailed,
    Error,
    /// Not attempted: the task needs GPUs this host cannot give and `--skip-gpu` was set.
    Skipped,
}

impl Status {
    pub const ALL: [Status; 11] = [
        Status::Passed,
        Status::TestFailed,
        Status::Timeout,
        Status::Oom,
        Status::BuildFailed,
        Status::PatchFailed,
        Status::PatchRejected,
        Status::EmptyPatch,
        Status::BaseFailed,
        Status::Error,
        Status::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::TestFailed => "test_failed",
            Status::Timeout => "timeout",
            Status::Oom => "oom",
            Status::BuildFailed => "build_failed",
            Status::PatchFailed => "patch_failed",
            Status::PatchRejected => "patch_rejected",
            Status::EmptyPatch => "empty_patch",
            Status::BaseFailed => "base_failed",
            Status::Error => "error",
            Status::Skipped => "skipped",
        }
    }

    /// Best-of-K order: passed > test_failed > timeout > oom > build_failed > patch_failed >
    /// patch_rejected > empty_patch > base_failed > error > skipped. Lower is better.
    pub fn rank(self) -> usize {
        Status::ALL
            .iter()
            .position(|s| *s == self)
            .unwrap_or(usize::MAX)
    }

    /// Not the model's fault: run again when the command is repeated.
    pub fn retried_on_resume(self) -> bool {
        matches!(self, Status::BaseFailed | Status::Error | Status::Skipped)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long each phase of a sample took, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseSeconds {
    pub container: f64,
    pub apply: f64,
    pub install: f64,
    pub test: f64,
    /// The task's whole measurement (all variants, interleaved), shared by its samples.
    pub measure: f64,
}

/// `report.json` of one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleReport {
    pub schema_version: u32,
    pub instance_id: String,
    /// The model name as given on the command line.
    pub model: String,
    /// `model_name_or_path` of the prediction, as submitted.
    pub model_name_or_path: String,
    pub sample: usize,
    /// Where the prediction came from (file:line).
    pub origin: String,
    pub status: Status,
    /// One line on why, for anything but a plain pass.
    pub detail: String,
    pub apply_strategy: Option<String>,
    pub patch_sha256: String,
    pub image: String,
    /// Identifies task, image, patch and measurement settings; resume re-runs a sample
    /// whose key changed.
    pub result_key: String,
    pub criterion: String,
    pub opt_base: bool,
    pub opt_commit: bool,
    /// The three-way decisions behind `opt_base` / `opt_commit` (always decided under gso).
    pub decision_base: Decision,
    pub decision_commit: Decision,
    /// Passed, but the verdict was still undecided when the budget was spent: reported
    /// apart and counted as not optimised.
    pub inconclusive: bool,
    pub opt_stats: Option<OptStats>,
    /// 95% bootstrap intervals of the speedups.
    pub intervals: Option<SpeedupIntervals>,
    pub bench_means: Vec<BenchMeans>,
    /// GSO's per-test means (see `core::gso`), what the GSO-named report fields are from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso_times: Option<crate::core::gso::GsoTimes>,
    /// Rounds in which base, human and this sample all have a valid figure.
    pub measured_rounds: u32,
    /// The variant whose timings this sample took, its patched tree being byte-identical
    /// to that variant's ("base", "human" or another sample's "sN").
    #[serde(default)]
    pub shared_with: Option<String>,
    /// GPU energy per measured round of base, human and this sample, and the ratios (GPU
    /// tasks with telemetry only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::core::timings::EnergySummary>,
    /// The machine fingerprint the sample was measured on (see run.json).
    pub fingerprint_id: String,
    pub seconds: PhaseSeconds,
    pub harness_version: String,
    pub finished_at: String,
    /// What the measurement found wrong with the task itself (see
    /// `BenchLog::seed_warnings`), shown in the reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl SampleReport {
    /// pass in pass@k: applied, built and the test passed.
    pub fn passed(&self) -> bool {
        self.status == Status::Passed
    }
}

/// Paths and names inside `evaluation_results/<run_id>/`.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub root: PathBuf,
}

/// Every file name of a run folder, in one place: the run's own files, the reports (written
/// by `app::report`'s exporters under these names) and each sample's files.
/// The most samples per instance a run evaluates (`--k`).
pub const MAX_K: usize = 10_000;

pub mod names {
    pub const RUN_JSON: &str = "run.json";
    /// GSO's per-rollout run reports: `rollouts/<rollout>/<rollout>.<run_id>.report.json`.
    pub const ROLLOUTS_DIR: &str = "rollouts";
    /// GSO's own folder layout of the run, for GSO's tools (`cd gso` and they find it):
    /// `gso/logs/run_evaluation/<run_id>/<rollout>/<instance>/{patch.diff,test_output.txt,
    /// report.json}` and each rollout's predictions, `gso/predictions/<rollout>.jsonl`.
    pub const GSO_DIR: &str = "gso";
    pub const SUMMARY_MD: &str = "summary.md";
    pub const RESULTS_CSV: &str = "results.csv";
    pub const SUMMARY_JSON: &str = "summary.json";
    pub const JUNIT_XML: &str = "junit.xml";
    pub const REPORT_HTML: &str = "report.html";
    /// Image build logs: `images/<instance>.build.log`.
    pub const IMAGES_DIR: &str = "images";
    /// Base's and human's logs: `<model>/<instance>/reference/{base,human}/`.
    pub const REFERENCE_DIR: &str = "reference";
    pub const STATUS_TXT: &str = "status.txt";
    // A sample's folder, `<model>/<instance>/<sample>/`.
    pub const PATCH_DIFF: &str = "patch.diff";
    pub const APPLY_LOG: &str = "apply.log";
    pub const BUILD_LOG: &str = "build.log";
    pub const TEST_OUTPUT: &str = "test_output.txt";
    pub const BENCH_JSON: &str = "bench.json";
    pub const TELEMETRY_JSONL: &str = "telemetry.jsonl";
    pub const REPORT_JSON: &str = "report.json";

    /// The GSO-compatible run report: `<model>.<run_id>.report.json`.
    pub fn gso_report(model_slug: &str, run_id: &str) -> String {
        format!("{model_slug}.{run_id}.report.json")
    }

    /// The Opt@K report: `<model>.opt@<K>.<run_id>.report.json`.
    pub fn opt_at_k_report(model_slug: &str, k: usize, run_id: &str) -> String {
        format!("{model_slug}.opt@{k}.{run_id}.report.json")
    }
}

impl RunDir {
    pub fn new(results_root: &Path, run_id: &str) -> RunDir {
        RunDir {
            root: results_root.join(run_id),
        }
    }

    pub fn run_json(&self) -> PathBuf {
        self.root.join(names::RUN_JSON)
    }

    pub fn model_dir(&self, model: &str) -> PathBuf {
        let dir = self.root.join(model_slug(model));
        // Run folders of earlier builds named a model with `/` by its sanitised name and a
        // hash: their samples are found (and resumed) where they are.
        let legacy = self.root.join(legacy_model_slug(model));
        if !dir.exists() && legacy.is_dir() {
            return legacy;
        }
        dir
    }

    pub fn sample_dir(&self, model: &str, instance_id: &str, sample: usize) -> PathBuf {
        self.model_dir(model)
            .join(instance_id)
            .join(sample.to_string())
    }

    pub fn load_sample(
        &self,
        model: &str,
        instance_id: &str,
        sample: usize,
    ) -> Option<SampleReport> {
        let path = self
            .sample_dir(model, instance_id, sample)
            .join(names::REPORT_JSON);
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// Model names become folder and file names: keep letters, digits, `.`, `_`, `-`.
pub fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() { "model".into() } else { s }
}

/// A model's folder and file-name part: GSO's (`/` as `__`, its `model_name_or_path`
/// folders) when that is tame and maps back to one name only, else the sanitised name
/// plus a short hash of the original, so `a/b`, `a__b` and `a_b` never share results.
pub fn model_slug(model: &str) -> String {
    let gso = model.replace('/', "__");
    // Only `/` becomes `__`, and no `_` stands beside a `/` or beside another `_`: every
    // run of two or more underscores then came from slashes, and the slug names one model.
    let one_to_one = !model.contains("__") && !model.contains("/_") && !model.contains("_/");
    if one_to_one && sanitize(&gso) == gso {
        gso
    } else {
        let clean = sanitize(model);
        let h = crate::core::digest::sha256_hex(model.as_bytes());
        format!("{clean}-{}", &h[..8])
    }
}

/// The model folder name of builds before GSO's names: the sanitised name, plus a short
/// hash of the original when that changed it.
pub fn legacy_model_slug(model: &str) -> String {
    let clean = sanitize(model);
    if clean == model {
        clean
    } else {
        let h = crate::core::digest::sha256_hex(model.as_bytes());
        format!("{clean}-{}", &h[..8])
    }
}

/// Writes a file whole or not at all: a temp file in the same folder, then rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .with_context(|| format!("{}: no parent folder", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("{}: cannot create a temp file", dir.display()))?;
    use std::io::Write;
    // Temp files are created 0600; results are for sharing.
    use std::os::unix::fs::PermissionsExt;
    tmp.write_all(bytes)
        .and_then(|_| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
        })
        .and_then(|_| tmp.as_file().sync_all())
        .with_context(|| format!("{}: cannot write", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("{}: cannot rename into place", path.display()))?;
    Ok(())
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value).context("cannot serialise")?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// One regrading, as run.json keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regrading {
    pub at: String,
    pub from: crate::core::rule::DecisionRule,
    pub to: crate::core::rule::DecisionRule,
    /// Samples judged again from their timings.
    pub samples: usize,
    /// Of those, how many changed verdict (opt_base, opt_commit or inconclusive).
    pub changed: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_of_k_order() {
        let mut v = vec![
            Status::Error,
            Status::EmptyPatch,
            Status::Passed,
            Status::BaseFailed,
            Status::TestFailed,
            Status::PatchFailed,
            Status::BuildFailed,
            Status::PatchRejected,
        ];
        v.sort_by_key(|s| s.rank());
        assert_eq!(
            v,
            [
                Status::Passed,
                Status::TestFailed,
                Status::BuildFailed,
                Status::PatchFailed,
                Status::PatchRejected,
                Status::EmptyPatch,
                Status::BaseFailed,
                Status::Error
            ]
        );
        assert!(Status::Error.retried_on_resume());
        assert!(!Status::TestFailed.retried_on_resume());
        assert_eq!(
            serde_json::to_string(&Status::PatchRejected).unwrap(),
            "\"patch_rejected\""
        );
    }

    #[test]
    fn sanitized_names() {
        assert_eq!(sanitize("org/model v2"), "org_model_v2");
        assert_eq!(sanitize("demo-agent"), "demo-agent");
        assert_eq!(sanitize("../x"), "_x");
        assert_eq!(sanitize(""), "model");
        assert_eq!(model_slug("demo-agent"), "demo-agent");
        assert_ne!(model_slug("a/b"), model_slug("a_b"));
        // GSO's folder name (`/` as `__`) where it names one model only.
        assert_eq!(model_slug("org/model-v2"), "org__model-v2");
        assert_eq!(model_slug("a/b"), "a__b");
        assert!(model_slug("a__b").starts_with("a__b-"));
        assert_ne!(model_slug("a/_b"), model_slug("a_/b"));
        assert!(model_slug("a/_b").starts_with("a__b-"));
        assert!(model_slug("org/model v2").starts_with("org_model_v2-"));
        // A run folder an earlier build wrote (`org_model-<hash>`) is still found.
        let d = tempfile::tempdir().unwrap();
        let run = RunDir {
            root: d.path().to_path_buf(),
        };
        assert_eq!(run.model_dir("org/model"), d.path().join("org__model"));
        std::fs::create_dir(d.path().join(legacy_model_slug("org/model"))).unwrap();
        assert_eq!(
            run.model_dir("org/model"),
            d.path().join(legacy_model_slug("org/model"))
        );
    }

    #[test]
    fn atomic_write_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(std::fs::read_dir(d.path().join("a")).unwrap().count(), 1);
    }
}

/// A predictions file a run read, with its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputFile {
    pub path: String,
    pub sha256: String,
}

/// A sample the run's predictions hold: a report counts for it only with this result key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedSample {
    pub sample: usize,
    pub patch_sha256: String,
    pub result_key: String,
}

/// `run.json`: what was run, how, and on what machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub schema_version: u32,
    pub run_id: String,
    pub model: String,
    pub k: usize,
    pub command: Vec<String>,
    pub dataset: String,
    pub dataset_digest: String,
    /// Every selected instance: the denominator of Opt@K.
    pub instance_ids: Vec<String>,
    /// Every instance of the dataset, selected or not: the denominator under `--criterion
    /// gso` (GSO's Opt@K is over its whole dataset, whatever `--instance_ids` ran).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dataset_instance_ids: Vec<String>,
    pub predictions: Vec<InputFile>,
    /// The rule and budget the run was measured under, as given (see `core::settings`).
    #[serde(default)]
    pub settings: crate::core::settings::Settings,
    /// The rule the verdicts now stand under: the settings' own, or the latest of
    /// `regradings`.
    pub decision_rule: crate::core::rule::DecisionRule,
    pub jobs: usize,
    /// How the cores were split into exclusive bench slots.
    pub cpu_plan: crate::core::cpuset::CpuPlan,
    pub fingerprint: crate::core::fingerprint::Fingerprint,
    pub fingerprint_id: String,
    pub harness_version: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Problems with the input that did not stop the run.
    pub warnings: Vec<String>,
    /// instance → the samples of the current predictions (saved results of rows that are
    /// no longer there do not count). `None` in run folders of older harness builds.
    #[serde(default)]
    pub samples: Option<std::collections::BTreeMap<String, Vec<ExpectedSample>>>,
    /// The signal that stopped the run ("SIGINT", "SIGTERM"), when one did.
    #[serde(default)]
    pub interrupted: Option<String>,
    /// `harness report --criterion ...` runs that judged the samples again, oldest first;
    /// `decision_rule` is the latest rule.
    #[serde(default)]
    pub regradings: Vec<Regrading>,
    /// `--partition I/N`: which part of the selection this run holds (absent in whole runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<crate::core::partition::PartitionInfo>,
    /// The partition runs `harness merge` made this run from (absent in runs it did not make).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedPart>,
    /// `--hacked-ids FILE`: instances whose optimisation was judged a reward hack (GSO's
    /// `hacked_ids`); the reports give a hack-adjusted score beside the raw one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hacked: Option<crate::core::gso::HackedIds>,
}

/// One partition run a merged run was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedPart {
    /// The partition's folder, as given to `harness merge`.
    pub dir: String,
    pub run_id: String,
    pub index: usize,
    pub count: usize,
    pub instance_ids: Vec<String>,
    pub fingerprint_id: String,
    pub command: Vec<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
}

impl RunDir {
    pub fn load_run_info(&self) -> Result<RunInfo> {
        let path = self.run_json();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("{}: cannot read (is this a run folder?)", path.display()))?;
        let info: RunInfo = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a run.json this harness can read", path.display()))?;
        // Readers loop over K (an old run.json lists no samples): a K no run can have is
        // refused here, not allocated.
        if info.k == 0 || info.k > MAX_K {
            anyhow::bail!(
                "{}: k = {} is not a K this harness runs (1 to {MAX_K})",
                path.display(),
                info.k
            );
        }
        Ok(info)
    }
}
