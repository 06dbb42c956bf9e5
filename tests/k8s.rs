//! `harness k8s manifest`: the Indexed Job and the merge Job it prints validate against the
//! Kubernetes API's own schema (strict: an unknown field fails) with PyPI's
//! kubernetes-validate, offline; no cluster runs here. `.ci/run` makes its virtualenv
//! (target/kv-venv) when missing.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

fn validator() -> Option<PathBuf> {
    let path = repo_root().join("target/kv-venv/bin/kubernetes-validate");
    if path.is_file() {
        return Some(path);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "CI is set and {} is missing (.ci/run makes it)",
            path.display()
        );
    }
    eprintln!(
        "skipping: no kubernetes-validate (python3 -m venv target/kv-venv && target/kv-venv/bin/pip install kubernetes-validate==1.37.0)"
    );
    None
}

fn manifest(extra: &[&str]) -> std::process::Output {
    run(harness()
        .args([
            "k8s",
            "manifest",
            "--parts",
            "3",
            "--image",
            "registry.example/harness:1",
        ])
        .args(["--claim", "harness-results"])
        .args(extra)
        .args(["--", "--model", "demo-agent", "--predictions"])
        .args(["tasks/_predictions/demo-agent.jsonl", "--k", "3"]))
}

#[test]
fn the_manifests_validate_against_the_kubernetes_schema() {
    let Some(validate) = validator() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for (name, extra) in [
        ("socket", vec![]),
        (
            "dind-gpu",
            vec![
                "--docker",
                "dind",
                "--gpus-per-pod",
                "1",
                "--namespace",
                "bench",
            ],
        ),
    ] {
        let out = manifest(&extra);
        assert_eq!(out.status.code(), Some(0));
        let yaml = String::from_utf8(out.stdout).unwrap();
        assert_eq!(yaml.matches("kind: Job").count(), 2, "{yaml}");
        assert!(yaml.contains("completionMode: Indexed"), "{yaml}");
        assert!(yaml.contains("JOB_COMPLETION_INDEX + 1))/3"), "{yaml}");
        let file = tmp.path().join(format!("{name}.yaml"));
        write(&file, &yaml);
        let check = Command::new(&validate)
            .args(["--strict", "-k", "1.30.0"])
            .arg(&file)
            .output()
            .expect("run kubernetes-validate");
        let said = String::from_utf8_lossy(&check.stdout).to_string()
            + &String::from_utf8_lossy(&check.stderr);
        assert!(check.status.success(), "{name}: {said}\n{yaml}");
        assert_eq!(
            said.matches(" passed for resource job/").count(),
            2,
            "{name}: {said}"
        );
    }
    // The validator fails what is not a valid Job (so its passing above means something).
    let bad = tmp.path().join("bad.yaml");
    write(
        &bad,
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x\nspec:\n  completionMode: Indexed\n  completions: three\n  template:\n    spec:\n      containers: []\n",
    );
    let check = Command::new(&validate)
        .args(["--strict", "-k", "1.30.0"])
        .arg(&bad)
        .output()
        .expect("run kubernetes-validate");
    assert!(!check.status.success());
}

#[test]
fn options_the_fan_out_sets_are_refused() {
    let out = run(harness()
        .args([
            "k8s", "manifest", "--parts", "2", "--image", "i", "--claim", "c", "--",
        ])
        .args([
            "--model",
            "m",
            "--predictions",
            "p.jsonl",
            "--k",
            "1",
            "--partition",
            "1/2",
        ]));
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--partition is set for each partition"));
    let out = run(harness()
        .args([
            "k8s", "manifest", "--parts", "2", "--image", "i", "--claim", "c", "--",
        ])
        .args(["--model", "m", "--k", "1"]));
    assert_ne!(
        out.status.code(),
        Some(0),
        "opt-at-k's own checks apply: --predictions is required"
    );
}
