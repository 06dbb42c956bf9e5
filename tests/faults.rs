//! Faults against the real daemon: bench timeouts, memory hogs, broken tasks, bad input,
//! Ctrl-C. After each, no container of the run is left.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::*;

fn status_of(results: &std::path::Path, run: &str, id: &str, sample: usize) -> serde_json::Value {
    read_json(
        &results
            .join(run)
            .join("test-model")
            .join(id)
            .join(sample.to_string())
            .join("report.json"),
    )
}

#[test]
fn timeout_oom_and_broken_base_are_statuses_and_leave_no_container() {
    if !docker_available("timeout_oom_and_broken_base") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "sleepy", SLOW, FAST, "");
    make_task(&ds, "broken", "def work(n):\n    return 0\n", FAST, "");
    let sleeper = "import time\ndef work(n):\n    if n > 1000:\n        time.sleep(600)\n    return (n - 1) * n * (2 * n - 1) // 6\n";
    let hog = "def work(n):\n    if n > 1000:\n        x = b'x' * (1024 * 1024 * 1024)\n    return (n - 1) * n * (2 * n - 1) // 6\n";
    let p = tmp.path().join("p.jsonl");
    predictions(
        &p,
        &[
            ("sleepy", Some(&diff("mod.py", SLOW, sleeper))),
            ("sleepy", Some(&diff("mod.py", SLOW, hog))),
            ("sleepy", Some(&diff("mod.py", SLOW, FAST))),
            (
                "broken",
                Some(&diff("mod.py", "def work(n):\n    return 0\n", FAST)),
            ),
        ],
    );
    let results = tmp.path().join("out");
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "3",
            "--run-id",
            "faults",
            "--timeout-scale",
            "0.1",
        ])
        .arg("--predictions")
        .arg(&p)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    assert_eq!(out.status.code(), Some(0));

    let s = status_of(&results, "faults", "sleepy", 0);
    assert_eq!(s["status"], "timeout", "{s}");
    assert!(s["detail"].as_str().unwrap().contains("timeout"), "{s}");
    let s = status_of(&results, "faults", "sleepy", 1);
    assert_eq!(s["status"], "oom", "{s}");
    let s = status_of(&results, "faults", "sleepy", 2);
    assert_eq!(s["status"], "passed", "{s}");
    assert_eq!(s["opt_base"], true, "{s}");
    let s = status_of(&results, "faults", "broken", 0);
    assert_eq!(s["status"], "base_failed", "{s}");
    assert!(
        s["detail"].as_str().unwrap().contains("base test_failed"),
        "{s}"
    );

    // The run report counts base_failed apart from the model's outcomes.
    let report = read_json(&results.join("faults/test-model.faults.report.json"));
    assert_eq!(
        report["instance_sets"]["base_failed_ids"],
        serde_json::json!(["broken"])
    );
    assert_eq!(report["summary"]["opt_base"], 1);
    assert!(
        containers_of_run("faults").is_empty(),
        "containers left: {:?}",
        containers_of_run("faults")
    );
}

#[test]
fn bad_input_is_named_and_the_rest_goes_on() {
    if !docker_available("bad_input_is_named") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "fine", SLOW, FAST, "");
    let results = tmp.path().join("out");
    let p = tmp.path().join("p.jsonl");
    let good = serde_json::json!({"instance_id": "fine", "model_name_or_path": "test-model", "model_patch": diff("mod.py", SLOW, FAST)});
    let unknown = serde_json::json!({"instance_id": "no-such-task", "model_patch": "x"});
    write(&p, &format!("{good}\n{{\"instance_id\": oops\n{unknown}\n"));

    // An unknown --instance-ids stops before any work, naming the id.
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            "badinput",
            "--instance-ids",
            "nope",
        ])
        .arg("--predictions")
        .arg(&p)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown instance id \"nope\""));
    assert!(
        !results.join("badinput").exists(),
        "nothing is written for a refused command"
    );

    // A bad predictions line and an unknown instance are reported with file:line; the
    // good line is still evaluated.
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            "badinput",
        ])
        .arg("--predictions")
        .arg(&p)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("p.jsonl:2: not a JSON object"), "{err}");
    assert!(
        err.contains("p.jsonl:3: unknown instance id \"no-such-task\""),
        "{err}"
    );
    let s = status_of(&results, "badinput", "fine", 0);
    assert_eq!(s["status"], "passed");
    let info = read_json(&results.join("badinput/run.json"));
    assert_eq!(info["warnings"].as_array().unwrap().len(), 2, "{info}");

    // A task.toml with a missing field stops the run, naming the file and the field.
    let toml = ds.join("fine/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    write(
        &toml,
        &text.replace(
            "[test]\ncommand = \"python3 test_mod.py\"\ntimeout = 60\n",
            "",
        ),
    );
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            "badinput2",
        ])
        .arg("--predictions")
        .arg(&p)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fine/task.toml") && err.contains("missing field `test`"),
        "{err}"
    );
    assert!(containers_of_run("badinput").is_empty());
}

#[test]
fn ctrl_c_removes_the_runs_containers() {
    if !docker_available("ctrl_c_removes_the_runs_containers") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "long", SLOW, FAST, "");
    let toml = ds.join("long/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    write(&toml, &text.replace("runs = 2", "runs = 200"));
    let p = tmp.path().join("p.jsonl");
    predictions(&p, &[("long", Some(&diff("mod.py", SLOW, FAST)))]);
    let mut child = harness()
        .args([
            "-v",
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            "ctrlc",
        ])
        .arg("--predictions")
        .arg(&p)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(tmp.path().join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Keep draining stderr on a thread, so the harness never writes into a closed pipe.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(300)) {
        seen.push(line.clone());
        if line.contains("round 2/") {
            break;
        }
    }
    assert!(
        !containers_of_run("ctrlc").is_empty(),
        "measuring, so containers exist: {seen:?}"
    );
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen:?}");
    assert!(
        containers_of_run("ctrlc").is_empty(),
        "containers left after Ctrl-C: {:?}",
        containers_of_run("ctrlc")
    );
}
