//! The stages of reading a task.toml into a [`Task`]: each takes its part of the file as
//! written and returns it checked, or an error naming the file and the field.

use std::path::Path;

use anyhow::{Result, anyhow};

use super::raw::*;
use super::untrusted::{check_revision, check_url};
use super::*;

/// Makes the error of one field: `<file>: field `<field>`: <why>`.
pub(super) type FieldErr = dyn Fn(&str, String) -> anyhow::Error;

/// The whole file, stage by stage.
pub(super) fn task(folder: &dyn TaskFolder, toml_path: &Path, text: &str) -> Result<Task> {
    let dir = folder.dir();
    let file = toml_path.display().to_string();
    let raw: RawTask = toml::from_str(text).map_err(|e| {
        // toml's message already holds the line, a caret and the field; prefix the file.
        anyhow!("{file}: {}", e.to_string().trim_end())
    })?;
    let field_err = move |field: &str, msg: String| anyhow!("{file}: field `{field}`: {msg}");
    let field_err: &FieldErr = &field_err;
    let id = instance_id(dir, raw.instance_id, field_err)?;
    let source = source(folder, raw.source, field_err)?;
    let human = human(folder, raw.human, &source, field_err)?;
    let image = image(
        folder,
        raw.image,
        &source,
        &raw.install,
        &raw.test,
        field_err,
    )?;
    let env_pass = env_pass(raw.env, field_err)?;
    if raw.bench.is_empty() {
        return Err(field_err(
            "bench",
            "at least one [[bench]] is required".into(),
        ));
    }
    let mut benches: Vec<Bench> = Vec::with_capacity(raw.bench.len());
    for (i, b) in raw.bench.into_iter().enumerate() {
        benches.push(bench(i, b, &benches, field_err)?);
    }
    let measure_max_seconds = raw.measure.max_seconds.unwrap_or(DEFAULT_MEASURE_SECONDS);
    if !(measure_max_seconds.is_finite() && measure_max_seconds > 0.0) {
        return Err(field_err(
            "measure.max_seconds",
            format!("{measure_max_seconds} is not a number of seconds above 0"),
        ));
    }
    let resources = resources(raw.resources, field_err)?;
    let protected_set = protected(&raw.protected, field_err)?;
    let commits = commits(raw.commits, field_err)?;
    Ok(Task {
        commits,
        id,
        dir: dir.to_path_buf(),
        toml_path: toml_path.to_path_buf(),
        description: raw.description,
        source,
        human,
        base_image: image.base_image,
        setup: image.setup,
        image_files: image.files,
        env_pass,
        setup_timeout: image.setup_timeout,
        install: raw.install.commands,
        install_timeout: image.install_timeout,
        test_command: raw.test.command,
        test_timeout: image.test_timeout,
        benches,
        measure_max_seconds,
        replicas: match raw.measure.replicas {
            Some(0) => return Err(field_err("measure.replicas", "must be at least 1".into())),
            r => r,
        },
        repetitions: match raw.measure.repetitions {
            Some(0) => {
                return Err(field_err(
                    "measure.repetitions",
                    "must be at least 1".into(),
                ));
            }
            r => r,
        },
        resources,
        protected: raw.protected,
        protected_set,
    })
}

fn instance_id(dir: &Path, given: Option<String>, field_err: &FieldErr) -> Result<String> {
    let folder_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = match given {
        Some(id) => {
            if id != folder_name {
                return Err(field_err(
                    "instance_id",
                    format!("is {id:?} but the task folder is {folder_name:?}; they must match"),
                ));
            }
            id
        }
        None => folder_name,
    };
    validate_instance_id(&id).map_err(|m| field_err("instance_id", m))?;

    Ok(id)
}

