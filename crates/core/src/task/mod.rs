//! Tasks: the `task.toml` format, loaded once and validated into a [`Task`].
//!
//! Every error names the file and, where there is one, the field. The file as written is
//! `raw`, its stages `parse`, what a result depends on `identity`.

mod identity;
mod parse;
mod raw;
mod untrusted;

pub use untrusted::{allow_pass_env, allowed_env, check_revision, check_url};

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

/// What parsing a task.toml asks of the task's folder: core reads no file itself;
/// `harness_store::task_folder` answers from the file system.
pub trait TaskFolder {
    /// The folder the task.toml is in.
    fn dir(&self) -> &Path;
    /// `given`, a path the task.toml names, inside the folder, or why it is refused.
    fn inside(&self, given: &str) -> std::result::Result<PathBuf, String>;
    /// What is at `path` (links followed).
    fn kind(&self, path: &Path) -> PathKind;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Missing,
    File,
    Dir,
    Other,
}

/// The image every task builds FROM unless it names another.
pub const DEFAULT_BASE_IMAGE: &str = "harness-base:bookworm";

/// Where the task's source lives inside every container.
pub const WORKDIR: &str = "/testbed";

const DEFAULT_INSTALL_TIMEOUT_S: f64 = 600.0;
const DEFAULT_TEST_TIMEOUT_S: f64 = 300.0;
const DEFAULT_BENCH_TIMEOUT_S: f64 = 300.0;
const DEFAULT_SETUP_TIMEOUT_S: f64 = 1800.0;
const DEFAULT_MEASURE_SECONDS: f64 = 900.0;

// ---- the validated task -----------------------------------------------------------------

/// Where the code at the base commit comes from. Always fetched on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A folder shipped with the task.
    Folder(PathBuf),
    /// A local git repository or bundle, at `base_commit`.
    Git { repo: PathBuf, base_commit: String },
    /// A git URL, cloned on the host, at `base_commit`.
    Url { url: String, base_commit: String },
    /// A prebuilt image (GSO's instance images) whose `/testbed` is a git repository at
    /// base: used as it is, never copied to or from the host; the task image is a thin layer
    /// over it (the harness's guard, the task's files, the lock).
    Image { image: String },
}

/// The human reference optimisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HumanRef {
    /// A patch file against base.
    Patch(PathBuf),
    /// `opt_commit` in the git source.
    Commit(String),
    /// `opt_commit` inside a prebuilt image (`source.image`; GSO's images keep the object):
    /// applied as the diff from the image's base to it in the container, submodules it moves
    /// checked out; where the image lacks the object, `patch` (GSO's gt_diff), if given.
    ImageCommit {
        commit: String,
        patch: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Lower,
    Higher,
}

/// What a bench run measures.
#[derive(Debug, Clone)]
pub enum Metric {
    /// Wall time of the bench process, taken inside the container.
    Wall,
    /// A number the bench prints, captured by the first group of a regex.
    Pattern(regex::Regex),
    /// A number under a key of a JSON object the bench prints as a line of its output.
    JsonKey(String),
}

impl Metric {
    pub fn describe(&self) -> String {
        match self {
            Metric::Wall => "wall".to_string(),
            Metric::Pattern(re) => format!("pattern:{}", re.as_str()),
            Metric::JsonKey(k) => format!("json_key:{k}"),
        }
    }
}

/// How a variant's bench output is checked against base's in the same round (same
/// `HARNESS_BENCH_SEED`): a bench that exits early or prints an answer it did not compute
/// fails the sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputCheck {
    /// stdout must equal base's, lines matching these regexes left out (the figure an
    /// output metric prints is always left out).
    Stdout { ignore: Vec<String> },
    /// This file (repository-relative, written by the bench) must equal base's, or, where
    /// they differ and the task names an `equivalence` command, be judged equivalent to it
    /// by that command, run in base's container on base's code (never in the process of
    /// the code under test: GSO's tests compare their result with base's themselves).
    File {
        path: String,
        equivalence: Option<String>,
    },
    /// Not checked, and why (the task says).
    Off { reason: String },
}

