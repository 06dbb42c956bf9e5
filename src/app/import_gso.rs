//! `harness tasks import-gso ROWS --out DIR`: GSO's dataset rows (gso-bench/gso's
//! `GSOInstance`: instance_id, repo, base_commit, opt_commit, api, prob_script, tests,
//! setup_commands, install_commands, gt_diff, arch, instance_image_tag, ...) as task folders.
//!
//! Each task runs on GSO's prebuilt instance image (`gso.eval.<arch>.<id lower>:<tag>`) as it
//! is (`source.image`), timed by each test itself (`Execution time: X s`). GSO checks a
//! result inside the test's own process against base's reference (`--eqcheck`), which puts
//! base's answer within the code's reach; here every run of a test stores its result
//! (GSO's `--reference`, in the run's own layer), and where it differs from base's result
//! of the same round, the test's own `load_result` and `check_equivalence` (GSO's
//! tolerances) compare the two in base's container, on base's code (`/gso_check.py`, the
//! bench's `equivalence`). No reference result is in any container.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Where imports before the equivalence check wrote base's reference results in the task
/// image (a task folder imported then still does; an agent's container never shows it).
pub const REFERENCE_DIR: &str = "/opt/gso-reference";
/// Where a run of a test stores its result, in the tree (the run's own layer).
const RESULT_DIR: &str = ".gso-result";
/// GSO's check of one result against base's, outside the code under test (in the task image).
pub const CHECK_SCRIPT: &str = "/gso_check.py";

/// The program behind `CHECK_SCRIPT`: the test's own `load_result` and `check_equivalence`,
/// on the two stored results the harness hands it (base's first, as GSO's reference).
pub const CHECK_PROGRAM: &str = include_str!("gso_check.py");
/// GSO's timing line, as its `parse_times` reads it.
pub const TIME_PATTERN: &str = r"Execution time:\s+([\d\.]+)s";
/// GSO's runs of each test per variant (`evalscript.py`'s `MAX_ITERS`): one for its
/// heaviest repositories, five for the others.
fn gso_runs(repo: &str) -> u32 {
    match repo {
        "abetlen/llama-cpp-python" | "microsoft/onnxruntime" | "huggingface/tokenizers" => 1,
        _ => 5,
    }
}

/// GSO's limit on one run of a test (`MAX_TIME`, seconds): none (`timeout 0s`) for
/// llama-cpp-python and tokenizers, 300 for the others; "none" is an hour here, GSO's
/// default limit on a whole evaluation.
fn gso_run_limit(repo: &str) -> i64 {
    match repo {
        "abetlen/llama-cpp-python" | "huggingface/tokenizers" => 3600,
        _ => 300,
    }
}

/// What `import-gso` is asked.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub rows: PathBuf,
    pub out: PathBuf,
    /// The image name's prefix (GSO's: `gso.eval`).
    pub image_prefix: String,
    pub network: bool,
    pub cpus: f64,
    pub memory: String,
}

/// One row, the fields a task needs, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct GsoRow {
    pub instance_id: String,
    pub repo: String,
    pub api: String,
    pub tests: Vec<String>,
    pub install_commands: Vec<String>,
    pub gt_diff: String,
    /// GSO's `opt_commit` where it is an object id: the human reference where the image
    /// holds it (GSO checks it out), `gt_diff` where it does not.
    pub opt_commit: Option<String>,
    pub gt_commit_message: String,
    pub arch: String,
    pub instance_image_tag: String,
}

impl GsoRow {
    /// GSO's `instance_image_key`.
    pub fn image(&self, prefix: &str) -> String {
        format!(
            "{prefix}.{}.{}:{}",
            self.arch,
            self.instance_id.to_lowercase(),
            self.instance_image_tag
        )
    }
}

