//! A task whose source is a local git bundle and whose human reference is a commit in it,
//! with a setup command: `harness build` makes its image once (setup ran in /testbed, before
//! the base commit), and a sample is evaluated against it.

use std::process::Command;

use crate::common::*;

fn git(dir: &std::path::Path, args: &[&str]) {
    let st = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

#[test]
fn git_bundle_source_builds_once_and_evaluates() {
    if !docker_available("git_bundle_source_builds_once_and_evaluates") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("upstream");
    write(&repo.join("mod.py"), SLOW);
    write(
        &repo.join("test_mod.py"),
        "import mod\nassert mod.work(10) == 285\n",
    );
    write(
        &repo.join("bench.py"),
        "import mod\nprint(mod.work(100000))\n",
    );
    git(&repo, &["init", "-q", "."]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    git(&repo, &["tag", "v-base"]);
    write(&repo.join("mod.py"), FAST);
    git(&repo, &["commit", "-qam", "optimise"]);
    git(&repo, &["tag", "v-opt"]);

    let ds = tmp.path().join("ds");
    let task = ds.join("from-git");
    std::fs::create_dir_all(&task).unwrap();
    git(
        &repo,
        &[
            "bundle",
            "create",
            task.join("src.bundle").to_str().unwrap(),
            "--all",
        ],
    );
    write(
        &task.join("task.toml"),
        "protected = [\"bench.py\"]\n[source]\ngit = \"src.bundle\"\nbase_commit = \"v-base\"\n[human]\ncommit = \"v-opt\"\n[image]\nsetup = [\"echo made-by-setup > setup_marker.txt\"]\n[test]\ncommand = \"python3 test_mod.py && grep -q made-by-setup setup_marker.txt && test $(stat -c %Y bench.py) = 1500000000 && test $(id -u) = 10001 && ! touch bench.py 2>/dev/null\"\n[[bench]]\nname = \"w\"\ncommand = \"python3 bench.py\"\nwarmups = 0\nruns = 2\n",
    );
    let results = tmp.path().join("out");

    let build = |force: bool| {
        let mut c = harness();
        c.args(["build", "--dataset"])
            .arg(&ds)
            .arg("--results-dir")
            .arg(&results);
        if force {
            c.arg("--force");
        }
        run(&mut c)
    };
    let first = build(true);
    assert!(first.status.success());
    assert!(String::from_utf8_lossy(&first.stdout).contains("from-git: harness-task/from-git:"));
    assert!(String::from_utf8_lossy(&first.stdout).contains("built in"));
    let log = std::fs::read_to_string(results.join("images/from-git.build.log")).unwrap();
    assert!(log.contains("FROM harness-base:bookworm"), "{log}");
    // The image carries the harness's labels (one LABEL step, not one per label).
    let stdout = String::from_utf8_lossy(&first.stdout).to_string();
    let tag = stdout
        .split_whitespace()
        .find(|w| w.starts_with("harness-task/from-git:"))
        .unwrap()
        .to_string();
    let labels = Command::new("docker")
        .args([
            "image",
            "inspect",
            "--format",
            "{{json .Config.Labels}}",
            &tag,
        ])
        .output()
        .unwrap();
    let labels: serde_json::Value = serde_json::from_slice(&labels.stdout).unwrap();
    assert_eq!(labels["org.harness.managed"], "true", "{labels}");
    assert_eq!(labels["org.harness.instance"], "from-git", "{labels}");
    assert_eq!(
        log.matches("LABEL").count(),
        2,
        "one LABEL line, echoed once: {log}"
    );
    let second = build(false);
    assert!(second.status.success());
    assert!(String::from_utf8_lossy(&second.stdout).contains("(cached)"));

    let p = tmp.path().join("p.jsonl");
    predictions(&p, &[("from-git", Some(&diff("mod.py", SLOW, FAST)))]);
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            "gitsrc",
            "--json",
        ])
        .arg("--predictions")
        .arg(&p)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    assert!(out.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["invocation"]["images_built"], 0,
        "built by `harness build` already"
    );
    assert_eq!(
        summary["instances"][0]["samples"][0]["status"], "passed",
        "{summary}"
    );
    // The human reference came from the commit: base/human differ, so speedups exist.
    let hm = summary["instances"][0]["samples"][0]["hm_speedup_patch_commit"]
        .as_f64()
        .unwrap();
    assert!(
        hm > 0.5 && hm < 2.0,
        "patch and human are the same code: {hm}"
    );
    assert!(containers_of_run("gitsrc").is_empty());
}
