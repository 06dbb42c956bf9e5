//! What a run records: each sample's report and the run's own `run.json` (plain data; the
//! run folder that holds them is `harness_store::run_folder`).

use serde::{Deserialize, Serialize};

use crate::metrics::{BenchMeans, OptStats};
use crate::stats::{Decision, SpeedupIntervals};
use crate::status::Status;

/// The version of the files of a run folder.
pub const SCHEMA_VERSION: u32 = 1;

/// The most samples per instance a run evaluates (`--k`).
pub const MAX_K: usize = 10_000;

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
    pub gso_times: Option<crate::gso::GsoTimes>,
    /// Rounds in which base, human and this sample all have a valid figure.
    pub measured_rounds: u32,
    /// The variant whose timings this sample took, its patched tree being byte-identical
    /// to that variant's ("base", "human" or another sample's "sN").
    #[serde(default)]
    pub shared_with: Option<String>,
    /// GPU energy per measured round of base, human and this sample, and the ratios (GPU
    /// tasks with telemetry only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::timings::EnergySummary>,
    /// The machine fingerprint the sample was measured on (see run.json).
    pub fingerprint_id: String,
    pub seconds: PhaseSeconds,
    /// The size of the sample's patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<crate::patch::ChangeSize>,
    /// What the agent spent making this sample (a predictions row of `harness agent run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<crate::spend::AgentSpend>,
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

/// One regrading, as run.json keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regrading {
    pub at: String,
    pub from: crate::rule::DecisionRule,
    pub to: crate::rule::DecisionRule,
    /// Samples judged again from their timings.
    pub samples: usize,
    /// Of those, how many changed verdict (opt_base, opt_commit or inconclusive).
    pub changed: usize,
}

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
    pub settings: crate::settings::Settings,
    /// The rule the verdicts now stand under: the settings' own, or the latest of
    /// `regradings`.
    pub decision_rule: crate::rule::DecisionRule,
    pub jobs: usize,
    /// How the cores were split into exclusive bench slots.
    pub cpu_plan: crate::cpu_plan::CpuPlan,
    pub fingerprint: crate::fingerprint::Fingerprint,
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
    pub partition: Option<crate::partition::PartitionInfo>,
    /// The partition runs `harness merge` made this run from (absent in runs it did not make).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedPart>,
    /// `--hacked-ids FILE`: instances whose optimisation was judged a reward hack (GSO's
    /// `hacked_ids`); the reports give a hack-adjusted score beside the raw one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hacked: Option<crate::gso::HackedIds>,
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
