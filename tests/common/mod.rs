//! Shared by the integration tests: the real Docker daemon, the real binary.
#![allow(dead_code)]

pub mod browser;
pub mod proxy;
pub mod standin;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// True when the daemon answers. Without it: a failure under CI, a skip (with a reason)
/// elsewhere.
pub fn docker_available(test: &str) -> bool {
    let ok = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("{test}: CI is set and no Docker daemon answers `docker info`");
        }
        eprintln!("skipping {test}: no Docker daemon answers (set CI=1 to make this a failure)");
    }
    ok
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn harness() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.current_dir(repo_root());
    c
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run harness");
    eprintln!(
        "--- {:?} exited {:?}\n--- stdout:\n{}\n--- stderr:\n{}",
        cmd,
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Containers of this harness labelled with a run id, in any state.
pub fn containers_of_run(run_id: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "-q",
            "--filter",
            "label=org.harness.managed=true",
            "--filter",
            &format!("label=org.harness.run={run_id}"),
        ])
        .output()
        .expect("docker ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// The figure of every repetition of one run of a bench.json (`reps`).
pub fn rep_figures(run: &serde_json::Value) -> Vec<f64> {
    run["reps"]
        .as_array()
        .map(|reps| reps.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default()
}

pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn write(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

/// A small task: `mod.py` with `work(n)`, a test, a bench. `module` is the base mod.py.
pub fn make_task(root: &Path, id: &str, module: &str, human_module: &str, extra_toml: &str) {
    let dir = root.join(id);
    write(&dir.join("repo/mod.py"), module);
    write(
        &dir.join("repo/test_mod.py"),
        "import mod\nassert mod.work(10) == sum(i * i for i in range(10)), mod.work(10)\nprint('ok')\n",
    );
    write(
        &dir.join("repo/bench.py"),
        "import mod\nprint(mod.work(200000))\n",
    );
    write(
        &dir.join("human.patch"),
        &diff("mod.py", module, human_module),
    );
    write(
        &dir.join("task.toml"),
        &format!(
            "protected = [\"bench.py\", \"test_*.py\"]\n{extra_toml}\n[source]\npath = \"repo\"\n[human]\npatch = \"human.patch\"\n[test]\ncommand = \"python3 test_mod.py\"\ntimeout = 60\n[[bench]]\nname = \"work\"\ncommand = \"python3 bench.py\"\nwarmups = 0\nruns = 2\ntimeout = 30\n[resources]\ncpus = 1\nmemory = \"256m\"\npids = 128\n"
        ),
    );
}

/// [`make_task`] asking for one GPU and naming a CUDA base image this machine does not have
/// (it must never be fetched or built here).
pub fn make_gpu_task(root: &Path, id: &str) {
    make_task(
        root,
        id,
        SLOW,
        FAST,
        "[image]\nbase = \"nvidia/cuda:12.4.1-runtime-ubuntu22.04\"\n",
    );
    let toml = root.join(id).join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace("pids = 128\n", "pids = 128\ngpus = 1\n"),
    )
    .unwrap();
}

/// A git-style diff replacing the whole of a one-file module.
pub fn diff(path: &str, old: &str, new: &str) -> String {
    let minus: String = old.lines().map(|l| format!("-{l}\n")).collect();
    let plus: String = new.lines().map(|l| format!("+{l}\n")).collect();
    format!(
        "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{} +1,{} @@\n{minus}{plus}",
        old.lines().count(),
        new.lines().count()
    )
}

pub const SLOW: &str = "def work(n):\n    total = 0\n    for i in range(n):\n        total += sum([i * i])\n    return total\n";
pub const FAST: &str = "def work(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n";

pub fn predictions(path: &Path, rows: &[(&str, Option<&str>)]) {
    let text: String = rows
        .iter()
        .map(|(id, patch)| {
            serde_json::json!({"instance_id": id, "model_name_or_path": "test-model", "model_patch": patch}).to_string() + "\n"
        })
        .collect();
    write(path, &text);
}

/// The child's stderr, a line at a time, drained on a thread (so the harness never writes
/// into a closed pipe) and echoed into the test's output.
pub fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::{BufRead, BufReader};
    let stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  | {line}");
            let _ = tx.send(line);
        }
    });
    rx
}

/// The lines up to and including the first that contains `what` (5 minutes at most).
pub fn wait_for(rx: &std::sync::mpsc::Receiver<String>, what: &str) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(300)) {
        let hit = line.contains(what);
        seen.push(line);
        if hit {
            return seen;
        }
    }
    panic!("never saw {what:?}: {seen:?}");
}

/// `opt-at-k` for model `test-model` on dataset `ds`, results under `out`.
pub fn test_model_run(
    ds: &Path,
    out: &Path,
    preds: &Path,
    run_id: &str,
    k: &str,
    extra: &[&str],
) -> std::process::Output {
    run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            k,
            "--run-id",
            run_id,
        ])
        .args(extra)
        .arg("--dataset")
        .arg(ds)
        .arg("--predictions")
        .arg(preds)
        .arg("--results-dir")
        .arg(out))
}

/// target/gso-venv's Python (gsobench and what its modules import), made by
/// scripts/make-gso-venv.sh the first time. None, with a one-line reason, when it cannot be
/// had and `CI` is not set.
pub fn gso_python(test: &str) -> Option<PathBuf> {
    static MADE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ready = *MADE.get_or_init(|| {
        let made = Command::new("bash")
            .arg(repo_root().join("scripts/make-gso-venv.sh"))
            .status();
        made.is_ok_and(|s| s.success())
    });
    if !ready {
        if std::env::var_os("CI").is_some() {
            panic!("{test}: CI is set and target/gso-venv (gsobench) could not be made");
        }
        eprintln!("skipping {test}: no target/gso-venv (scripts/make-gso-venv.sh needs PyPI)");
        return None;
    }
    Some(repo_root().join("target/gso-venv/bin/python"))
}

/// GSO's own code (gsobench) judging the run folder `dir`: tests/gso_judge.py.
pub fn gso_judge(test: &str, dir: &Path) -> Option<Output> {
    let python = gso_python(test)?;
    Some(run(Command::new(python)
        .args(["-W", "ignore"])
        .arg(repo_root().join("tests/gso_judge.py"))
        .arg(dir)))
}
