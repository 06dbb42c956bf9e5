//! The run store writes nothing through a link (issue 40): `harness report` on a run folder
//! whose `rollouts` folder, or whose model folder, is a link to a folder outside it refuses,
//! names the link, and leaves the outside folder byte for byte as it was. Each case is run
//! first on the same run folder without the link, to show the command does write there.
//! No Docker: the run folder is written with the library's own types (tests/ci_status.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{harness, read_json, run};

/// Every file under `dir` (links not followed) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// A run folder `<results>/ci-run` (five instances, model `ci-model`, eight sample reports)
/// and a folder `outside` beside the results holding one file of the user's.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let results = d.path().join("results");
    let runs = crate::ci_status::write_run(&results.join("ci-run"));
    let outside = d.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("notes.txt"), "the user's own file\n").unwrap();
    (d, runs.root, outside)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn report_writes_nothing_through_a_linked_rollouts_folder() {
    // Without the link, the report writes GSO's rollout reports into `rollouts/`.
    let (_d, plain, _) = setup();
    let out = run(harness().arg("report").arg(&plain));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written = snapshot(&plain.join("rollouts"));
    assert!(
        written
            .keys()
            .any(|p| p.to_string_lossy().ends_with(".ci-run.report.json")),
        "{:?}",
        written.keys()
    );

    // With `rollouts` a link to a folder of the user's (one holding what looks like a stale
    // rollout the report would clear away), nothing there is written or removed.
    let (_d, linked, outside) = setup();
    std::fs::create_dir_all(outside.join("an-old-rollout")).unwrap();
    std::fs::write(outside.join("an-old-rollout/x.report.json"), "{}").unwrap();
    std::os::unix::fs::symlink(&outside, linked.join("rollouts")).unwrap();
    let before = snapshot(&outside);
    let out = run(harness().arg("report").arg(&linked));
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out);
    assert!(
        said.contains(&format!(
            "{}: is a symbolic link",
            linked.join("rollouts").display()
        )),
        "{said}"
    );
    assert_eq!(snapshot(&outside), before, "nothing outside changed");
}

#[test]
fn regrading_rewrites_nothing_in_a_linked_model_folder() {
    // Without the link, `--criterion gso` rewrites every sample's report.json and run.json.
    let (_d, plain, _) = setup();
    let samples_before = snapshot(&plain.join("ci-model"));
    let out = run(harness().args(["report", "--criterion", "gso"]).arg(&plain));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let samples_after = snapshot(&plain.join("ci-model"));
    assert_eq!(
        samples_after
            .keys()
            .filter(|p| p.ends_with("report.json"))
            .count(),
        8,
        "{:?}",
        samples_after.keys()
    );
    assert!(
        samples_before
            .iter()
            .filter(|(p, bytes)| samples_after[*p] != **bytes)
            .count()
            >= 3,
        "the regrading rewrote the samples' reports"
    );
    assert_eq!(
        read_json(&plain.join("run.json"))["regradings"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // With the model folder moved outside and linked back, nothing outside is rewritten,
    // and run.json is left as it was (the regrading is refused before any write).
    let (_d, linked, outside) = setup();
    std::fs::rename(linked.join("ci-model"), outside.join("ci-model")).unwrap();
    std::os::unix::fs::symlink(outside.join("ci-model"), linked.join("ci-model")).unwrap();
    let before = snapshot(&outside);
    let run_json = std::fs::read(linked.join("run.json")).unwrap();
    let out = run(harness()
        .args(["report", "--criterion", "gso"])
        .arg(&linked));
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out);
    assert!(
        said.contains(&format!(
            "{}: is a symbolic link",
            linked.join("ci-model").display()
        )),
        "{said}"
    );
    assert_eq!(
        snapshot(&outside),
        before,
        "no report.json outside was rewritten"
    );
    assert_eq!(std::fs::read(linked.join("run.json")).unwrap(), run_json);
}

/// A run folder that is itself a link is refused for writing (its path is named); so is a
/// run.json whose run id climbs out of the folder through the names of GSO's files.
#[test]
fn a_linked_run_folder_and_a_run_id_that_climbs_out_are_refused() {
    let (d, real, outside) = setup();
    assert_eq!(outside, d.path().join("outside"));
    let link = d.path().join("results/latest");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let before = snapshot(&real);
    let out = run(harness().arg("report").arg(&link));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("{}: is a symbolic link", link.display())),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot(&real), before);

    let mut info = read_json(&real.join("run.json"));
    // GSO's logs go to `gso/logs/run_evaluation/<run_id>/`: five levels up is the folder
    // that holds the results and `outside`.
    info["run_id"] = serde_json::json!("../../../../../outside");
    std::fs::write(real.join("run.json"), info.to_string()).unwrap();
    let before = snapshot(&outside);
    let out = run(harness().arg("report").arg(&real));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("leaves"), "{}", stderr(&out));
    assert_eq!(snapshot(&outside), before);
}

/// `opt-at-k` resuming into a run folder whose model folder is a link stops before any
/// container, naming the link: the evaluation would write each sample's files there.
#[test]
fn a_run_into_a_linked_model_folder_stops_before_any_container() {
    if !crate::common::docker_available("linked_model_folder") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let results = d.path().join("results");
    let outside = d.path().join("outside");
    std::fs::create_dir_all(results.join("linked")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, results.join("linked/demo-agent")).unwrap();
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "demo-agent",
            "--k",
            "1",
            "--run-id",
            "linked",
        ])
        .args(["--predictions", "tasks/_predictions/demo-agent.jsonl"])
        .args(["--instance-ids", "pair-sum", "--results-dir"])
        .arg(&results));
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out);
    let link = results.join("linked/demo-agent");
    assert!(
        said.contains(&format!("{}: is a symbolic link", link.display())),
        "{said}"
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written outside"
    );
    assert!(
        !results.join("linked/images").exists(),
        "no image was built"
    );
    assert!(!results.join("linked/run.json").exists());
}
