//! Tasks: the `task.toml` format, loaded once and validated into a [`Task`].
//!
//! Every error names the file and, where there is one, the field.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;

/// The image every task builds FROM unless it names another.
pub const DEFAULT_BASE_IMAGE: &str = "harness-base:bookworm";

/// Where the task's source lives inside every container.
pub const WORKDIR: &str = "/testbed";

const DEFAULT_INSTALL_TIMEOUT_S: f64 = 600.0;
const DEFAULT_TEST_TIMEOUT_S: f64 = 300.0;
const DEFAULT_BENCH_TIMEOUT_S: f64 = 300.0;
const DEFAULT_SETUP_TIMEOUT_S: f64 = 1800.0;
const DEFAULT_MEASURE_SECONDS: f64 = 900.0;

// ---- the file format, as written ------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    instance_id: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    protected: Vec<String>,
    source: RawSource,
    human: RawHuman,
    #[serde(default)]
    image: RawImage,
    #[serde(default)]
    install: RawInstall,
    test: RawTest,
    bench: Vec<RawBench>,
    #[serde(default)]
    measure: RawMeasure,
    #[serde(default)]
    resources: RawResources,
    commits: Option<RawCommits>,
}

/// The commits the task is known by, as `harness tasks` prints them: checked against the
/// task's content when they are used.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCommits {
    base: Option<String>,
    human: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMeasure {
    max_seconds: Option<f64>,
    replicas: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    path: Option<String>,
    git: Option<String>,
    url: Option<String>,
    base_commit: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHuman {
    patch: Option<String>,
    commit: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawImage {
    base: Option<String>,
    #[serde(default)]
    setup: Vec<String>,
    setup_timeout: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInstall {
    #[serde(default)]
    commands: Vec<String>,
    timeout: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    command: String,
    timeout: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBench {
    name: String,
    command: String,
    warmups: Option<u32>,
    runs: Option<u32>,
    max_runs: Option<u32>,
    timeout: Option<f64>,
    metric: Option<String>,
    pattern: Option<String>,
    json_key: Option<String>,
    better: Option<String>,
    check_output: Option<bool>,
    no_check_reason: Option<String>,
    output_file: Option<String>,
    #[serde(default)]
    ignore_lines: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResources {
    cpus: Option<f64>,
    memory: Option<String>,
    pids: Option<i64>,
    network: Option<bool>,
    gpus: Option<u32>,
}

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
}

/// The human reference optimisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HumanRef {
    /// A patch file against base.
    Patch(PathBuf),
    /// `opt_commit` in the git source.
    Commit(String),
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
    /// This file (repository-relative, written by the bench) must equal base's.
    File { path: String },
    /// Not checked, and why (the task says).
    Off { reason: String },
}

impl OutputCheck {
    pub fn describe(&self) -> String {
        match self {
            OutputCheck::Stdout { ignore } if ignore.is_empty() => "stdout".into(),
            OutputCheck::Stdout { ignore } => format!("stdout without {}", ignore.join(" | ")),
            OutputCheck::File { path } => format!("file {path}"),
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
    pub output_check: OutputCheck,
}

#[derive(Debug, Clone)]
pub struct Resources {
    pub cpus: f64,
    pub memory_bytes: i64,
    pub pids: i64,
    pub network: bool,
    pub gpus: u32,
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
    /// Loads and validates `<dir>/task.toml`.
    pub fn load(dir: &Path) -> Result<Task> {
        let toml_path = dir.join("task.toml");
        let text = std::fs::read_to_string(&toml_path)
            .with_context(|| format!("{}: cannot read", toml_path.display()))?;
        Task::parse(dir, &toml_path, &text)
    }

    /// Validates a task from the text of its `task.toml`.
    pub fn parse(dir: &Path, toml_path: &Path, text: &str) -> Result<Task> {
        let file = toml_path.display().to_string();
        let raw: RawTask = toml::from_str(text).map_err(|e| {
            // toml's message already holds the line, a caret and the field; prefix the file.
            anyhow!("{file}: {}", e.to_string().trim_end())
        })?;
        let field_err = |field: &str, msg: String| anyhow!("{file}: field `{field}`: {msg}");

        let folder_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let id = match raw.instance_id {
            Some(id) => {
                if id != folder_name {
                    return Err(field_err(
                        "instance_id",
                        format!(
                            "is {id:?} but the task folder is {folder_name:?}; they must match"
                        ),
                    ));
                }
                id
            }
            None => folder_name,
        };
        validate_instance_id(&id).map_err(|m| field_err("instance_id", m))?;

        let source = match (
            raw.source.path,
            raw.source.git,
            raw.source.url,
            raw.source.base_commit,
        ) {
            (Some(p), None, None, None) => {
                let path = dir.join(&p);
                if !path.is_dir() {
                    return Err(field_err(
                        "source.path",
                        format!("{} is not a folder", path.display()),
                    ));
                }
                Source::Folder(path)
            }
            (None, Some(g), None, Some(commit)) => {
                let repo = dir.join(&g);
                if !repo.exists() {
                    return Err(field_err(
                        "source.git",
                        format!("{} does not exist", repo.display()),
                    ));
                }
                Source::Git {
                    repo,
                    base_commit: nonempty(&commit)
                        .ok_or_else(|| field_err("source.base_commit", "is empty".into()))?,
                }
            }
            (None, None, Some(url), Some(commit)) => Source::Url {
                url,
                base_commit: nonempty(&commit)
                    .ok_or_else(|| field_err("source.base_commit", "is empty".into()))?,
            },
            (None, Some(_), None, None) | (None, None, Some(_), None) => {
                return Err(field_err(
                    "source.base_commit",
                    "is required with source.git or source.url".into(),
                ));
            }
            (Some(_), _, _, _) | (None, Some(_), Some(_), _) => {
                return Err(field_err(
                    "source",
                    "give exactly one of `path`, `git` or `url` (path takes no base_commit)".into(),
                ));
            }
            (None, None, None, _) => {
                return Err(field_err(
                    "source",
                    "missing: give `path` (a folder), `git` (+ base_commit) or `url` (+ base_commit)"
                        .into(),
                ));
            }
        };

        let human = match (raw.human.patch, raw.human.commit) {
            (Some(p), None) => {
                let path = dir.join(&p);
                if !path.is_file() {
                    return Err(field_err(
                        "human.patch",
                        format!("{} is not a file", path.display()),
                    ));
                }
                HumanRef::Patch(path)
            }
            (None, Some(c)) => {
                if matches!(source, Source::Folder(_)) {
                    return Err(field_err(
                        "human.commit",
                        "needs a git source (source.git or source.url); use human.patch with source.path".into(),
                    ));
                }
                HumanRef::Commit(
                    nonempty(&c).ok_or_else(|| field_err("human.commit", "is empty".into()))?,
                )
            }
            _ => {
                return Err(field_err(
                    "human",
                    "give exactly one of `patch` (a file) or `commit`".into(),
                ));
            }
        };

        let base_image = raw
            .image
            .base
            .unwrap_or_else(|| DEFAULT_BASE_IMAGE.to_string());
        if base_image.trim().is_empty() {
            return Err(field_err("image.base", "is empty".into()));
        }
        let setup_timeout = duration(
            raw.image.setup_timeout,
            DEFAULT_SETUP_TIMEOUT_S,
            "image.setup_timeout",
            &field_err,
        )?;
        let install_timeout = duration(
            raw.install.timeout,
            DEFAULT_INSTALL_TIMEOUT_S,
            "install.timeout",
            &field_err,
        )?;
        if raw.test.command.trim().is_empty() {
            return Err(field_err("test.command", "is empty".into()));
        }
        let test_timeout = duration(
            raw.test.timeout,
            DEFAULT_TEST_TIMEOUT_S,
            "test.timeout",
            &field_err,
        )?;

        if raw.bench.is_empty() {
            return Err(field_err(
                "bench",
                "at least one [[bench]] is required".into(),
            ));
        }
        let mut benches = Vec::with_capacity(raw.bench.len());
        for (i, b) in raw.bench.into_iter().enumerate() {
            let at = |f: &str| format!("bench[{i}].{f}");
            if b.name.trim().is_empty()
                || !b
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(field_err(
                    &at("name"),
                    format!(
                        "{:?} must be non-empty letters, digits, '-', '_' or '.'",
                        b.name
                    ),
                ));
            }
            if benches.iter().any(|x: &Bench| x.name == b.name) {
                return Err(field_err(
                    &at("name"),
                    format!("{:?} is used twice", b.name),
                ));
            }
            if b.command.trim().is_empty() {
                return Err(field_err(&at("command"), "is empty".into()));
            }
            let runs = b.runs.unwrap_or(5);
            if runs == 0 {
                return Err(field_err(&at("runs"), "must be at least 1".into()));
            }
            let max_runs = b.max_runs.unwrap_or(runs.saturating_mul(3));
            if max_runs < runs {
                return Err(field_err(
                    &at("max_runs"),
                    format!("{max_runs} is below runs ({runs})"),
                ));
            }
            let metric = match (b.metric.as_deref().unwrap_or("wall"), b.pattern, b.json_key) {
                ("wall", None, None) => Metric::Wall,
                ("output", Some(p), None) => {
                    let re = regex::Regex::new(&p)
                        .map_err(|e| field_err(&at("pattern"), format!("invalid regex: {e}")))?;
                    if re.captures_len() < 2 {
                        return Err(field_err(
                            &at("pattern"),
                            "needs a capture group around the number, e.g. \"Execution time: ([0-9.eE+-]+)s\"".into(),
                        ));
                    }
                    Metric::Pattern(re)
                }
                ("output", None, Some(k)) => Metric::JsonKey(k),
                ("output", _, _) => {
                    return Err(field_err(
                        &at("metric"),
                        "\"output\" needs exactly one of `pattern` or `json_key`".into(),
                    ));
                }
                ("wall", _, _) => {
                    return Err(field_err(
                        &at("metric"),
                        "`pattern`/`json_key` need metric = \"output\"".into(),
                    ));
                }
                (other, _, _) => {
                    return Err(field_err(
                        &at("metric"),
                        format!("{other:?} is not one of \"wall\", \"output\""),
                    ));
                }
            };
            let better = match b.better.as_deref().unwrap_or("lower") {
                "lower" => Better::Lower,
                "higher" => Better::Higher,
                other => {
                    return Err(field_err(
                        &at("better"),
                        format!("{other:?} is not one of \"lower\", \"higher\""),
                    ));
                }
            };
            if matches!(metric, Metric::Wall) && better == Better::Higher {
                return Err(field_err(
                    &at("better"),
                    "wall time is always lower-is-better".into(),
                ));
            }
            for (j, p) in b.ignore_lines.iter().enumerate() {
                regex::Regex::new(p).map_err(|e| {
                    field_err(
                        &at(&format!("ignore_lines[{j}]")),
                        format!("invalid regex: {e}"),
                    )
                })?;
            }
            let output_check = match (
                b.check_output.unwrap_or(true),
                b.no_check_reason,
                b.output_file,
            ) {
                (true, None, None) => {
                    let mut ignore = b.ignore_lines;
                    if let Metric::Pattern(re) = &metric {
                        ignore.push(re.as_str().to_string());
                    }
                    OutputCheck::Stdout { ignore }
                }
                (true, None, Some(path)) => {
                    if path.starts_with('/') || path.split('/').any(|c| c == ".." || c.is_empty()) {
                        return Err(field_err(
                            &at("output_file"),
                            format!("{path:?} must be a path inside the repository"),
                        ));
                    }
                    OutputCheck::File { path }
                }
                (false, Some(reason), None) if !reason.trim().is_empty() => {
                    OutputCheck::Off { reason }
                }
                (false, _, Some(_)) => {
                    return Err(field_err(
                        &at("output_file"),
                        "has no use with check_output = false".into(),
                    ));
                }
                (false, _, None) => {
                    return Err(field_err(
                        &at("no_check_reason"),
                        "check_output = false needs a reason: without the check, a patch that makes the bench skip its work or print a remembered answer is timed as if it did the work".into(),
                    ));
                }
                (true, Some(_), _) => {
                    return Err(field_err(
                        &at("no_check_reason"),
                        "is only for check_output = false".into(),
                    ));
                }
            };
            benches.push(Bench {
                name: b.name,
                command: b.command,
                warmups: b.warmups.unwrap_or(1),
                runs,
                max_runs,
                timeout: duration(
                    b.timeout,
                    DEFAULT_BENCH_TIMEOUT_S,
                    &at("timeout"),
                    &field_err,
                )?,
                metric,
                better,
                output_check,
            });
        }

        let measure_max_seconds = raw.measure.max_seconds.unwrap_or(DEFAULT_MEASURE_SECONDS);
        if !(measure_max_seconds.is_finite() && measure_max_seconds > 0.0) {
            return Err(field_err(
                "measure.max_seconds",
                format!("{measure_max_seconds} is not a number of seconds above 0"),
            ));
        }
        let r = raw.resources;
        let cpus = r.cpus.unwrap_or(1.0);
        if !(cpus.is_finite() && cpus > 0.0 && cpus <= 1024.0) {
            return Err(field_err(
                "resources.cpus",
                format!("{cpus} is not a positive number"),
            ));
        }
        let memory_bytes = match r.memory.as_deref() {
            None => 2 << 30,
            Some(m) => parse_memory(m).map_err(|e| field_err("resources.memory", e))?,
        };
        let pids = r.pids.unwrap_or(1024);
        if pids < 16 {
            return Err(field_err("resources.pids", format!("{pids} is below 16")));
        }
        let resources = Resources {
            cpus,
            memory_bytes,
            pids,
            network: r.network.unwrap_or(false),
            gpus: r.gpus.unwrap_or(0),
        };

        let mut protected_set = Vec::new();
        for (i, g) in raw.protected.iter().enumerate() {
            let re = crate::protect::glob_to_regex(g)
                .and_then(|re| regex::Regex::new(&re).map_err(|e| e.to_string()))
                .map_err(|e| field_err(&format!("protected[{i}]"), format!("invalid glob: {e}")))?;
            protected_set.push(re);
        }

        let commits = match raw.commits {
            None => None,
            Some(c) => {
                for (what, v) in [("commits.base", &c.base), ("commits.human", &c.human)] {
                    if let Some(v) = v
                        && (!(4..=64).contains(&v.len())
                            || !v.chars().all(|ch| ch.is_ascii_hexdigit()))
                    {
                        return Err(field_err(
                            what,
                            "must be a commit hash (4 to 64 hex digits)".into(),
                        ));
                    }
                }
                Some(StatedCommits {
                    base: c.base.map(|b| b.to_ascii_lowercase()),
                    human: c.human.map(|h| h.to_ascii_lowercase()),
                })
            }
        };

        Ok(Task {
            commits,
            id,
            dir: dir.to_path_buf(),
            toml_path: toml_path.to_path_buf(),
            description: raw.description,
            source,
            human,
            base_image,
            setup: raw.image.setup,
            setup_timeout,
            install: raw.install.commands,
            install_timeout,
            test_command: raw.test.command,
            test_timeout,
            benches,
            measure_max_seconds,
            replicas: match raw.measure.replicas {
                Some(0) => return Err(field_err("measure.replicas", "must be at least 1".into())),
                r => r,
            },
            resources,
            protected: raw.protected,
            protected_set,
        })
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

/// Loads a task folder's toml and refuses unknown layouts with a message naming the folder.
pub fn require_task_dir(dir: &Path) -> Result<()> {
    if !dir.join("task.toml").is_file() {
        bail!(
            "{}: not a task folder (no task.toml); folders whose name starts with '_' or '.' are skipped",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
description = "demo"
protected = ["bench.py", "tests/**"]
[source]
path = "repo"
[human]
patch = "human.patch"
[test]
command = "python3 test.py"
[[bench]]
name = "b1"
command = "python3 bench.py"
"#;

    fn task_dir() -> tempfile::TempDir {
        let d = tempfile::Builder::new().prefix("t").tempdir().unwrap();
        std::fs::create_dir(d.path().join("repo")).unwrap();
        std::fs::write(d.path().join("human.patch"), "").unwrap();
        d
    }

    fn parse(dir: &Path, text: &str) -> Result<Task> {
        Task::parse(dir, &dir.join("task.toml"), text)
    }

    #[test]
    fn good_task_gets_defaults() {
        let d = task_dir();
        let t = parse(d.path(), GOOD).unwrap();
        assert_eq!(t.base_image, DEFAULT_BASE_IMAGE);
        assert_eq!(t.benches[0].runs, 5);
        assert_eq!(t.benches[0].warmups, 1);
        assert!(!t.resources.network);
        assert!(t.is_protected("bench.py"));
        assert!(t.is_protected("tests/a/b.py"));
        assert!(!t.is_protected("mod.py"));
    }

    #[test]
    fn missing_field_names_file_and_field() {
        let d = task_dir();
        let text = GOOD.replace("[test]\ncommand = \"python3 test.py\"\n", "");
        let err = parse(d.path(), &text).unwrap_err().to_string();
        assert!(err.contains("task.toml"), "{err}");
        assert!(err.contains("missing field `test`"), "{err}");
    }

    #[test]
    fn unknown_field_is_an_error_with_line() {
        let d = task_dir();
        let text = GOOD.replace("[[bench]]\n", "[[bench]]\nrnus = 3\n");
        let err = parse(d.path(), &text).unwrap_err().to_string();
        assert!(err.contains("rnus"), "{err}");
        assert!(err.contains("line 11"), "{err}");
    }

    #[test]
    fn bad_values_name_the_field() {
        let d = task_dir();
        for (from, to, field) in [
            ("name = \"b1\"", "name = \"b 1\"", "bench[0].name"),
            ("[[bench]]\n", "[[bench]]\nruns = 0\n", "bench[0].runs"),
            ("path = \"repo\"", "path = \"nope\"", "source.path"),
            (
                "patch = \"human.patch\"",
                "patch = \"x.patch\"",
                "human.patch",
            ),
            (
                "patch = \"human.patch\"",
                "commit = \"abc\"",
                "human.commit",
            ),
            (
                "[[bench]]\n",
                "[[bench]]\nmetric = \"output\"\n",
                "bench[0].metric",
            ),
        ] {
            let err = parse(d.path(), &GOOD.replace(from, to))
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("field `{field}`")), "{field}: {err}");
        }
        let err = parse(
            d.path(),
            &format!("{GOOD}\n[resources]\nmemory = \"lots\"\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("resources.memory"), "{err}");
    }

    #[test]
    fn bench_output_is_checked_unless_the_task_says_why_not() {
        let d = task_dir();
        let t = parse(d.path(), GOOD).unwrap();
        assert_eq!(
            t.benches[0].output_check,
            OutputCheck::Stdout { ignore: vec![] },
            "on by default"
        );
        let off = GOOD.replace("[[bench]]\n", "[[bench]]\ncheck_output = false\n");
        let err = parse(d.path(), &off).unwrap_err().to_string();
        assert!(err.contains("bench[0].no_check_reason"), "{err}");
        let off = GOOD.replace(
            "[[bench]]\n",
            "[[bench]]\ncheck_output = false\nno_check_reason = \"prints a timestamp\"\n",
        );
        assert_eq!(
            parse(d.path(), &off).unwrap().benches[0].output_check,
            OutputCheck::Off {
                reason: "prints a timestamp".into()
            }
        );
        let file = GOOD.replace("[[bench]]\n", "[[bench]]\noutput_file = \"out/r.txt\"\n");
        assert_eq!(
            parse(d.path(), &file).unwrap().benches[0].output_check,
            OutputCheck::File {
                path: "out/r.txt".into()
            }
        );
        let escape = GOOD.replace("[[bench]]\n", "[[bench]]\noutput_file = \"../r.txt\"\n");
        assert!(
            parse(d.path(), &escape)
                .unwrap_err()
                .to_string()
                .contains("bench[0].output_file")
        );
        // The figure an output metric prints is never part of the answer compared.
        let metric = GOOD.replace(
            "[[bench]]\n",
            "[[bench]]\nmetric = \"output\"\npattern = \"took ([0-9.]+)s\"\nignore_lines = [\"^date:\"]\n",
        );
        assert_eq!(
            parse(d.path(), &metric).unwrap().benches[0].output_check,
            OutputCheck::Stdout {
                ignore: vec!["^date:".into(), "took ([0-9.]+)s".into()]
            }
        );
        let bad = GOOD.replace("[[bench]]\n", "[[bench]]\nignore_lines = [\"(\"]\n");
        assert!(
            parse(d.path(), &bad)
                .unwrap_err()
                .to_string()
                .contains("bench[0].ignore_lines[0]")
        );
    }

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory("512m").unwrap(), 512 << 20);
        assert_eq!(parse_memory("2g").unwrap(), 2 << 30);
        assert_eq!(parse_memory("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_memory("1k").is_err());
        assert!(parse_memory("12x").is_err());
    }

    #[test]
    fn output_metric_needs_a_group() {
        let d = task_dir();
        let text = GOOD.replace(
            "[[bench]]\n",
            "[[bench]]\nmetric = \"output\"\npattern = \"time: [0-9.]+\"\n",
        );
        let err = parse(d.path(), &text).unwrap_err().to_string();
        assert!(err.contains("capture group"), "{err}");
    }
}
