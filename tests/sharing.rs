//! Identical trees share measurement: a sample whose patched tree is byte-identical to
//! human's (or another sample's) is not measured again and takes those timings, and so does
//! one whose Python files differ from it only in comments and layout (equal syntax trees);
//! a tree that differs by one byte of code, or only in a file's mode, is measured.

use crate::common::*;

#[test]
fn identical_trees_share_timings_and_different_ones_do_not() {
    if !docker_available("identical_trees_share_timings") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let human_code = format!("{FAST}LIMIT = 10\n");
    make_task(&ds, "share", SLOW, &human_code, "");
    let human = std::fs::read_to_string(ds.join("share/human.patch")).unwrap();
    let one_more_byte = diff("mod.py", SLOW, &format!("{FAST}LIMIT = 100\n"));
    let mode_only = "diff --git a/mod.py b/mod.py\nold mode 100644\nnew mode 100755\n";
    // The human's code with a comment and other spacing: the same syntax tree.
    let commented = diff(
        "mod.py",
        SLOW,
        &format!("# faster: closed form\n{}LIMIT  =  10  # the same\n", FAST),
    );
    // A docstring is code (it is in the syntax tree): measured.
    let docstring = diff("mod.py", SLOW, &format!("\"\"\"Sums.\"\"\"\n{human_code}"));
    let p = tmp.path().join("p.jsonl");
    predictions(
        &p,
        &[
            ("share", Some(&human)),
            ("share", Some(&one_more_byte)),
            ("share", Some(mode_only)),
            ("share", Some(mode_only)),
            ("share", Some(&commented)),
            ("share", Some(&docstring)),
        ],
    );
    let results = tmp.path().join("out");
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "6",
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
    assert_eq!(rep(4)["shared_with"], "human", "comments and spacing only");
    assert_eq!(rep(4)["opt_commit"], rep(0)["opt_commit"], "{}", rep(4));
    let apply4 =
        std::fs::read_to_string(results.join("share/test-model/share/4/apply.log")).unwrap();
    assert!(apply4.contains("syntax trees are equal"), "{apply4}");
    assert!(
        rep(5)["shared_with"].is_null(),
        "a docstring is code: measured"
    );
    let bench = read_json(&results.join("share/test-model/share/0/bench.json"));
    assert_eq!(bench["shared"]["s0"], "human");
    assert_eq!(bench["shared"]["s4"], "human");
    assert_eq!(bench["shared_code_only"], serde_json::json!(["s4"]));
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