fn source(dir: &dyn TaskFolder, raw: RawSource, field_err: &FieldErr) -> Result<Source> {
    if let Some(image) = raw.image {
        if raw.path.is_some() || raw.git.is_some() || raw.url.is_some() || raw.base_commit.is_some()
        {
            return Err(field_err(
                "source.image",
                "takes no path, git, url or base_commit: base is the image's /testbed".into(),
            ));
        }
        let image = nonempty(&image).ok_or_else(|| field_err("source.image", "is empty".into()))?;
        return Ok(Source::Image { image });
    }
    Ok(match (raw.path, raw.git, raw.url, raw.base_commit) {
        (Some(p), None, None, None) => {
            let path = dir.inside(&p).map_err(|m| field_err("source.path", m))?;
            if dir.kind(&path) != PathKind::Dir {
                return Err(field_err(
                    "source.path",
                    format!("{} is not a folder", path.display()),
                ));
            }
            Source::Folder(path)
        }
        (None, Some(g), None, Some(commit)) => {
            let repo = dir.inside(&g).map_err(|m| field_err("source.git", m))?;
            if dir.kind(&repo) == PathKind::Missing {
                return Err(field_err(
                    "source.git",
                    format!("{} does not exist", repo.display()),
                ));
            }
            Source::Git {
                repo,
                base_commit: revision(&commit, "source.base_commit", field_err)?,
            }
        }
        (None, None, Some(url), Some(commit)) => {
            check_url(&url).map_err(|m| field_err("source.url", m))?;
            Source::Url {
                url,
                base_commit: revision(&commit, "source.base_commit", field_err)?,
            }
        }
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
    })
}

/// A non-empty revision that git can only read as a revision.
fn revision(given: &str, field: &str, field_err: &FieldErr) -> Result<String> {
    let rev = nonempty(given).ok_or_else(|| field_err(field, "is empty".into()))?;
    check_revision(&rev).map_err(|m| field_err(field, m))?;
    Ok(rev)
}

fn human(
    dir: &dyn TaskFolder,
    raw: RawHuman,
    source: &Source,
    field_err: &FieldErr,
) -> Result<HumanRef> {
    let patch_file = |p: &str| -> Result<PathBuf> {
        let path = dir.inside(p).map_err(|m| field_err("human.patch", m))?;
        if dir.kind(&path) != PathKind::File {
            return Err(field_err(
                "human.patch",
                format!("{} is not a file", path.display()),
            ));
        }
        Ok(path)
    };
    if let Source::Image { .. } = source
        && let Some(c) = &raw.commit
    {
        let commit = object_name(c).map_err(|m| field_err("human.commit", m))?;
        let patch = raw.patch.as_deref().map(patch_file).transpose()?;
        return Ok(HumanRef::ImageCommit { commit, patch });
    }
    Ok(match (raw.patch, raw.commit) {
        (Some(p), None) => HumanRef::Patch(patch_file(&p)?),
        (None, Some(c)) => {
            if matches!(source, Source::Folder(_) | Source::Image { .. }) {
                return Err(field_err(
                    "human.commit",
                    "needs a git source (source.git, source.url or source.image); use human.patch with source.path".into(),
                ));
            }
            HumanRef::Commit(revision(&c, "human.commit", field_err)?)
        }
        _ => {
            return Err(field_err(
                "human",
                "give exactly one of `patch` (a file) or `commit` (both only with source.image: \
                 the commit where the image holds it, the patch where it does not)"
                    .into(),
            ));
        }
    })
}

/// A commit inside a prebuilt image is named by its object id: the image keeps no ref to it.
fn object_name(given: &str) -> std::result::Result<String, String> {
    let c = given.trim().to_ascii_lowercase();
    if (7..=64).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(c)
    } else {
        Err(format!(
            "{given:?} is not a commit's object id (7 to 64 hex digits): with source.image the \
             commit is looked up by id in the image, which keeps no ref to it"
        ))
    }
}

/// The image's and phases' settings.
struct Image {
    base_image: String,
    setup: Vec<String>,
    files: Vec<(String, std::path::PathBuf)>,
    setup_timeout: Duration,
    install_timeout: Duration,
    test_timeout: Duration,
}

