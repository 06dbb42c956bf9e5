//! `--partition I/N` and `harness merge`: the shipped examples run whole and in two parts
//! (one part through a `DOCKER_HOST` that is a symlink to the daemon's socket), merged, and
//! compared with the whole run; and every refusal of merge, on run folders written with the
//! library's own types (no Docker).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use harness::core::criterion::Criterion;
use harness::core::metrics::Thresholds;
use harness::core::partition::PartitionInfo;
use harness::core::records::{ExpectedSample, InputFile, PhaseSeconds, RunInfo, SampleReport};
use harness::core::rule::{CONFIDENCE, DecisionRule, ESTIMATOR, RESAMPLES};
use harness::core::stats::Decision;
use harness::core::status::Status;
use harness::store::run_folder::{RunDir, write_json};

/// Two tasks whose samples have verdicts noise cannot flip (tasks/_predictions/EXPECTED.md):
/// a failing test, an empty patch, a patch that does not apply, a rejected patch, and two
/// patches 10-20x faster than base and 3-4x faster than the human's.
const IDS: &str = "dedupe-list,word-freq";

fn opt_at_k(results: &Path, extra: &[&str], docker_host: Option<&str>) -> std::process::Output {
    let mut cmd = harness();
    cmd.args([
        "opt-at-k",
        "--model",
        "demo-agent",
        "--predictions",
        "tasks/_predictions/demo-agent.jsonl",
        "--k",
        "3",
        "--instance-ids",
        IDS,
        // GSO's rule on the means of 5 rounds: the designed margins decide every verdict.
        "--criterion",
        "gso",
        "--min-rounds",
        "5",
        "--max-rounds",
        "5",
    ])
    .args(extra)
    .arg("--results-dir")
    .arg(results);
    if let Some(h) = docker_host {
        cmd.env("DOCKER_HOST", h);
    }
    run(&mut cmd)
}

