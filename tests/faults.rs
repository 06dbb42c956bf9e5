//! Faults against the real daemon: bench timeouts, memory hogs, broken tasks, bad input,
//! Ctrl-C. After each, no container of the run is left.

use std::process::Stdio;

use crate::common::*;

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
            // 40 ms benches: enough rounds for the three containers per variant to decide.
            "--max-rounds",
            "24",
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
    let rx = stderr_lines(&mut child);
    let seen = wait_for(&rx, "round 2/");
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

/// Starts `opt-at-k` on `ds` in the background and returns it with a channel of its stderr
/// lines.
fn spawn_run(
    ds: &std::path::Path,
    p: &std::path::Path,
    results: &std::path::Path,
    run_id: &str,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = harness()
        .args([
            "-v",
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            run_id,
            "--json",
        ])
        .arg("--predictions")
        .arg(p)
        .arg("--dataset")
        .arg(ds)
        .arg("--results-dir")
        .arg(results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    (child, rx)
}

fn long_task(ds: &std::path::Path, id: &str, runs: u32) {
    make_task(ds, id, SLOW, FAST, "");
    let toml = ds.join(id).join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    write(
        &toml,
        &text.replace("runs = 2", &format!("runs = {runs}\nmax_runs = {runs}")),
    );
}

#[test]
fn kill_9_then_the_same_command_finishes_and_loses_nothing() {
    if !docker_available("kill_9_then_the_same_command") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "a-quick", SLOW, FAST, "");
    long_task(&ds, "b-long", 12);
    let p = tmp.path().join("p.jsonl");
    predictions(
        &p,
        &[
            ("a-quick", Some(&diff("mod.py", SLOW, FAST))),
            ("b-long", Some(&diff("mod.py", SLOW, FAST))),
        ],
    );
    let results = tmp.path().join("out");
    let (mut child, rx) = spawn_run(&ds, &p, &results, "kill9");
    // The first task is finished and the second is being measured.
    wait_for(&rx, "a-quick/0: passed");
    wait_for(&rx, "b-long: round 2/");
    let finished = results.join("kill9/test-model/a-quick/0/report.json");
    let before = std::fs::read(&finished).unwrap();
    assert!(!containers_of_run("kill9").is_empty());
    child.kill().unwrap(); // SIGKILL: no clean-up of any kind
    child.wait().unwrap();
    assert!(
        !containers_of_run("kill9").is_empty(),
        "a killed harness leaves its containers"
    );

    let (child, _rx) = spawn_run(&ds, &p, &results, "kill9");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["invocation"]["reused_samples"], 1, "{summary}");
    assert_eq!(summary["invocation"]["evaluated_samples"], 1, "{summary}");
    assert_eq!(summary["totals"]["complete"], true);
    assert_eq!(
        std::fs::read(&finished).unwrap(),
        before,
        "the finished sample is neither re-run nor rewritten"
    );
    let s = read_json(&results.join("kill9/test-model/b-long/0/report.json"));
    assert_eq!(s["status"], "passed", "{s}");
    assert!(containers_of_run("kill9").is_empty());
}

#[test]
fn containers_removed_from_outside_are_errors_and_the_rerun_completes() {
    if !docker_available("containers_removed_from_outside") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    long_task(&ds, "victim", 12);
    let p = tmp.path().join("p.jsonl");
    predictions(&p, &[("victim", Some(&diff("mod.py", SLOW, FAST)))]);
    let results = tmp.path().join("out");
    let (child, rx) = spawn_run(&ds, &p, &results, "outside");
    wait_for(&rx, "victim: round 2/");
    // What a restarted daemon does to running containers: they are gone.
    for id in containers_of_run("outside") {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &id])
            .output();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a sample ended `error`");
    let s = read_json(&results.join("outside/test-model/victim/0/report.json"));
    assert_eq!(s["status"], "error", "not the model's fault: {s}");
    let report = read_json(&results.join("outside/test-model.outside.report.json"));
    assert_eq!(report["complete"], false);
    assert_eq!(
        report["harness"]["instance_sets"]["not_run_ids"],
        serde_json::json!(["victim"])
    );
    assert!(containers_of_run("outside").is_empty());

    // The same command again retries it.
    let (child, _rx) = spawn_run(&ds, &p, &results, "outside");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let s = read_json(&results.join("outside/test-model/victim/0/report.json"));
    assert_eq!(s["status"], "passed", "{s}");
    let report = read_json(&results.join("outside/test-model.outside.report.json"));
    assert_eq!(report["complete"], true);
}