/// Rows of a Parquet file (the Hugging Face dataset's own format), as JSON objects.
fn parquet_rows(path: &Path) -> Result<Vec<(String, Value)>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = path.display().to_string();
    let f = std::fs::File::open(path).with_context(|| format!("{file}: cannot read"))?;
    let reader =
        SerializedFileReader::new(f).with_context(|| format!("{file}: not a Parquet file"))?;
    let rows = reader
        .get_row_iter(None)
        .with_context(|| format!("{file}: cannot read its rows"))?;
    rows.enumerate()
        .map(|(i, row)| {
            let row = row.with_context(|| format!("{file}: row {}: unreadable", i + 1))?;
            Ok((format!("{file}: row {}", i + 1), row.to_json_value()))
        })
        .collect()
}

/// Reads the rows: Parquet (`.parquet`), JSON Lines, or a JSON list of objects.
pub fn read_rows(path: &Path) -> Result<Vec<GsoRow>> {
    let file = path.display().to_string();
    let parquet = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
    let values = if parquet {
        parquet_rows(path)?
    } else {
        json_rows(path)?
    };
    if values.is_empty() {
        bail!("{file}: no rows");
    }
    let rows = values
        .iter()
        .map(|(at, v)| row(at, v))
        .collect::<Result<Vec<_>>>()?;
    let mut seen = BTreeMap::new();
    for (r, (at, _)) in rows.iter().zip(&values) {
        if let Some(first) = seen.insert(r.instance_id.clone(), at.clone()) {
            bail!(
                "{at}: instance_id {:?} again (first at {first})",
                r.instance_id
            );
        }
    }
    Ok(rows)
}

/// JSON Lines, or a JSON list of objects.
fn json_rows(path: &Path) -> Result<Vec<(String, Value)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let file = path.display().to_string();
    let mut values: Vec<(String, Value)> = Vec::new();
    if text.trim_start().starts_with('[') {
        let list: Vec<Value> =
            serde_json::from_str(&text).with_context(|| format!("{file}: not a JSON list"))?;
        for (i, v) in list.into_iter().enumerate() {
            values.push((format!("{file}: row {}", i + 1), v));
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line)
                .with_context(|| format!("{file}:{}: not JSON", i + 1))?;
            values.push((format!("{file}:{}", i + 1), v));
        }
    }
    Ok(values)
}

fn row(at: &str, v: &Value) -> Result<GsoRow> {
    let obj = v
        .as_object()
        .with_context(|| format!("{at}: not a JSON object"))?;
    let text = |field: &str, default: Option<&str>| -> Result<String> {
        match (obj.get(field), default) {
            (Some(Value::String(s)), _) => Ok(s.clone()),
            (None | Some(Value::Null), Some(d)) => Ok(d.to_string()),
            (None, None) => bail!("{at}: field `{field}` is missing"),
            (Some(other), _) => bail!("{at}: field `{field}` is {other}, not a string"),
        }
    };
    // A list of strings, or (as some exports write it) a JSON text of one.
    let list = |field: &str| -> Result<Vec<String>> {
        let value = match obj.get(field) {
            Some(Value::String(s)) => serde_json::from_str::<Value>(s)
                .ok()
                .filter(Value::is_array)
                .with_context(|| format!("{at}: field `{field}` is a string, not a list"))?,
            Some(v) => v.clone(),
            None => bail!("{at}: field `{field}` is missing"),
        };
        let items = value
            .as_array()
            .with_context(|| format!("{at}: field `{field}` is not a list"))?;
        items
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_str()
                    .map(str::to_string)
                    .with_context(|| format!("{at}: field `{field}[{i}]` is not a string"))
            })
            .collect()
    };
    let instance_id = text("instance_id", None)?;
    crate::core::task::validate_instance_id(&instance_id)
        .map_err(|e| anyhow::anyhow!("{at}: field `instance_id`: {e}"))?;
    let tests = list("tests")?;
    if tests.is_empty() {
        bail!("{at}: field `tests` is empty: GSO's tests are the benches");
    }
    let gt_diff = text("gt_diff", None)?;
    if gt_diff.trim().is_empty() {
        bail!("{at}: field `gt_diff` is empty: it is the human reference");
    }
    let tame = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    let arch = text("arch", Some("x86_64"))?;
    let tag = text("instance_image_tag", Some("latest"))?;
    if !tame(&arch) || !tame(&tag) {
        bail!(
            "{at}: fields `arch` {arch:?} and `instance_image_tag` {tag:?} must be image-name words"
        );
    }
    Ok(GsoRow {
        instance_id,
        repo: text("repo", Some(""))?,
        api: text("api", Some(""))?,
        tests,
        install_commands: list("install_commands")?,
        gt_diff,
        opt_commit: Some(text("opt_commit", Some(""))?.to_ascii_lowercase())
            .filter(|c| (7..=64).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit())),
        gt_commit_message: text("gt_commit_message", Some(""))?,
        arch,
        instance_image_tag: tag,
    })
}

