//! Identical trees share measurement: a sample whose patched tree is byte-identical to
//! human's (or another sample's) is not measured again and takes those timings; a tree that
//! differs by one byte, or only in a file's mode, is measured.

mod common;

use common::*;

#[test]
fn identical_trees_share_timings_and_different_ones_do_not() {
    if !docker_available("identical_trees_share_timings") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "share", SLOW, FAST, "");
    let human = std::fs::read_to_string(ds.join("share/human.patch")).unwrap();
    let one_more_byte = diff("mod.py", SLOW, &format!("{FAST}#\n"));
    let mode_only = "diff --git a/mod.py b/mod.py\nold mode 100644\nnew mode 100755\n";
    let p = tmp.path().join("p.jsonl");
    predictions(
        &p,
        &[
            ("share", Some(&human)),
            ("share", Some(&one_more_byte)),
            ("share", Some(mode_only)),
            ("share", Some(mode_only)),
        ],
    );
    let results = tmp.path().join("out");
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "4",
            "--run-id",
            "share",
            "--json",
            "--min-rounds",
            "5",
            "--max-rounds",
            "8",
        ])
        .arg("--predictions")
        .arg(&p)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    assert_eq!(out.status.code(), Some(0));
    let rep =
        |i: usize| read_json(&results.join(format!("share/test-model/share/{i}/report.json")));
    let s0 = rep(0);
    assert_eq!(s0["shared_with"], "human", "{s0}");
    assert_eq!(s0["opt_stats"]["hm_speedup_patch_commit"], 1.0, "{s0}");
    let hm = &s0["intervals"]["hm_speedup_patch_commit"];
    assert_eq!(
        (hm["lo"].as_f64(), hm["hi"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    assert_eq!(
        s0["opt_commit"], true,
        "as good as human, and human is {s0}"
    );
    assert!(rep(1)["shared_with"].is_null(), "one byte more: measured");
    assert!(rep(2)["shared_with"].is_null(), "a mode change: measured");
    assert_eq!(rep(3)["shared_with"], "s2", "the same mode change again");
    let bench = read_json(&results.join("share/test-model/share/0/bench.json"));
    assert_eq!(bench["shared"]["s0"], "human");
    assert!(
        !bench["variants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "s0"),
        "s0 ran nothing"
    );
    assert!(containers_of_run("share").is_empty());
}