/// Every non-integer number (a timing or a figure made from timings) as null, and the keys
/// that hold timestamps, durations or round counts removed.
fn without_timings(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Number(n) if n.is_f64() => Value::Null,
        Value::Array(a) => Value::Array(a.iter().map(without_timings).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    ![
                        "started_at",
                        "finished_at",
                        "seconds",
                        "rounds",
                        "rounds_with_human",
                        "measured_rounds",
                    ]
                    .contains(&k.as_str())
                })
                .map(|(k, v)| (k.clone(), without_timings(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Text with every decimal number replaced.
fn without_decimals(text: &str) -> String {
    let re = regex::Regex::new(r"\d+\.\d+").unwrap();
    re.replace_all(text, "#").into_owned()
}

/// Files under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn two_partitions_merge_into_what_one_run_writes() {
    if !docker_available("two_partitions_merge_into_what_one_run_writes") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let whole_root = tmp.path().join("whole");
    let o = opt_at_k(&whole_root, &["--run-id", "examples"], None);
    assert_eq!(o.status.code(), Some(0));
    let whole = whole_root.join("examples");

    // Part 1 as a CI runner would run it (default run id, its own results folder); part 2
    // through a DOCKER_HOST that is a symlink to the daemon's socket.
    let o = opt_at_k(&tmp.path().join("runner1"), &["--partition", "1/2"], None);
    assert_eq!(o.status.code(), Some(0));
    let sock_dir = tmp.path().join("remote");
    std::fs::create_dir_all(&sock_dir).unwrap();
    std::os::unix::fs::symlink("/var/run/docker.sock", sock_dir.join("docker.sock")).unwrap();
    let host = format!("unix://{}", sock_dir.join("docker.sock").display());
    let o = opt_at_k(
        &tmp.path().join("runner2"),
        &["--partition", "2/2"],
        Some(&host),
    );
    assert_eq!(o.status.code(), Some(0));
    let part1 = tmp.path().join("runner1/demo-agent-k3-part1of2");
    let part2 = tmp.path().join("runner2/demo-agent-k3-part2of2");
    let p1 = read_json(&part1.join("run.json"));
    let p2 = read_json(&part2.join("run.json"));
    assert_eq!(p1["partition"]["index"], 1);
    assert_eq!(p2["partition"]["count"], 2);
    for p in [&p1, &p2] {
        assert_eq!(
            p["partition"]["selected_instance_ids"],
            serde_json::json!(["dedupe-list", "word-freq"])
        );
    }
    // Equal estimated costs: the tie goes by id.
    assert_eq!(p1["instance_ids"], serde_json::json!(["dedupe-list"]));
    assert_eq!(p2["instance_ids"], serde_json::json!(["word-freq"]));

    // More parts than tasks: the last part is empty and still a run with its run.json.
    let o = opt_at_k(&tmp.path().join("runner3"), &["--partition", "3/3"], None);
    assert_eq!(o.status.code(), Some(0));
    let p3 = read_json(&tmp.path().join("runner3/demo-agent-k3-part3of3/run.json"));
    assert_eq!(p3["instance_ids"], serde_json::json!([]));
    assert_eq!(p3["partition"]["index"], 3);

    // Parts in any order; the merged run's id is the --out folder's name.
    let merged = tmp.path().join("merged/examples");
    let o = run(harness()
        .args(["merge", "--json"])
        .arg(&part2)
        .arg(&part1)
        .arg("--out")
        .arg(&merged));
    assert_eq!(o.status.code(), Some(0));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["totals"]["complete"], true);
    // Both selected instances are opt_commit; under GSO's criterion Opt@K is over the whole
    // dataset (its four examples), as the whole run's is.
    assert_eq!(summary["totals"]["score"], 50.0);

    for name in [
        "demo-agent.examples.report.json",
        "demo-agent.opt@3.examples.report.json",
    ] {
        let a = read_json(&whole.join(name));
        let b = read_json(&merged.join(name));
        assert_eq!(without_timings(&a), without_timings(&b), "{name}");
        assert_eq!(a["summary"], b["summary"], "{name}: counts");
        assert_eq!(a["instance_sets"], b["instance_sets"], "{name}: ids");
        assert_eq!(a.get("score"), b.get("score"), "{name}: score");
    }
    for name in ["summary.md", "results.csv"] {
        let a = std::fs::read_to_string(whole.join(name)).unwrap();
        let b = std::fs::read_to_string(merged.join(name)).unwrap();
        assert_eq!(without_decimals(&a), without_decimals(&b), "{name}");
    }
    // run.json: the same run, but for how it was made.
    let mut a = read_json(&whole.join("run.json"));
    let mut b = read_json(&merged.join("run.json"));
    assert!(b.get("partition").is_none(), "{b}");
    assert_eq!(b["merged_from"].as_array().map(Vec::len), Some(2));
    for m in [&mut a, &mut b] {
        let m = m.as_object_mut().unwrap();
        for k in ["command", "started_at", "finished_at", "merged_from"] {
            m.remove(k);
        }
    }
    assert_eq!(a, b);
    // The same sample folders, the same verdicts.
    let whole_files: Vec<String> = files_under(&whole)
        .into_iter()
        .filter(|f| f.starts_with("demo-agent/"))
        .collect();
    let merged_files: Vec<String> = files_under(&merged)
        .into_iter()
        .filter(|f| f.starts_with("demo-agent/"))
        .collect();
    assert_eq!(whole_files, merged_files);
    for f in whole_files.iter().filter(|f| f.ends_with("/report.json")) {
        let a = read_json(&whole.join(f));
        let b = read_json(&merged.join(f));
        for k in [
            "status",
            "opt_base",
            "opt_commit",
            "apply_strategy",
            "result_key",
        ] {
            assert_eq!(a[k], b[k], "{f}: {k}");
        }
    }

    // `harness report` takes the merged run as it is (no mixed-machine refusal) and writes
    // the same reports again.
    let before = std::fs::read(merged.join("demo-agent.examples.report.json")).unwrap();
    let o = run(harness().arg("report").arg(&merged));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        before,
        std::fs::read(merged.join("demo-agent.examples.report.json")).unwrap()
    );
    // Merging again into the same folder replaces the earlier merge.
    let o = run(harness()
        .arg("merge")
        .arg(&part1)
        .arg(&part2)
        .arg("--out")
        .arg(&merged));
    assert_eq!(o.status.code(), Some(0));

    // A part folder cannot be resumed as another part or as a whole run.
    let o = opt_at_k(
        &tmp.path().join("runner1"),
        &["--partition", "2/2", "--run-id", "demo-agent-k3-part1of2"],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("partition 1/2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_bad_partition_flag_is_refused_naming_it() {
    for bad in ["0/2", "3/2", "x", "1/0"] {
        let o = run(harness().args([
            "opt-at-k",
            "--model",
            "m",
            "--predictions",
            "tasks/_predictions/demo-agent.jsonl",
            "--k",
            "1",
            "--partition",
            bad,
        ]));
        assert_eq!(o.status.code(), Some(1), "{bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--partition"), "{bad}: {err}");
    }
}

// ---- merge refusals, on run folders written with the library's types (no Docker) ----

const MODEL: &str = "m";
const SELECTED: [&str; 3] = ["alpha", "beta", "gamma"];

fn rule() -> DecisionRule {
    DecisionRule {
        criterion: Criterion::STRICT,
        thresholds: Thresholds::default(),
        seed: 0,
        confidence: CONFIDENCE,
        resamples: RESAMPLES,
        estimator: ESTIMATOR,
    }
}

fn sample(id: &str, n: usize, status: Status, fingerprint: &str) -> SampleReport {
    SampleReport {
        schema_version: 1,
        instance_id: id.into(),
        model: MODEL.into(),
        model_name_or_path: MODEL.into(),
        sample: n,
        origin: format!("p.jsonl:{}", n + 1),
        status,
        detail: String::new(),
        apply_strategy: None,
        patch_sha256: format!("sha-{id}-{n}"),
        image: "harness-task/x:0".into(),
        result_key: format!("key-{id}-{n}"),
        criterion: "strict".into(),
        opt_base: false,
        opt_commit: false,
        decision_base: Decision::No,
        decision_commit: Decision::No,
        inconclusive: false,
        opt_stats: None,
        intervals: None,
        bench_means: vec![],
        gso_times: None,
        measured_rounds: 0,
        shared_with: None,
        energy: None,
        fingerprint_id: fingerprint.into(),
        seconds: PhaseSeconds::default(),
        change: None,
        agent: None,
        harness_version: "0".into(),
        finished_at: "2026-01-01T00:00:00Z".into(),
        warnings: Vec::new(),
    }
}

/// A partition run folder `root/<name>` holding `ids` (2 samples each, both test_failed
/// unless `missing` names an instance whose sample 1 was not run).
fn fake_part(
    root: &Path,
    name: &str,
    index: usize,
    count: usize,
    ids: &[&str],
    missing: Option<&str>,
) -> PathBuf {
    let run = RunDir::new(root, name);
    let fingerprint = harness::core::fingerprint::Fingerprint {
        cpu_model: "Test CPU".into(),
        cores: 8,
        ..Default::default()
    };
    let fp_id = fingerprint.id();
    let mut expected = BTreeMap::new();
    for id in ids {
        expected.insert(
            id.to_string(),
            (0..2)
                .map(|n| ExpectedSample {
                    sample: n,
                    patch_sha256: format!("sha-{id}-{n}"),
                    result_key: format!("key-{id}-{n}"),
                })
                .collect::<Vec<_>>(),
        );
        for n in 0..2 {
            if missing == Some(id) && n == 1 {
                continue;
            }
            let s = sample(id, n, Status::TestFailed, &fp_id);
            write_json(&run.sample_dir(MODEL, id, n).join("report.json"), &s).unwrap();
        }
    }
    let info = RunInfo {
        schema_version: 1,
        run_id: name.into(),
        model: MODEL.into(),
        k: 2,
        command: vec!["harness".into(), "opt-at-k".into()],
        dataset: "tasks".into(),
        dataset_digest: "part".into(),
        instance_ids: ids.iter().map(|s| s.to_string()).collect(),
        dataset_instance_ids: Vec::new(),
        predictions: vec![InputFile {
            path: "p.jsonl".into(),
            sha256: "p-sha".into(),
        }],
        settings: Default::default(),
        decision_rule: rule(),
        jobs: 1,
        cpu_plan: Default::default(),
        fingerprint,
        fingerprint_id: fp_id,
        harness_version: "0".into(),
        started_at: format!("2026-01-01T00:00:0{index}Z"),
        finished_at: Some(format!("2026-01-01T00:01:0{index}Z")),
        warnings: vec![],
        samples: Some(expected),
        interrupted: None,
        regradings: vec![],
        partition: Some(PartitionInfo {
            index,
            count,
            selected_instance_ids: SELECTED.iter().map(|s| s.to_string()).collect(),
            selection_digest: "sel".into(),
            task_digests: ids.iter().map(|id| format!("{id}=d-{id}")).collect(),
        }),
        merged_from: vec![],
        hacked: None,
    };
    write_json(&run.run_json(), &info).unwrap();
    run.root
}

/// Edits `dir`/run.json.
fn edit_run_json(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("run.json");
    let mut v = read_json(&path);
    f(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn merge(parts: &[&Path], out: &Path) -> (Option<i32>, String) {
    let mut cmd = harness();
    cmd.arg("merge").args(parts).arg("--out").arg(out);
    let o = run(&mut cmd);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn refused(parts: &[&Path], out: &Path, needles: &[&str]) {
    let (code, err) = merge(parts, out);
    assert_eq!(code, Some(1), "{err}");
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in: {err}");
    }
    assert!(!out.join("run.json").exists() || out.join("keep").exists());
}

#[test]
fn fake_partitions_merge_and_an_incomplete_part_makes_an_incomplete_run() {
    let tmp = tempfile::tempdir().unwrap();
    let a = fake_part(tmp.path(), "a", 1, 2, &["alpha", "gamma"], None);
    let b = fake_part(tmp.path(), "b", 2, 2, &["beta"], Some("beta"));
    let out = tmp.path().join("out/merged");
    let (code, err) = merge(&[&b, &a], &out);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("incomplete"), "{err}");
    let info = read_json(&out.join("run.json"));
    assert_eq!(info["run_id"], "merged");
    assert_eq!(
        info["instance_ids"],
        serde_json::json!(["alpha", "beta", "gamma"])
    );
    assert!(info.get("partition").is_none());
    assert_eq!(info["started_at"], "2026-01-01T00:00:01Z");
    assert_eq!(info["finished_at"], "2026-01-01T00:01:02Z");
    let gso = read_json(&out.join("m.merged.report.json"));
    assert_eq!(gso["complete"], false);
    assert_eq!(
        gso["harness"]["instance_sets"]["not_run_ids"],
        serde_json::json!(["beta"])
    );
    assert!(out.join("m/alpha/1/report.json").is_file());
    assert!(out.join("m/beta/0/report.json").is_file());
    assert!(!out.join("m/beta/1").exists());
}

#[test]
fn merge_refuses_what_is_not_one_whole_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let a = fake_part(root, "a", 1, 2, &["alpha", "gamma"], None);
    let b = fake_part(root, "b", 2, 2, &["beta"], None);
    let out = root.join("out");

    // Missing: a part not given, or an instance in no part.
    refused(
        &[&a],
        &out,
        &["missing partition(s) 2/2", "a (partition 1/2)"],
    );
    let b_short = fake_part(root, "b-short", 2, 2, &[], None);
    refused(&[&a, &b_short], &out, &["in no part: beta"]);

    // Overlap: an instance in two parts, or a part given twice.
    let b_over = fake_part(root, "b-over", 2, 2, &["beta", "gamma"], None);
    refused(
        &[&a, &b_over],
        &out,
        &[
            "overlapping partitions",
            "gamma",
            "a (partition 1/2)",
            "b-over",
        ],
    );
    let a2 = fake_part(root, "a2", 1, 2, &["alpha", "gamma"], None);
    refused(&[&a, &a2, &b], &out, &["partition 1/2 is given twice"]);

    // Another machine; GPU UUIDs alone do not count.
    let b_uuid = fake_part(root, "b-uuid", 2, 2, &["beta"], None);
    edit_run_json(&b_uuid, |v| {
        v["fingerprint"]["gpu_uuids"] = serde_json::json!(["GPU-1234"]);
        v["fingerprint_id"] = serde_json::json!("other-id");
    });
    // (its samples say the same id as its run.json)
    for n in 0..2 {
        let p = b_uuid.join(format!("m/beta/{n}/report.json"));
        let mut s = read_json(&p);
        s["fingerprint_id"] = serde_json::json!("other-id");
        std::fs::write(&p, s.to_string()).unwrap();
    }
    let uuid_out = root.join("uuid-out");
    let (code, err) = merge(&[&a, &b_uuid], &uuid_out);
    assert_eq!(code, Some(0), "{err}");
    let o = run(harness().arg("report").arg(&uuid_out));
    assert_eq!(o.status.code(), Some(0), "the merged run is not mixed");

    let b_cpu = fake_part(root, "b-cpu", 2, 2, &["beta"], None);
    edit_run_json(&b_cpu, |v| {
        v["fingerprint"]["cpu_model"] = serde_json::json!("Other CPU");
    });
    refused(
        &[&a, &b_cpu],
        &out,
        &["different machines", "cpu_model", "b-cpu"],
    );
    // A part whose own samples were measured elsewhere.
    let b_mixed = fake_part(root, "b-mixed", 2, 2, &["beta"], None);
    let p = b_mixed.join("m/beta/0/report.json");
    let mut s = read_json(&p);
    s["fingerprint_id"] = serde_json::json!("elsewhere");
    std::fs::write(&p, s.to_string()).unwrap();
    refused(&[&a, &b_mixed], &out, &["b-mixed", "beta/0 (elsewhere)"]);

    // Another run: model, K, dataset, predictions, rule, settings.
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit, &str); 7] = [
        ("b-model", |v| v["model"] = "other".into(), "model"),
        ("b-k", |v| v["k"] = 3.into(), "K"),
        (
            "b-data",
            |v| v["partition"]["selection_digest"] = "x".into(),
            "dataset digest",
        ),
        (
            "b-preds",
            |v| v["predictions"][0]["sha256"] = "x".into(),
            "predictions digests",
        ),
        (
            "b-rule",
            |v| v["decision_rule"]["seed"] = 7.into(),
            "decision rule",
        ),
        (
            "b-scale",
            |v| v["settings"]["timeout_scale"] = 2.0.into(),
            "settings",
        ),
        (
            "b-count",
            |v| v["partition"]["count"] = 3.into(),
            "number of partitions",
        ),
    ];
    for (name, edit, what) in edits {
        let dir = fake_part(root, name, 2, 2, &["beta"], None);
        edit_run_json(&dir, edit);
        refused(&[&a, &dir], &out, &[what, name, "not parts of one run"]);
    }

    // Not a partition run.
    let whole = fake_part(root, "whole", 1, 1, &SELECTED, None);
    edit_run_json(&whole, |v| {
        v.as_object_mut().unwrap().remove("partition");
    });
    refused(&[&whole, &b], &out, &["whole", "not a partition run"]);
    refused(
        &[&root.join("nothing"), &b],
        &out,
        &["nothing", "not a run folder"],
    );

    // --out holding something else: a whole run, or files that are no run.
    let taken = root.join("taken");
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::copy(whole.join("run.json"), taken.join("run.json")).unwrap();
    std::fs::write(taken.join("keep"), "").unwrap();
    refused(
        &[&a, &b],
        &taken,
        &["already holds a different run", "taken"],
    );
    let junk = root.join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("keep"), "").unwrap();
    refused(&[&a, &b], &junk, &["not empty and not a run folder"]);
    assert!(junk.join("keep").exists() && taken.join("keep").exists());

    // And the good pair merges, into an empty folder too.
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, err) = merge(&[&a, &b], &empty);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        read_json(&empty.join("m.empty.report.json"))["complete"],
        true
    );
}