/// What every GSO command starts with: the image's virtualenv, GSO's token fallback, and
/// GSO's Hugging Face setting.
const PRELUDE: &str = ". .venv/bin/activate && export HF_TOKEN=\"${HF_TOKEN:-${HF_READ_TOKEN:-}}\" HF_HUB_DISABLE_XET=1";

/// Where the install script is in the task image.
pub const INSTALL_SCRIPT: &str = "/gso_install.sh";

/// GSO runs as root; here the code under test runs as the sandbox user, so at the task
/// image's build (as root, before any code under test) GSO's environment is made reachable
/// to it: uv, which GSO's Dockerfile puts in /root/.local/bin, is copied beside the system's
/// programs, and the interpreters uv installed under /root/.local/share/uv (which the
/// image's virtualenv links to) are made readable. Nothing else of /root is opened.
const REACH_GSO_ENV: &str = "for b in uv uvx; do if [ -x /root/.local/bin/$b ]; then install -m 0755 /root/.local/bin/$b /usr/local/bin/$b; fi; done; \
if [ -d /root/.local/share/uv/python ]; then chmod o+x /root /root/.local /root/.local/share /root/.local/share/uv && chmod -R o+rX /root/.local/share/uv/python; fi";

/// GSO's install step (gsobench's `install_repo` in eval.sh): bash, `set -euo pipefail`,
/// its build constraint (`setuptools<82`, GSO's PR #23) and Hugging Face setting, then the
/// row's install_commands in order from /testbed. uv's cache is under /tmp, not the user's
/// home (GSO's is root's): what uv unpacks there (setuptools' `.pth`) is not a file any
/// interpreter of the run loads, and the home's `*.pth` are protected.
pub fn install_script(r: &GsoRow) -> String {
    let commands: Vec<&str> = r
        .install_commands
        .iter()
        .map(String::as_str)
        .filter(|c| c.trim() != "git clean -xfd")
        .collect();
    format!(
        "#!/bin/bash\n# GSO's install step for {}, as gsobench's eval.sh runs it.\nset -euo pipefail\n\
         echo 'setuptools<82' > /tmp/uv_build_constraints.txt\n\
         export UV_BUILD_CONSTRAINT=/tmp/uv_build_constraints.txt\n\
         export HF_HUB_DISABLE_XET=1\n\
         export UV_CACHE_DIR=/tmp/gso-uv-cache\n\
         cd /testbed\n{}\n",
        r.instance_id,
        commands.join("\n")
    )
}

/// One run of test `i`, its timing line to `output`, its result stored under `prefix`.
fn test_run(i: usize, output: &str, prefix: &str) -> String {
    format!("python /gso_test_{i}.py {output} --reference --file_prefix {prefix}")
}

/// A bench's command: the test once, its result moved to `{RESULT_DIR}/result` (whatever
/// suffix the test gave it; none written fails the run, never an empty comparison), its
/// timing line printed.
fn bench_command(i: usize) -> String {
    format!(
        "{PRELUDE} && mkdir -p {RESULT_DIR} && t=$(mktemp) && {} && set -- {RESULT_DIR}/gso_{i}_result* && \
         [ -f \"$1\" ] && mv \"$1\" {RESULT_DIR}/result && cat \"$t\" && rm -f \"$t\"",
        test_run(i, "\"$t\"", &format!("{RESULT_DIR}/gso_{i}"))
    )
}

