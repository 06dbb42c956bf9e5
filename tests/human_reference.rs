//! The human reference as GSO treats it: the human's diff is the task's own and is applied
//! whole, protected files and all; a sample that makes the human's very change to a
//! protected file takes the human's version of it (GSO's "human" rollout passes), and any
//! other change to a protected file is still refused. `harness tasks` names the protected
//! files a task's human changes.

use crate::common::*;

const TEST: &str =
    "import mod\nassert mod.work(10) == sum(i * i for i in range(10)), mod.work(10)\nprint('ok')\n";

#[test]
fn a_sample_making_the_humans_change_to_a_protected_file_is_judged_like_the_human() {
    if !docker_available("a_sample_making_the_humans_change") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "human-tests", SLOW, FAST, "");
    // The human also changes the protected test (as pydantic's gt_diff writes
    // tests/conftest.py).
    let human = diff("mod.py", SLOW, FAST)
        + &diff(
            "test_mod.py",
            TEST,
            &format!("{TEST}print('checked by the human')\n"),
        );
    std::fs::write(ds.join("human-tests/human.patch"), &human).unwrap();

    let listing = run(harness().args(["tasks", "--dataset"]).arg(&ds));
    let text = String::from_utf8_lossy(&listing.stdout);
    assert!(
        text.contains("human-tests: the human changes protected files: test_mod.py"),
        "{text}"
    );

    let other = diff("mod.py", SLOW, FAST)
        + &diff("test_mod.py", TEST, &format!("{TEST}print('weakened')\n"));
    let preds = tmp.path().join("p.jsonl");
    predictions(
        &preds,
        &[("human-tests", Some(&human)), ("human-tests", Some(&other))],
    );
    let out = tmp.path().join("out");
    let o = run(harness()
        .args(["opt-at-k", "--model", "test-model", "--k", "2"])
        .args(["--run-id", "hr", "--dataset"])
        .arg(&ds)
        .arg("--predictions")
        .arg(&preds)
        .arg("--results-dir")
        .arg(&out));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report = |s: u32| -> serde_json::Value {
        serde_json::from_slice(
            &std::fs::read(out.join(format!("hr/test-model/human-tests/{s}/report.json"))).unwrap(),
        )
        .unwrap()
    };
    // The human's diff as a sample: passed, the human's tree (its timings shared).
    let same = report(0);
    assert_eq!(same["status"], "passed", "{same}");
    assert_eq!(same["opt_commit"], true, "{same}");
    let apply = std::fs::read_to_string(out.join("hr/test-model/human-tests/0/apply.log"))
        .unwrap_or_default();
    assert!(
        apply.contains("the human's own change, taken whole: test_mod.py"),
        "{apply}"
    );
    // Another change to the protected test: refused, as before.
    let changed = report(1);
    assert_eq!(changed["status"], "patch_rejected", "{changed}");
    assert!(containers_of_run("hr").is_empty());
}