/// A part is another machine's output: an instance id in its run.json that is no task id
/// (`../../escape`, a path, empty) or a folder of it that is a symlink must not make merge
/// write or read outside the folders it was given. Both are refused, naming the part's
/// file and the id or link, and nothing appears outside `--out`.
#[test]
fn merge_refuses_ids_that_are_paths_and_parts_with_symlinks() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let a = fake_part(root, "a", 1, 2, &["alpha", "gamma"], None);

    // An id that climbs out: the part holds `m/../../escape` (= root/escape) to copy, and
    // the copy would land two folders above the merge's staging folder.
    let a_esc = fake_part(root, "a-esc", 1, 2, &["alpha", "gamma"], None);
    let b_esc = fake_part(root, "b-esc", 2, 2, &["beta"], None);
    let bad = "../../escape";
    for dir in [&a_esc, &b_esc] {
        edit_run_json(dir, |v| {
            v["partition"]["selected_instance_ids"] =
                serde_json::json!(["alpha", "beta", "gamma", bad]);
        });
    }
    edit_run_json(&b_esc, |v| {
        v["instance_ids"] = serde_json::json!(["beta", bad]);
        v["partition"]["task_digests"] = serde_json::json!(["beta=d-beta", format!("{bad}=d")]);
        v["samples"][bad] = serde_json::json!([]);
    });
    std::fs::create_dir_all(root.join("escape/0")).unwrap();
    std::fs::write(root.join("escape/0/planted.txt"), "from the part").unwrap();
    let out = root.join("esc-out/merged");
    let (code, err) = merge(&[&a_esc, &b_esc], &out);
    assert_eq!(code, Some(1), "{err}");
    // (both parts name it among the run's selected instances: the first one read says so)
    for needle in ["a-esc/run.json", "instance id \"../../escape\""] {
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
    }
    assert!(
        !root.join("esc-out/escape").exists(),
        "merge wrote outside --out"
    );
    assert!(!out.exists());
    // Other ids that are no task's: a path, an absolute path, empty.
    for (name, id) in [("b-slash", "x/y"), ("b-abs", "/tmp/x"), ("b-empty", "")] {
        let b = fake_part(root, name, 2, 2, &["beta"], None);
        edit_run_json(&b, |v| v["instance_ids"] = serde_json::json!(["beta", id]));
        let (code, err) = merge(&[&a, &b], &root.join("ids-out"));
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(name) && err.contains(&format!("{id:?}")),
            "{err}"
        );
    }

    // A sample folder that is a symlink to a folder outside the part: its files (here a
    // planted secret) would be read into the merged run.
    let outside = root.join("outside");
    let b_link = fake_part(root, "b-link", 2, 2, &["beta"], None);
    std::fs::rename(b_link.join("m/beta"), &outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "host file").unwrap();
    std::os::unix::fs::symlink(&outside, b_link.join("m/beta")).unwrap();
    let out = root.join("link-out");
    let (code, err) = merge(&[&a, &b_link], &out);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("symlink") && err.contains("b-link"), "{err}");
    assert!(!out.exists());
    // A file inside a sample folder, or a build log, that is a symlink.
    let b_file = fake_part(root, "b-file", 2, 2, &["beta"], None);
    std::os::unix::fs::symlink("/etc/hostname", b_file.join("m/beta/0/apply.log")).unwrap();
    let (code, err) = merge(&[&a, &b_file], &out);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("symlink") && err.contains("apply.log"),
        "{err}"
    );
    let b_log = fake_part(root, "b-log", 2, 2, &["beta"], None);
    std::fs::create_dir_all(b_log.join("images")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", b_log.join("images/beta.build.log")).unwrap();
    let (code, err) = merge(&[&a, &b_log], &out);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("symlink") && err.contains("beta.build.log"),
        "{err}"
    );
    assert!(!out.exists());
    assert!(!root.join("secret.txt").exists());
}