impl OutputCheck {
    pub fn describe(&self) -> String {
        match self {
            OutputCheck::Stdout { ignore } if ignore.is_empty() => "stdout".into(),
            OutputCheck::Stdout { ignore } => format!("stdout without {}", ignore.join(" | ")),
            OutputCheck::File {
                path,
                equivalence: None,
            } => format!("file {path}"),
            OutputCheck::File {
                path,
                equivalence: Some(command),
            } => format!("file {path}, or equivalent to base's by `{command}`"),
            OutputCheck::Off { reason } => format!("off ({reason})"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Bench {
    pub name: String,
    pub command: String,
    pub warmups: u32,
    /// Measured rounds at least.
    pub runs: u32,
    /// Measured rounds at most, under the strict criterion (the adaptive budget).
    pub max_runs: u32,
    pub timeout: Duration,
    pub metric: Metric,
    pub better: Better,
    /// Seconds per unit of an output metric that is a duration (`metric_unit`): its claimed
    /// savings are then checked against the wall time (see `eval::figures`).
    pub metric_unit_s: Option<f64>,
    pub output_check: OutputCheck,
}

#[derive(Debug, Clone)]
pub struct Resources {
    pub cpus: f64,
    pub memory_bytes: i64,
    pub pids: i64,
    pub network: bool,
    pub gpus: u32,
    /// How much the tree and the sandbox user's home may grow on disk (after the patch), and
    /// the largest file the code under test may write.
    pub disk_bytes: i64,
}

/// `resources.disk` unless the task says.
pub const DEFAULT_DISK_BYTES: i64 = 4 << 30;

impl Resources {
    /// The most a bench run may print (stdout and stderr together): 64 MiB, or an eighth
    /// of the memory limit when that is less (its output lives on a tmpfs charged to the
    /// container's memory).
    pub fn bench_output_limit(&self) -> i64 {
        (64i64 << 20).min(self.memory_bytes / 8)
    }

    /// Size of the tmpfs a bench's output goes to: room for the limit, twice (stdout and
    /// stderr), and the watchdog's reaction time.
    pub fn bench_output_tmpfs(&self) -> i64 {
        2 * self.bench_output_limit() + (4 << 20)
    }

    /// Size of the tmpfs mounted over /tmp: a quarter of the memory limit (it is charged to
    /// it), at most the disk limit.
    pub fn tmp_tmpfs(&self) -> i64 {
        (self.memory_bytes / 4).min(self.disk_bytes).max(1 << 20)
    }
}

#[derive(Debug, Clone)]
pub struct Task {
    pub id: String,
    /// The task's folder; relative paths in the file are relative to it.
    pub dir: PathBuf,
    pub toml_path: PathBuf,
    pub description: String,
    pub source: Source,
    pub human: HumanRef,
    pub base_image: String,
    pub setup: Vec<String>,
    /// `[image] files`: (absolute path in the image, file of the task folder), installed
    /// root-owned and read-only.
    pub image_files: Vec<(String, PathBuf)>,
    /// `[env] pass`: variables taken from the harness's environment at run time.
    pub env_pass: Vec<String>,
    pub setup_timeout: Duration,
    pub install: Vec<String>,
    pub install_timeout: Duration,
    pub test_command: String,
    pub test_timeout: Duration,
    pub benches: Vec<Bench>,
    /// Wall-time budget of the task's whole measurement.
    pub measure_max_seconds: f64,
    /// Containers per variant under strict (None: the harness's default).
    pub replicas: Option<u32>,
    /// Timed repetitions per exec under strict (None: the harness's default).
    pub repetitions: Option<u32>,
    pub resources: Resources,
    pub protected: Vec<String>,
    protected_set: Vec<regex::Regex>,
    /// `[commits]`: the base and human commits the task states (prefixes allowed).
    pub commits: Option<StatedCommits>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatedCommits {
    pub base: Option<String>,
    pub human: Option<String>,
}

impl Task {
    /// Validates a task from the text of its `task.toml`, asking `folder` what is on disk
    /// (`harness_store::task_folder` loads a task from its folder).
    pub fn parse(folder: &dyn TaskFolder, toml_path: &Path, text: &str) -> Result<Task> {
        parse::task(folder, toml_path, text)
    }

    /// Whether a repository-relative path is one a patch may not touch.
    pub fn is_protected(&self, path: &str) -> bool {
        self.protected_set.iter().any(|r| r.is_match(path))
    }
}

/// Instance ids become path components and image names: keep them tame.
pub fn validate_instance_id(id: &str) -> std::result::Result<(), String> {
    if id.is_empty() || id.len() > 128 {
        return Err(format!("{id:?} must be 1 to 128 characters"));
    }
    if id.starts_with('.') || id.starts_with('-') {
        return Err(format!("{id:?} must not start with '.' or '-'"));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "{id:?} may hold only letters, digits, '-', '_' and '.'"
        ));
    }
    Ok(())
}

fn nonempty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn duration(
    value: Option<f64>,
    default_s: f64,
    field: &str,
    field_err: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Duration> {
    let s = value.unwrap_or(default_s);
    if !(s.is_finite() && s > 0.0 && s <= 7.0 * 86400.0) {
        return Err(field_err(
            field,
            format!("{s} is not a number of seconds above 0"),
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

/// "512m", "2g", "1.5GiB", "1073741824" → bytes.
pub fn parse_memory(text: &str) -> std::result::Result<i64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size like \"512m\" or \"2g\""))?;
    let mult: f64 = match unit.trim() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use k, m or g)")),
    };
    let bytes = n * mult;
    if bytes < 6.0 * 1024.0 * 1024.0 {
        return Err(format!("{text:?} is below Docker's minimum of 6m"));
    }
    Ok(bytes as i64)
}
