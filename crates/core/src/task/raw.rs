//! `task.toml` as written: what serde reads before any check.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub(super) instance_id: Option<String>,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) protected: Vec<String>,
    pub(super) source: RawSource,
    pub(super) human: RawHuman,
    #[serde(default)]
    pub(super) image: RawImage,
    #[serde(default)]
    pub(super) install: RawInstall,
    pub(super) test: RawTest,
    pub(super) bench: Vec<RawBench>,
    #[serde(default)]
    pub(super) measure: RawMeasure,
    #[serde(default)]
    pub(super) resources: RawResources,
    pub(super) commits: Option<RawCommits>,
    #[serde(default)]
    pub(super) env: RawEnv,
}

/// Environment variables the task's containers get from the harness's own environment at
/// run time (their values are never written anywhere, and are redacted from logs).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEnv {
    #[serde(default)]
    pub(super) pass: Vec<String>,
}

/// The commits the task is known by, as `harness tasks` prints them: checked against the
/// task's content when they are used.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCommits {
    pub(super) base: Option<String>,
    pub(super) human: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMeasure {
    pub(super) max_seconds: Option<f64>,
    pub(super) replicas: Option<u32>,
    pub(super) repetitions: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSource {
    pub(super) path: Option<String>,
    pub(super) git: Option<String>,
    pub(super) url: Option<String>,
    pub(super) base_commit: Option<String>,
    pub(super) image: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHuman {
    pub(super) patch: Option<String>,
    pub(super) commit: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawImage {
    pub(super) base: Option<String>,
    #[serde(default)]
    pub(super) setup: Vec<String>,
    pub(super) setup_timeout: Option<f64>,
    /// Absolute path in the image -> file of the task folder (root-owned, read-only).
    #[serde(default)]
    pub(super) files: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInstall {
    #[serde(default)]
    pub(super) commands: Vec<String>,
    pub(super) timeout: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTest {
    pub(super) command: String,
    pub(super) timeout: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBench {
    pub(super) name: String,
    pub(super) command: String,
    pub(super) warmups: Option<u32>,
    pub(super) runs: Option<u32>,
    pub(super) max_runs: Option<u32>,
    pub(super) timeout: Option<f64>,
    pub(super) metric: Option<String>,
    pub(super) pattern: Option<String>,
    pub(super) json_key: Option<String>,
    pub(super) metric_unit: Option<String>,
    pub(super) better: Option<String>,
    pub(super) check_output: Option<bool>,
    pub(super) no_check_reason: Option<String>,
    pub(super) output_file: Option<String>,
    pub(super) equivalence: Option<String>,
    #[serde(default)]
    pub(super) ignore_lines: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawResources {
    pub(super) cpus: Option<f64>,
    pub(super) memory: Option<String>,
    pub(super) pids: Option<i64>,
    pub(super) network: Option<bool>,
    pub(super) gpus: Option<u32>,
    pub(super) disk: Option<String>,
}