fn image(
    dir: &dyn TaskFolder,
    raw: RawImage,
    source: &Source,
    install: &RawInstall,
    test: &RawTest,
    field_err: &FieldErr,
) -> Result<Image> {
    let base_image = match (source, raw.base) {
        (Source::Image { .. }, Some(_)) => {
            return Err(field_err(
                "image.base",
                "is the prebuilt image of source.image; give one of them".into(),
            ));
        }
        (Source::Image { image }, None) => image.clone(),
        (_, base) => base.unwrap_or_else(|| DEFAULT_BASE_IMAGE.to_string()),
    };
    let field = if matches!(source, Source::Image { .. }) {
        "source.image"
    } else {
        "image.base"
    };
    if base_image.trim().is_empty() {
        return Err(field_err(field, "is empty".into()));
    }
    // It is written into a Dockerfile's FROM line: an image reference and nothing more.
    let reference = base_image.len() <= 512
        && !base_image.starts_with('-')
        && base_image
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:@".contains(c));
    if !reference {
        return Err(field_err(
            field,
            format!("{base_image:?} is not an image reference (letters, digits and ._-/:@)"),
        ));
    }
    let files = image_files(dir, raw.files, field_err)?;
    let setup_timeout = duration(
        raw.setup_timeout,
        DEFAULT_SETUP_TIMEOUT_S,
        "image.setup_timeout",
        field_err,
    )?;
    let install_timeout = duration(
        install.timeout,
        DEFAULT_INSTALL_TIMEOUT_S,
        "install.timeout",
        field_err,
    )?;
    if test.command.trim().is_empty() {
        return Err(field_err("test.command", "is empty".into()));
    }
    let test_timeout = duration(
        test.timeout,
        DEFAULT_TEST_TIMEOUT_S,
        "test.timeout",
        field_err,
    )?;

    Ok(Image {
        base_image,
        setup: raw.setup,
        files,
        setup_timeout,
        install_timeout,
        test_timeout,
    })
}

/// `[image] files`: absolute paths outside the tree and the harness's folders, each from a
/// file of the task folder.
fn image_files(
    dir: &dyn TaskFolder,
    raw: std::collections::BTreeMap<String, String>,
    field_err: &FieldErr,
) -> Result<Vec<(String, std::path::PathBuf)>> {
    let mut out = Vec::new();
    for (target, from) in raw {
        let field = format!("image.files.{target:?}");
        let tame = target.starts_with('/')
            && !target.ends_with('/')
            && target
                .split('/')
                .skip(1)
                .all(|c| !c.is_empty() && c != "." && c != "..")
            && target
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/-_.".contains(c));
        if !tame {
            return Err(field_err(
                &field,
                "must be an absolute path of letters, digits, '-', '_', '.' (no '..')".into(),
            ));
        }
        let reserved = [
            WORKDIR,
            "/opt/harness",
            "/opt/harness-build",
            "/proc",
            "/sys",
            "/dev",
        ];
        if reserved
            .iter()
            .any(|r| target == *r || target.starts_with(&format!("{r}/")))
        {
            return Err(field_err(
                &field,
                format!("must not be under {}", reserved.join(", ")),
            ));
        }
        let path = dir.inside(&from).map_err(|m| field_err(&field, m))?;
        if dir.kind(&path) != PathKind::File {
            return Err(field_err(
                &field,
                format!("{} is not a file", path.display()),
            ));
        }
        out.push((target, path));
    }
    Ok(out)
}

/// `[env] pass`: variable names only.
fn env_pass(raw: RawEnv, field_err: &FieldErr) -> Result<Vec<String>> {
    for name in &raw.pass {
        let ok = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok || name.starts_with("HARNESS_") {
            return Err(field_err(
                "env.pass",
                format!(
                    "{name:?} is not a variable name a task may take (letters, digits, '_'; not HARNESS_*)"
                ),
            ));
        }
    }
    Ok(raw.pass)
}