/// `merge` with a deadline: a merge that waits on a FIFO would never end.
fn merge_within(
    parts: &[&Path],
    out: &Path,
    deadline: std::time::Duration,
) -> (Option<i32>, String) {
    let mut child = harness()
        .arg("merge")
        .args(parts)
        .arg("--out")
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            eprintln!("--- merge exited {:?}\n{err}", status.code());
            return (status.code(), err);
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("merge still running after {deadline:?}: it waits on a part's file");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path of ours.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

/// Issue 40: merge reads and copies only folders and regular files of a part. A FIFO named
/// `report.json` (or `run.json`, or a log) is refused, naming it, and never opened: on
/// 37adbf2 the merge waited on it forever. A sparse file of 2 GiB is refused by its size
/// (256 MiB is far above what a run writes); a sparse file under that is copied with its
/// holes, so the merged run takes no more disk than the part.
#[test]
fn merge_refuses_fifos_and_huge_files_and_keeps_holes() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let deadline = std::time::Duration::from_secs(60);
    let a = fake_part(root, "a", 1, 2, &["alpha", "gamma"], None);
    for (name, file) in [
        ("b-fifo-report", "m/beta/0/report.json"),
        ("b-fifo-log", "m/beta/1/test_output.txt"),
        ("b-fifo-run", "run.json"),
    ] {
        let b = fake_part(root, name, 2, 2, &["beta"], None);
        mkfifo(&b.join(file));
        let out = root.join(format!("{name}-out"));
        let (code, err) = merge_within(&[&a, &b], &out, deadline);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&b.join(file).display().to_string()) && err.contains("not a regular file"),
            "{name}: {err}"
        );
        assert!(!out.exists());
    }

    let b = fake_part(root, "b-huge", 2, 2, &["beta"], None);
    let huge = b.join("m/beta/0/test_output.txt");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let out = root.join("huge-out");
    let (code, err) = merge_within(&[&a, &b], &out, deadline);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("test_output.txt") && err.contains("2147483648 bytes, more than the 256 MiB"),
        "{err}"
    );
    assert!(!out.exists());

    // 100 MiB with 8 bytes of data at each end: copied whole, holes kept.
    let b = fake_part(root, "b-sparse", 2, 2, &["beta"], None);
    let sparse = b.join("m/beta/0/test_output.txt");
    let f = std::fs::File::create(&sparse).unwrap();
    f.set_len(100 << 20).unwrap();
    f.write_all_at(b"first 8.", 0).unwrap();
    f.write_all_at(b"last 8..", (100 << 20) - 8).unwrap();
    drop(f);
    let out = root.join("sparse-out");
    let (code, err) = merge_within(&[&a, &b], &out, deadline);
    assert_eq!(code, Some(0), "{err}");
    let copy = out.join("m/beta/0/test_output.txt");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&sparse).unwrap()
    );
    let (orig, merged) = (
        std::fs::metadata(&sparse).unwrap().blocks(),
        std::fs::metadata(&copy).unwrap().blocks(),
    );
    assert!(
        orig < (100 << 20) / 512 / 10,
        "the part's file is sparse: {orig} blocks"
    );
    assert!(
        merged <= orig.max(64),
        "the merged copy takes {merged} blocks where the part's takes {orig}"
    );
}
