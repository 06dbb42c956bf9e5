//! Numbers no patch can fake, round two (issue 17), against the real daemon, on small tasks
//! of their own: a process that outlives its run as a zombie thread-group leader, a bench
//! whose answer does not depend on the seed, saved results reused after the task's check
//! changed, and reports left complete-looking by a killed run. (The catalogue rows of
//! tests/hostile.rs cover the rest.)

use crate::common::*;

/// Base's code, plus, when run as the bench, a burner that outlives the run where `ps` shows
/// a zombie: a double-forked child starts a thread and ends only its main thread. The thread
/// spins while no bench runs in its own container, so base and human, measured in theirs on
/// the same cores, get slower and this sample does not.
const ZOMBIE_BURNER: &str = include_str!("fixtures/zombie_burner.py");

#[test]
fn a_process_that_outlives_its_run_as_a_zombie_leader_is_killed() {
    if !docker_available("zombie_leader") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "burner", SLOW, FAST, "");
    let preds = tmp.path().join("p.jsonl");
    let patch = diff("mod.py", SLOW, &format!("{ZOMBIE_BURNER}{SLOW}"));
    predictions(&preds, &[("burner", Some(&patch))]);
    let out = tmp.path().join("out");
    // GSO's protocol: one container per variant, a fixed number of runs, every run counted.
    let o = test_model_run(
        &ds,
        &out,
        &preds,
        "zombie",
        "1",
        &["--criterion", "gso", "--min-rounds", "6"],
    );
    assert_eq!(o.status.code(), Some(0));
    let rep = read_json(&out.join("zombie/test-model/burner/0/report.json"));
    assert_eq!(rep["status"], "passed", "{rep}");
    assert_eq!(
        rep["opt_base"], false,
        "base's own code is not faster than base: {rep}"
    );
    let bench = read_json(&out.join("zombie/test-model/burner/0/bench.json"));
    let runs: Vec<&serde_json::Value> = bench["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["variant"] == "s0")
        .collect();
    assert!(runs.len() >= 6);
    assert!(
        runs.iter()
            .all(|r| r["lingering_killed"].as_u64().unwrap_or(0) >= 1),
        "the burner is killed after every run: {runs:?}"
    );
    assert!(containers_of_run("zombie").is_empty());
    // This task's bench prints the same answer every round (it ignores the seed): the run
    // says so, beside the sample and in summary.md.
    assert!(
        rep["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("1 distinct value(s)")),
        "{rep}"
    );
    let summary = std::fs::read_to_string(out.join("zombie/summary.md")).unwrap();
    assert!(summary.contains("## Task warnings"), "{summary}");
}

#[test]
fn fixing_a_tasks_check_measures_its_saved_samples_again() {
    if !docker_available("stale_results") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "unchecked", SLOW, FAST, "");
    let toml = ds.join("unchecked/task.toml");
    let checked = std::fs::read_to_string(&toml).unwrap();
    // The task as first written: the bench's output not checked.
    std::fs::write(
        &toml,
        checked.replace(
            "[[bench]]\n",
            "[[bench]]\ncheck_output = false\nno_check_reason = \"written in a hurry\"\n",
        ),
    )
    .unwrap();
    // A sample that prints a number and skips the work when run as the bench.
    let cheat = format!(
        "import sys as _s, os as _o\nif _s.argv[0].endswith('bench.py'):\n    print(42, flush=True)\n    _o._exit(0)\n{SLOW}"
    );
    let preds = tmp.path().join("p.jsonl");
    predictions(
        &preds,
        &[("unchecked", Some(&diff("mod.py", SLOW, &cheat)))],
    );
    let out = tmp.path().join("out");
    let args = ["--min-rounds", "3", "--max-rounds", "3", "--replicas", "1"];
    let o = test_model_run(&ds, &out, &preds, "stale", "1", &args);
    assert_eq!(o.status.code(), Some(0));
    let report = out.join("stale/test-model/unchecked/0/report.json");
    assert_eq!(read_json(&report)["status"], "passed");
    // The task is fixed: its output is checked. The same command must not reuse the result.
    std::fs::write(&toml, &checked).unwrap();
    let o = test_model_run(&ds, &out, &preds, "stale", "1", &args);
    assert_eq!(o.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("(0 already done)"),
        "the saved sample is measured again: {stderr}"
    );
    let rep = read_json(&report);
    assert_eq!(rep["status"], "test_failed", "{rep}");
    assert!(
        rep["detail"]
            .as_str()
            .unwrap()
            .contains("differs from base")
    );
}