/// One `[[bench]]`, the i-th; `before` are the ones already read (names must differ).
fn bench(i: usize, b: RawBench, before: &[Bench], field_err: &FieldErr) -> Result<Bench> {
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
    if before.iter().any(|x: &Bench| x.name == b.name) {
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
    let metric = metric(&b, &at, field_err)?;
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
    let metric_unit_s = match b.metric_unit.as_deref() {
        None => None,
        Some(_) if matches!(metric, Metric::Wall) || better == Better::Higher => {
            return Err(field_err(
                &at("metric_unit"),
                "is for an output metric that is a duration (better = \"lower\")".into(),
            ));
        }
        Some("s") => Some(1.0),
        Some("ms") => Some(1e-3),
        Some("us") => Some(1e-6),
        Some("ns") => Some(1e-9),
        Some(other) => {
            return Err(field_err(
                &at("metric_unit"),
                format!("{other:?} is not one of \"s\", \"ms\", \"us\", \"ns\""),
            ));
        }
    };
    for (j, p) in b.ignore_lines.iter().enumerate() {
        regex::Regex::new(p).map_err(|e| {
            field_err(
                &at(&format!("ignore_lines[{j}]")),
                format!("invalid regex: {e}"),
            )
        })?;
    }
    let output_check = output_check(&b, &at, field_err)?;
    Ok(Bench {
        name: b.name.clone(),
        command: b.command.clone(),
        warmups: b.warmups.unwrap_or(1),
        runs,
        max_runs,
        timeout: duration(
            b.timeout,
            DEFAULT_BENCH_TIMEOUT_S,
            &at("timeout"),
            field_err,
        )?,
        metric,
        better,
        metric_unit_s,
        output_check,
    })
}

fn metric(b: &RawBench, at: &dyn Fn(&str) -> String, field_err: &FieldErr) -> Result<Metric> {
    Ok(
        match (
            b.metric.as_deref().unwrap_or("wall"),
            b.pattern.clone(),
            b.json_key.clone(),
        ) {
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
        },
    )
}

fn output_check(
    b: &RawBench,
    at: &dyn Fn(&str) -> String,
    field_err: &FieldErr,
) -> Result<OutputCheck> {
    if b.equivalence.is_some() && (b.output_file.is_none() || b.check_output == Some(false)) {
        return Err(field_err(
            &at("equivalence"),
            "compares the bench's output_file with base's: it needs output_file (and the output check on)".into(),
        ));
    }
    Ok(
        match (
            b.check_output.unwrap_or(true),
            b.no_check_reason.clone(),
            b.output_file.clone(),
        ) {
            // The figure of an output metric is masked in the output compared (only
            // the number, not its line: a line a patch adds still differs).
            (true, None, None) => OutputCheck::Stdout {
                ignore: b.ignore_lines.clone(),
            },
            (true, None, Some(path)) => {
                if path.starts_with('/') || path.split('/').any(|c| c == ".." || c.is_empty()) {
                    return Err(field_err(
                        &at("output_file"),
                        format!("{path:?} must be a path inside the repository"),
                    ));
                }
                let equivalence = match b.equivalence.clone() {
                    Some(c) if c.trim().is_empty() => {
                        return Err(field_err(&at("equivalence"), "is empty".into()));
                    }
                    other => other,
                };
                OutputCheck::File { path, equivalence }
            }
            (false, Some(reason), None) if !reason.trim().is_empty() => OutputCheck::Off { reason },
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
        },
    )
}

fn resources(r: RawResources, field_err: &FieldErr) -> Result<Resources> {
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
    let disk_bytes = match r.disk.as_deref() {
        None => DEFAULT_DISK_BYTES,
        Some(d) => parse_memory(d).map_err(|e| field_err("resources.disk", e))?,
    };
    let resources = Resources {
        cpus,
        memory_bytes,
        pids,
        network: r.network.unwrap_or(false),
        gpus: r.gpus.unwrap_or(0),
        disk_bytes,
    };

    Ok(resources)
}

fn protected(globs: &[String], field_err: &FieldErr) -> Result<Vec<regex::Regex>> {
    let mut protected_set = Vec::new();
    for (i, g) in globs.iter().enumerate() {
        let re = crate::glob::glob_to_regex(g)
            .and_then(|re| regex::Regex::new(&re).map_err(|e| e.to_string()))
            .map_err(|e| field_err(&format!("protected[{i}]"), format!("invalid glob: {e}")))?;
        protected_set.push(re);
    }

    Ok(protected_set)
}

fn commits(raw: Option<RawCommits>, field_err: &FieldErr) -> Result<Option<StatedCommits>> {
    Ok(match raw {
        None => None,
        Some(c) => {
            for (what, v) in [("commits.base", &c.base), ("commits.human", &c.human)] {
                if let Some(v) = v
                    && (!(4..=64).contains(&v.len()) || !v.chars().all(|ch| ch.is_ascii_hexdigit()))
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
    })
}
