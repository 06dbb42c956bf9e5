//! The strict criterion against the real daemon: a verdict left undecided by a tiny budget
//! is decided when the budget grows, and the containers measured are pinned to the run's
//! exclusive cores (seen in their inspect data while the run measures).

mod common;

use std::process::{Command, Stdio};

use common::*;

const MEDIUM: &str = "def work(n):\n    total = 0\n    for i in range(n // 3):\n        total += sum([i * i])\n    return (n - 1) * n * (2 * n - 1) // 6\n";

fn dataset(root: &std::path::Path) -> std::path::PathBuf {
    let ds = root.join("ds");
    make_task(&ds, "budget", SLOW, FAST, "");
    // Long enough that the work, not the interpreter's start, is most of the figure (a
    // start-up-bound bench keeps larger container-to-container offsets).
    write(
        &ds.join("budget/repo/bench.py"),
        "import mod\nprint(mod.work(1500000))\n",
    );
    let p = root.join("p.jsonl");
    predictions(&p, &[("budget", Some(&diff("mod.py", SLOW, MEDIUM)))]);
    ds
}

fn opt_at_k(root: &std::path::Path, run_id: &str, extra: &[&str]) -> Command {
    let mut c = harness();
    c.args([
        "opt-at-k",
        "--model",
        "test-model",
        "--k",
        "1",
        "--json",
        "--run-id",
        run_id,
    ])
    .arg("--predictions")
    .arg(root.join("p.jsonl"))
    .arg("--dataset")
    .arg(root.join("ds"))
    .arg("--results-dir")
    .arg(root.join("out"))
    .args(extra);
    c
}

fn sample(root: &std::path::Path, run_id: &str) -> serde_json::Value {
    read_json(
        &root
            .join("out")
            .join(run_id)
            .join("test-model/budget/0/report.json"),
    )
}

#[test]
fn inconclusive_becomes_decided_when_the_budget_grows_and_benches_are_pinned() {
    if !docker_available("inconclusive_becomes_decided") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    dataset(tmp.path());

    // A budget of two rounds: too few for an interval (five at least), so no verdict.
    let out = run(&mut opt_at_k(
        tmp.path(),
        "small-budget",
        &["--min-rounds", "2", "--max-rounds", "2"],
    ));
    assert!(out.status.success());
    let s = sample(tmp.path(), "small-budget");
    assert_eq!(s["status"], "passed", "{s}");
    assert_eq!(s["inconclusive"], true, "{s}");
    assert_eq!(s["decision_base"], "undecided", "{s}");
    assert_eq!(s["opt_base"], false, "inconclusive counts as not optimised");
    let report = read_json(
        &tmp.path()
            .join("out/small-budget/test-model.small-budget.report.json"),
    );
    assert_eq!(
        report["harness"]["instance_sets"]["inconclusive_ids"],
        serde_json::json!(["budget"])
    );
    assert_eq!(report["harness"]["summary"]["inconclusive_samples"], 1);

    // The same sample with room for more rounds: decided (a 3x patch, slower than human).
    // Meanwhile, the containers being measured are pinned to the plan's cores.
    let mut child = opt_at_k(tmp.path(), "big-budget", &["--max-rounds", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut cpusets = std::collections::BTreeSet::new();
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        for id in containers_of_run("big-budget") {
            let out = Command::new("docker")
                .args(["inspect", "--format", "{{.HostConfig.CpusetCpus}}", &id])
                .output()
                .unwrap();
            let set = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !set.is_empty() {
                cpusets.insert(set);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let s = sample(tmp.path(), "big-budget");
    assert_eq!(s["inconclusive"], false, "{s}");
    assert_eq!(s["decision_base"], "yes", "{s}");
    assert_eq!(s["decision_commit"], "no", "{s}");
    let iv = &s["intervals"]["gm_speedup_patch_base"];
    assert!(iv["lo"].as_f64().unwrap() >= 1.2, "{iv}");

    let info = read_json(&tmp.path().join("out/big-budget/run.json"));
    let slots: Vec<String> = info["cpu_plan"]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert!(
        !cpusets.is_empty(),
        "saw no container while the run measured"
    );
    for set in &cpusets {
        assert!(
            slots.contains(set),
            "container pinned to {set}, plan {slots:?}"
        );
    }
    let bench = read_json(
        &tmp.path()
            .join("out/big-budget/test-model/budget/0/bench.json"),
    );
    assert!(slots.iter().any(|s| bench["schedule"]["cpuset"] == *s));
    assert!(containers_of_run("big-budget").is_empty());
    assert!(containers_of_run("small-budget").is_empty());
}

#[test]
fn reports_regenerate_identically_and_refuse_mixed_machines() {
    // `harness report` needs no Docker: it rewrites the reports from the saved results, byte
    // for byte the same.
    if !docker_available("same_seed_same_intervals") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    dataset(tmp.path());
    let out = run(&mut opt_at_k(
        tmp.path(),
        "seeded",
        &["--seed", "7", "--min-rounds", "5", "--max-rounds", "5"],
    ));
    assert!(out.status.success());
    let dir = tmp.path().join("out/seeded");
    let before = std::fs::read(dir.join("test-model.seeded.report.json")).unwrap();
    let rep = run(harness().arg("report").arg(&dir));
    assert!(rep.status.success());
    assert_eq!(
        before,
        std::fs::read(dir.join("test-model.seeded.report.json")).unwrap()
    );
    let s = sample(tmp.path(), "seeded");
    assert!(s["intervals"]["seed"].as_u64().is_some());
    let info = read_json(&dir.join("run.json"));
    assert_eq!(info["decision_rule"]["seed"], 7);
    assert_eq!(info["decision_rule"]["criterion"], "strict");

    // A sample measured on another machine is never mixed in silently: `report` refuses
    // it (unless asked), and repeating the run measures it again here.
    let path = dir.join("test-model/budget/0/report.json");
    let mut saved = read_json(&path);
    saved["fingerprint_id"] = serde_json::json!("0000elsewhere000");
    std::fs::write(&path, serde_json::to_string_pretty(&saved).unwrap()).unwrap();
    let rep = run(harness().arg("report").arg(&dir));
    assert_eq!(rep.status.code(), Some(1));
    let err = String::from_utf8_lossy(&rep.stderr);
    assert!(err.contains("budget/0 (0000elsewhere000)"), "{err}");
    let rep = run(harness()
        .arg("report")
        .arg("--allow-mixed-machines")
        .arg(&dir));
    assert!(rep.status.success());
    let again = run(&mut opt_at_k(
        tmp.path(),
        "seeded",
        &["--seed", "7", "--min-rounds", "5", "--max-rounds", "5"],
    ));
    assert!(again.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        summary["invocation"]["evaluated_samples"], 1,
        "measured again here"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("measured on another machine"));
    assert_eq!(
        sample(tmp.path(), "seeded")["fingerprint_id"],
        info["fingerprint_id"]
    );
}