#[test]
fn a_run_killed_outright_leaves_reports_that_say_partial() {
    if !docker_available("killed_run_reports") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "slow-task", SLOW, FAST, "");
    let out = tmp.path().join("out");
    let one = tmp.path().join("one.jsonl");
    predictions(&one, &[("slow-task", Some(&diff("mod.py", SLOW, FAST)))]);
    let args = ["--min-rounds", "3", "--max-rounds", "3", "--replicas", "1"];
    let o = test_model_run(&ds, &out, &one, "killed", "2", &args);
    assert_eq!(o.status.code(), Some(0));
    let run_dir = out.join("killed");
    let summary = std::fs::read_to_string(run_dir.join("summary.md")).unwrap();
    assert!(!summary.contains("partial"), "{summary}");

    // The same run with a second sample, killed with SIGKILL once it is under way.
    let two = tmp.path().join("two.jsonl");
    std::fs::write(&two, std::fs::read_to_string(&one).unwrap().repeat(2)).unwrap();
    let mut child = harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "2",
            "--run-id",
            "killed",
        ])
        .args(args)
        .arg("-v")
        .arg("--dataset")
        .arg(&ds)
        .arg("--predictions")
        .arg(&two)
        .arg("--results-dir")
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut child);
    // Killed once the second sample is under way (-v shows its phases): a fixed delay raced
    // a run that finished in 2 s on a quiet hour. Not at its container's creation: a create
    // still in flight when the harness dies lands after the next start's clean-up.
    wait_for(&lines, "already done");
    wait_for(&lines, "/s1: apply");
    child.kill().unwrap();
    let _ = child.wait();

    let summary = std::fs::read_to_string(run_dir.join("summary.md")).unwrap();
    assert!(summary.contains("(partial)"), "{summary}");
    assert!(summary.contains("has not finished"), "{summary}");
    let gso = std::fs::read_dir(&run_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".killed.report.json"))
                && !p.to_string_lossy().contains("opt@")
        })
        .unwrap();
    let report = read_json(&gso);
    assert_eq!(report["complete"], false, "{report}");
    // The containers the killed run left are removed by the next start.
    let o = test_model_run(&ds, &out, &two, "killed", "2", &args);
    assert_eq!(o.status.code(), Some(0));
    assert!(containers_of_run("killed").is_empty());
    let summary = std::fs::read_to_string(run_dir.join("summary.md")).unwrap();
    assert!(!summary.contains("partial"), "{summary}");
}

/// A bench whose output file the task's equivalence command judges, in base's container: a
/// sample printing the same number another way is equivalent; one whose file makes the
/// command hang is judged not equivalent at the command's deadline, and base's container
/// (where the command ran) lives on: no sample ends `error` (the red team of 6057d64 made
/// every sample `error` so, the exec's timeout killing base's container).
#[test]
fn an_equivalence_check_that_hangs_fails_its_sample_alone() {
    if !docker_available("equivalence_hang") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "judged", SLOW, FAST, "");
    write(
        &ds.join("judged/repo/check.py"),
        "import os, time\n\
         a = open(os.environ['HARNESS_REFERENCE_OUTPUT']).read().split()\n\
         b = open(os.environ['HARNESS_OUTPUT']).read().split()\n\
         if 'hang' in b:\n    time.sleep(10000)\n\
         raise SystemExit(0 if float(a[0]) == float(b[0]) else 1)\n",
    );
    let toml = ds.join("judged/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let text = text
        .replace("\"test_*.py\"]", "\"test_*.py\", \"check.py\"]")
        .replace(
            "command = \"python3 bench.py\"\nwarmups = 0\nruns = 2\ntimeout = 30\n",
            "command = \"python3 bench.py > out.txt\"\nwarmups = 0\nruns = 2\ntimeout = 8\n\
             output_file = \"out.txt\"\nequivalence = \"python3 check.py\"\n",
        );
    write(&toml, &text);
    let as_float = "def work(n):\n    return float((n - 1) * n * (2 * n - 1) // 6)\n";
    // Right in the test; its bench's file makes the check hang.
    let hangs = "import sys\ndef work(n):\n    r = (n - 1) * n * (2 * n - 1) // 6\n    \
                 return '%d hang' % r if sys.argv[0].endswith('bench.py') else r\n";
    let preds = tmp.path().join("p.jsonl");
    predictions(
        &preds,
        &[
            ("judged", Some(&diff("mod.py", SLOW, as_float))),
            ("judged", Some(&diff("mod.py", SLOW, hangs))),
        ],
    );
    let out = tmp.path().join("out");
    let args = ["--min-rounds", "2", "--max-rounds", "2", "--replicas", "1"];
    let o = test_model_run(&ds, &out, &preds, "judged", "2", &args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let dir = out.join("judged/test-model/judged");
    let float = read_json(&dir.join("0/report.json"));
    assert_eq!(float["status"], "passed", "{float}");
    let hang = read_json(&dir.join("1/report.json"));
    assert_eq!(hang["status"], "test_failed", "{hang}");
    assert!(
        hang["detail"]
            .as_str()
            .unwrap_or("")
            .contains("ran past its limit of 8 s"),
        "{hang}"
    );
    let bench = read_json(&dir.join("0/bench.json"));
    let judged = bench["equivalence"].as_array().cloned().unwrap_or_default();
    assert!(judged.iter().any(|j| j["equivalent"] == true), "{judged:?}");
    assert!(containers_of_run("judged").is_empty());
}