/// The `[[bench]]` of test `i`: GSO's timing line, its stored result compared with base's.
fn bench(r: &GsoRow, i: usize) -> toml::Value {
    use toml::Value as T;
    let table = |pairs: Vec<(&str, T)>| {
        T::Table(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<toml::Table>(),
        )
    };
    table(vec![
        ("name", T::from(format!("gso_test_{i}"))),
        // The timing line goes to a file of its own, then to stdout: the bench's
        // stdout is a descriptor the timer hands it, not a file it may open again.
        ("command", T::from(bench_command(i))),
        ("runs", T::Integer(gso_runs(&r.repo).into())),
        ("timeout", T::Integer(gso_run_limit(&r.repo))),
        ("metric", T::from("output")),
        ("pattern", T::from(TIME_PATTERN)),
        ("metric_unit", T::from("s")),
        ("output_file", T::from(format!("{RESULT_DIR}/result"))),
        (
            "equivalence",
            T::from(format!(
                "{PRELUDE} && exec python {CHECK_SCRIPT} /gso_test_{i}.py"
            )),
        ),
    ])
}

/// The task.toml of one row. Built as a TOML document and written by the toml crate's
/// serializer: a row's text (a `repo` holding a newline, say) can only ever be the value it
/// is, never a key of the task.
pub fn task_toml(r: &GsoRow, o: &ImportOptions) -> Result<String> {
    use toml::{Table, Value as T};
    let strings = |items: &[String]| T::Array(items.iter().map(|s| T::from(s.as_str())).collect());
    let table = |pairs: Vec<(&str, T)>| {
        T::Table(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<Table>(),
        )
    };
    let n = r.tests.len();
    // GSO's environment made reachable for the sandbox user; no reference is written.
    let setup = REACH_GSO_ENV.to_string();
    // The test phase runs every test once (its result stored in the run's /tmp): a test that
    // fails is the sample's; results are compared in the timed runs.
    let checks: Vec<String> = (0..n)
        .map(|i| test_run(i, "/dev/null", &format!("/tmp/gso_{i}")))
        .collect();
    // GSO's install step, as its eval.sh runs it: a bash script of install_commands
    // (GSO's `git clean -xfd` left out, as GSO does) under `set -euo pipefail`, with GSO's
    // build constraint and Hugging Face setting; root-owned and read-only in the image.
    let install = vec![format!("bash {INSTALL_SCRIPT}")];
    // GSO's tests, root-owned and read-only.
    let mut files: Table = (0..n)
        .map(|i| {
            (
                format!("/gso_test_{i}.py"),
                T::from(format!("gso_tests/test_{i}.py")),
            )
        })
        .collect();
    files.insert(INSTALL_SCRIPT.into(), T::from("gso_tests/install.sh"));
    files.insert(CHECK_SCRIPT.into(), T::from("gso_tests/check.py"));
    let benches: Vec<T> = (0..n).map(|i| bench(r, i)).collect();
    let doc = table(vec![
        ("instance_id", T::from(r.instance_id.as_str())),
        (
            "description",
            // Not the human commit's message: an agent's prompt holds the description, and
            // the message says what the fix is.
            T::from(format!("GSO {}: make {} faster", r.repo, r.api)),
        ),
        // GSO's prebuilt instance image, used as it is.
        (
            "source",
            table(vec![("image", T::from(r.image(&o.image_prefix)))]),
        ),
        ("human", {
            let mut human = vec![("patch", T::from("human.patch"))];
            if let Some(c) = &r.opt_commit {
                human.push(("commit", T::from(c.as_str())));
            }
            table(human)
        }),
        (
            "image",
            table(vec![
                ("setup", strings(&[setup])),
                ("setup_timeout", T::Integer(600 * n as i64)),
                ("files", T::Table(files)),
            ]),
        ),
        (
            "install",
            table(vec![
                ("commands", strings(&install)),
                ("timeout", T::Integer(3600)),
            ]),
        ),
        // Every test once.
        (
            "test",
            table(vec![
                (
                    "command",
                    T::from(format!("{PRELUDE} && {}", checks.join(" && "))),
                ),
                ("timeout", T::Integer(300 * n as i64)),
            ]),
        ),
        ("bench", T::Array(benches)),
        (
            "resources",
            table(vec![
                ("cpus", T::Float(o.cpus)),
                ("memory", T::from(o.memory.as_str())),
                // GSO's tests download their data.
                ("network", T::Boolean(o.network)),
            ]),
        ),
        // From the harness's environment at run time; redacted from logs.
        (
            "env",
            table(vec![(
                "pass",
                strings(&["HF_TOKEN".into(), "HF_READ_TOKEN".into()]),
            )]),
        ),
    ]);
    let body = toml::to_string_pretty(&doc)
        .with_context(|| format!("{}: cannot write its task.toml", r.instance_id))?;
    Ok(format!(
        "# Imported from GSO by `harness tasks import-gso` (GSO's base image, tests and gt_diff).\n{body}"
    ))
}

