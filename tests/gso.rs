//! GSO's inputs as GSO users have them, against the real daemon: rollout files named
//! `<model>-run_i` evaluated as K samples of one model.

mod common;

use std::path::Path;

use common::*;

/// demo-agent's prediction of `id`, sample `sample`, renamed as GSO names a rollout.
fn rollout_row(id: &str, sample: u64, name: &str) -> String {
    let text =
        std::fs::read_to_string(repo_root().join("tasks/_predictions/demo-agent.jsonl")).unwrap();
    let mut row: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["instance_id"] == id && r["sample"] == sample)
        .unwrap();
    let m = row.as_object_mut().unwrap();
    m.remove("sample");
    m.insert("model_name_or_path".into(), serde_json::json!(name));
    row.to_string()
}

fn gso_reader(dir: &Path) {
    let out = run(std::process::Command::new("python3")
        .arg(repo_root().join("tests/gso_reader.py"))
        .arg(dir));
    assert_eq!(
        out.status.code(),
        Some(0),
        "GSO's reading of {}",
        dir.display()
    );
}

#[test]
fn gso_rollout_files_are_k_samples_of_one_model() {
    if !docker_available("gso_rollout_files") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, sample) in [(1, 0), (2, 1)] {
        let name = format!("demo-agent-run_{i}");
        let path = tmp.path().join(format!("{name}.jsonl"));
        write(&path, &rollout_row("primes-sieve", sample, &name));
        files.push(path);
    }
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "demo-agent",
            "--rollout-per-file",
            "--k",
            "2",
            "--instance-ids",
            "primes-sieve",
            "--run-id",
            "rollouts",
            "--json",
            "--predictions",
        ])
        .arg(&files[0])
        .arg("--predictions")
        .arg(&files[1])
        .arg("--results-dir")
        .arg(tmp.path().join("out")));
    assert_eq!(out.status.code(), Some(0));
    let dir = tmp.path().join("out/rollouts");
    for (sample, name) in [(0, "demo-agent-run_1"), (1, "demo-agent-run_2")] {
        let r = read_json(&dir.join(format!("demo-agent/primes-sieve/{sample}/report.json")));
        assert_eq!(r["status"], "passed", "{r}");
        assert_eq!(r["model"], "demo-agent");
        assert_eq!(r["model_name_or_path"], name);
        let rollout = read_json(&dir.join(format!("rollouts/{name}/{name}.rollouts.report.json")));
        assert_eq!(rollout["summary"]["total_predictions"], 1);
        assert_eq!(rollout["harness"]["rollout"], name);
    }
    let opt = read_json(&dir.join("demo-agent.opt@2.rollouts.report.json"));
    assert_eq!(opt["summary"]["k"], 2);
    // Sample 0 is the 10x sieve (opt_commit), sample 1 the 1.8x one (opt_base only).
    assert_eq!(
        opt["instance_sets"]["opt_commit_ids"],
        serde_json::json!(["primes-sieve"])
    );
    assert_eq!(
        opt["opt_stats"]["primes-sieve"]["report_file"],
        "rollouts/demo-agent-run_1/demo-agent-run_1.rollouts.report.json"
    );
    gso_reader(&dir);
}