#[test]
fn sigterm_stops_like_ctrl_c_and_the_reports_say_partial() {
    if !docker_available("sigterm_stops_like_ctrl_c") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "a-quick", SLOW, FAST, "");
    long_task(&ds, "b-long", 200);
    let p = tmp.path().join("p.jsonl");
    predictions(
        &p,
        &[
            ("a-quick", Some(&diff("mod.py", SLOW, FAST))),
            ("b-long", Some(&diff("mod.py", SLOW, FAST))),
        ],
    );
    let results = tmp.path().join("out");
    let (child, rx) = spawn_run(&ds, &p, &results, "term");
    wait_for(&rx, "b-long: round 2/");
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["totals"]["complete"], false);
    assert_eq!(summary["totals"]["interrupted"], "SIGTERM");
    assert_eq!(
        summary["totals"]["not_run_ids"],
        serde_json::json!(["b-long"])
    );
    let md = std::fs::read_to_string(results.join("term/summary.md")).unwrap();
    assert!(md.contains("(partial)") && md.contains("SIGTERM"), "{md}");
    let report = read_json(&results.join("term/test-model.opt@1.term.report.json"));
    assert_eq!(report["complete"], false);
    assert!(containers_of_run("term").is_empty());
}

#[test]
fn a_resumed_run_counts_only_the_current_predictions() {
    if !docker_available("a_resumed_run_counts_only_the_current_predictions") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "one", SLOW, FAST, "");
    let p = tmp.path().join("p.jsonl");
    let fast = diff("mod.py", SLOW, FAST);
    let broken = diff("mod.py", SLOW, "def work(n):\n    return 0\n");
    predictions(&p, &[("one", Some(&broken)), ("one", Some(&fast))]);
    let results = tmp.path().join("out");
    let go = || {
        run(harness()
            .args([
                "opt-at-k",
                "--model",
                "test-model",
                "--k",
                "2",
                "--run-id",
                "resume",
                "--json",
            ])
            .arg("--predictions")
            .arg(&p)
            .arg("--dataset")
            .arg(&ds)
            .arg("--results-dir")
            .arg(&results))
    };
    let first: serde_json::Value = serde_json::from_slice(&go().stdout).unwrap();
    assert_eq!(first["totals"]["pass_at_k"][0], 0.5, "{first}");
    // The passing row is withdrawn: its saved result must not count any more.
    predictions(&p, &[("one", Some(&broken))]);
    let second: serde_json::Value = serde_json::from_slice(&go().stdout).unwrap();
    assert_eq!(second["totals"]["pass_at_k"][0], 0.0, "{second}");
    assert_eq!(
        second["instances"][0]["samples"].as_array().unwrap().len(),
        1
    );
    assert_eq!(
        second["invocation"]["evaluated_samples"], 0,
        "sample 0 reused"
    );
}

#[test]
fn inputs_are_read_honestly() {
    if !docker_available("inputs_are_read_honestly") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "fine", SLOW, FAST, "");
    let fast = diff("mod.py", SLOW, FAST);
    let p = tmp.path().join("p.jsonl");
    let rows = [
        serde_json::json!({"instance_id": "fine", "model_name_or_path": "test-model", "model_patch": fast}),
        serde_json::json!({"instance_id": "fine", "model_name_or_path": "someone-else", "model_patch": fast}),
        serde_json::json!({"instance_id": "fine", "model_name_or_path": "test-model", "patch": fast}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    write(&p, &text);
    let results = tmp.path().join("out");
    let go = |p: &std::path::Path| {
        run(harness()
            .args([
                "opt-at-k",
                "--model",
                "test-model",
                "--k",
                "3",
                "--run-id",
                "honest",
                "--json",
            ])
            .arg("--predictions")
            .arg(p)
            .arg("--dataset")
            .arg(&ds)
            .arg("--results-dir")
            .arg(&results))
    };
    let out = go(&p);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"someone-else\", not --model \"test-model\""),
        "another model's row is not taken: {err}"
    );
    assert!(
        err.contains("unknown field \"patch\"") && err.contains("did you mean \"model_patch\""),
        "a misnamed field is named, never an empty patch: {err}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let samples = summary["instances"][0]["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 1, "{summary}");
    assert_eq!(samples[0]["status"], "passed");
    assert!(
        !results.join("honest/test-model/fine/2").exists(),
        "the misnamed row is no empty_patch sample"
    );

    // The same sample twice is an error naming both lines; nothing is run.
    let dup = tmp.path().join("dup.jsonl");
    write(
        &dup,
        &format!(
            "{}\n{}\n",
            serde_json::json!({"instance_id": "fine", "sample": 0, "model_patch": fast}),
            serde_json::json!({"instance_id": "fine", "sample": 0, "model_patch": ""})
        ),
    );
    let out = go(&dup);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dup.jsonl:1") && err.contains("dup.jsonl:2"),
        "{err}"
    );
}