/// Writes one task folder per row; returns the folders. Each folder is written whole in a
/// temporary folder beside it and moved into place only once it loads as a task: a row
/// that fails leaves nothing behind (and an earlier import of it stays as it was).
pub fn import(o: &ImportOptions) -> Result<Vec<PathBuf>> {
    let rows = read_rows(&o.rows)?;
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("{}: cannot create", o.out.display()))?;
    let mut made = Vec::new();
    for r in &rows {
        let dir = o.out.join(&r.instance_id);
        let staging = tempfile::Builder::new()
            .prefix(".import-")
            .tempdir_in(&o.out)
            .with_context(|| format!("{}: cannot make a temporary folder", o.out.display()))?;
        let work = staging.path().join(&r.instance_id);
        write_task_folder(r, o, &work)?;
        // What was written must load as a task.
        crate::store::task_folder::load_task(&work)
            .with_context(|| format!("{}: the imported task does not load", dir.display()))?;
        replace_folder(&work, &dir, staging.path())?;
        made.push(dir);
    }
    Ok(made)
}

fn write_task_folder(r: &GsoRow, o: &ImportOptions, dir: &Path) -> Result<()> {
    let tests = dir.join("gso_tests");
    std::fs::create_dir_all(&tests)
        .with_context(|| format!("{}: cannot create", tests.display()))?;
    for (i, test) in r.tests.iter().enumerate() {
        crate::store::run_folder::write_atomic(
            &tests.join(format!("test_{i}.py")),
            test.as_bytes(),
        )?;
    }
    let mut patch = r.gt_diff.clone();
    if !patch.ends_with('\n') {
        patch.push('\n');
    }
    crate::store::run_folder::write_atomic(&dir.join("human.patch"), patch.as_bytes())?;
    crate::store::run_folder::write_atomic(
        &tests.join("install.sh"),
        install_script(r).as_bytes(),
    )?;
    crate::store::run_folder::write_atomic(&tests.join("check.py"), CHECK_PROGRAM.as_bytes())?;
    crate::store::run_folder::write_atomic(&dir.join("task.toml"), task_toml(r, o)?.as_bytes())
}

/// Moves `new` to `dest`; an earlier `dest` goes into `trash` (removed with it).
fn replace_folder(new: &Path, dest: &Path, trash: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dest).is_ok() {
        std::fs::rename(dest, trash.join("previous"))
            .with_context(|| format!("{}: cannot replace", dest.display()))?;
    }
    std::fs::rename(new, dest)
        .with_context(|| format!("{}: cannot move into place", dest.display()))
}

pub fn command(o: ImportOptions) -> Result<i32> {
    let made = import(&o)?;
    for dir in &made {
        crate::outln!("{}", dir.display());
    }
    eprintln!(
        "imported {} GSO task(s) into {} (each needs its image, gso.eval.<arch>.<id>:<tag>, on this Docker engine)",
        made.len(),
        o.out.display()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &Path) -> ImportOptions {
        ImportOptions {
            rows: dir.join("rows.jsonl"),
            out: dir.join("out"),
            image_prefix: "gso.eval".into(),
            network: true,
            cpus: 2.0,
            memory: "8g".into(),
        }
    }

    #[test]
    fn parquet_rows_read_as_their_json_lines() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gso");
        let from_parquet = read_rows(&fixtures.join("rows.parquet")).unwrap();
        assert_eq!(
            from_parquet,
            read_rows(&fixtures.join("rows.jsonl")).unwrap()
        );
        assert_eq!(from_parquet[0].install_commands.len(), 3);
        let e = format!(
            "{:#}",
            read_rows(&fixtures.join("Dockerfile.parquet")).unwrap_err()
        );
        assert!(e.contains("Dockerfile.parquet: cannot read"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("rows.parquet");
        std::fs::write(&fake, "{\"instance_id\": \"x\"}\n").unwrap();
        let e = format!("{:#}", read_rows(&fake).unwrap_err());
        assert!(e.contains("rows.parquet: not a Parquet file"), "{e}");
    }

    #[test]
    fn rows_become_tasks_and_bad_rows_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(dir.path());
        let row = serde_json::json!({
            "instance_id": "Owner__Repo-abc123", "repo": "owner/repo", "base_commit": "a",
            "opt_commit": "b", "api": "f", "prob_script": "", "tests": ["print(1)", "print(2)"],
            "hints_text": "", "setup_commands": [], "created_at": "",
            "install_commands": ["source .venv/bin/activate", "uv pip install -e .", "git clean -xfd"],
            "gt_commit_message": "Faster f\n\nbody", "gt_diff": "diff --git a/x b/x\n",
            "arch": "x86_64", "instance_image_tag": "latest"
        });
        std::fs::write(&o.rows, format!("{row}\n")).unwrap();
        let made = import(&o).unwrap();
        let task = crate::store::task_folder::load_task(&made[0]).unwrap();
        assert_eq!(task.base_image, "gso.eval.x86_64.owner__repo-abc123:latest");
        // opt_commit "b" is no object id: the human is gt_diff alone.
        assert!(matches!(task.human, crate::core::task::HumanRef::Patch(_)));
        assert_eq!(task.benches.len(), 2);
        assert_eq!(task.install, vec!["bash /gso_install.sh"]);
        let script = std::fs::read_to_string(made[0].join("gso_tests/install.sh")).unwrap();
        assert!(
            script.contains("set -euo pipefail\n")
                && script.contains("export UV_BUILD_CONSTRAINT=/tmp/uv_build_constraints.txt\n")
                && script
                    .ends_with("cd /testbed\nsource .venv/bin/activate\nuv pip install -e .\n"),
            "{script}"
        );
        assert!(
            task.image_files
                .iter()
                .any(|(to, _)| to == "/gso_install.sh")
        );
        assert!(
            task.image_files
                .iter()
                .any(|(to, _)| to == "/gso_test_1.py")
        );
        // No reference result anywhere: every run stores its own, and base's container
        // compares a differing one with the test's own check.
        assert!(!task.setup[0].contains("gso-reference"), "{:?}", task.setup);
        assert!(task.setup[0].contains("/usr/local/bin/$b"));
        assert!(
            task.test_command
                .contains("/gso_test_0.py /dev/null --reference --file_prefix /tmp/gso_0")
                && !task.test_command.contains("--eqcheck")
        );
        assert!(task.image_files.iter().any(|(to, _)| to == CHECK_SCRIPT));
        let check = std::fs::read_to_string(made[0].join("gso_tests/check.py")).unwrap();
        assert!(check.contains("test.check_equivalence(reference, current())"));
        assert_eq!(
            task.benches[1].output_check,
            crate::core::task::OutputCheck::File {
                path: ".gso-result/result".into(),
                equivalence: Some(format!(
                    "{PRELUDE} && exec python /gso_check.py /gso_test_1.py"
                )),
            }
        );
        assert!(
            task.benches[1]
                .command
                .contains("--reference --file_prefix .gso-result/gso_1 ")
        );
        assert_eq!(task.env_pass, vec!["HF_TOKEN", "HF_READ_TOKEN"]);
        assert!(task.resources.network);
        assert_eq!(task.benches[0].runs, 5);
        // GSO's per-repository protocol: one run, and no limit but an hour, for tokenizers.
        let mut heavy = row.clone();
        heavy["repo"] = serde_json::json!("huggingface/tokenizers");
        // A real opt_commit: the human is the commit where the image holds it, gt_diff else.
        heavy["opt_commit"] = serde_json::json!("177FF8B5a2804bc3560c438bd71cbb266561feda");
        std::fs::write(&o.rows, format!("{heavy}\n")).unwrap();
        let task = crate::store::task_folder::load_task(&import(&o).unwrap()[0]).unwrap();
        assert_eq!(task.benches[0].runs, 1);
        assert_eq!(task.benches[0].timeout.as_secs(), 3600);
        let crate::core::task::HumanRef::ImageCommit { commit, patch } = &task.human else {
            panic!("{:?}", task.human);
        };
        assert_eq!(commit, "177ff8b5a2804bc3560c438bd71cbb266561feda");
        assert!(patch.as_ref().is_some_and(|p| p.ends_with("human.patch")));

        let mut bad = row.clone();
        bad["tests"] = serde_json::json!([1]);
        std::fs::write(&o.rows, format!("{row}\n{bad}\n")).unwrap();
        let e = format!("{:#}", read_rows(&o.rows).unwrap_err());
        assert!(
            e.contains("rows.jsonl:2: field `tests[0]` is not a string"),
            "{e}"
        );
        std::fs::write(&o.rows, format!("{row}\n{row}\n")).unwrap();
        let e = format!("{:#}", read_rows(&o.rows).unwrap_err());
        assert!(
            e.contains("rows.jsonl:2: instance_id \"Owner__Repo-abc123\" again"),
            "{e}"
        );
    }

    /// A row's text is only ever a value: a newline in `repo` (or anywhere) cannot add keys
    /// to the task, and a row that fails leaves no folder. (On 7b25252 a newline in `repo`
    /// put `[measure]` settings and protected paths into the imported task.toml as keys.)
    #[test]
    fn row_text_cannot_add_task_keys_and_a_failed_row_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(dir.path());
        let row = serde_json::json!({
            "instance_id": "Owner__Repo-inj", "repo": "owner/repo).\n[measure]\nmax_seconds = 1\nreplicas = 9\n#",
            "api": "f\nprotected = []", "tests": ["print(1)"], "install_commands": [],
            "gt_commit_message": "x\n[env]", "gt_diff": "diff --git a/x b/x\n",
            "arch": "x86_64", "instance_image_tag": "latest"
        });
        std::fs::write(&o.rows, format!("{row}\n")).unwrap();
        let made = import(&o).unwrap();
        let task = crate::store::task_folder::load_task(&made[0]).unwrap();
        assert_eq!(task.replicas, None, "no key came from the row");
        assert_eq!(task.measure_max_seconds, 900.0);
        assert!(task.description.contains("[measure]"));
        assert!(!task.description.contains("[env]"), "no commit message");

        let mut failing = row.clone();
        failing["instance_id"] = serde_json::json!("Owner__Repo-none");
        failing["tests"] = serde_json::json!([]);
        std::fs::write(&o.rows, format!("{failing}\n")).unwrap();
        assert!(import(&o).is_err());
        let left: Vec<_> = std::fs::read_dir(&o.out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["Owner__Repo-inj"], "nothing half-written");
    }
}
