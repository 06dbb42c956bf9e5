//! The disk limit holds for what an install writes where no walk of the tree sees it: files
//! it deletes but keeps open still count (the supervisor sums them), so an install cannot
//! hold many times its `resources.disk` on the host's disk while it runs.

use crate::common::*;

const HOLDING: &str = "import os, time\nheld = []\nfor i in range(3):\n    f = open(f'blob{i}', 'wb')\n    for _ in range(200):\n        f.write(b'x' * (1 << 20))\n    f.flush()\n    os.fsync(f.fileno())\n    os.unlink(f'blob{i}')\n    held.append(f)\ntime.sleep(8)\n";

#[test]
fn an_install_holding_deleted_files_past_its_limit_is_stopped() {
    if !docker_available("an_install_holding_deleted_files") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(
        &ds,
        "holder",
        SLOW,
        FAST,
        "[install]\ncommands = [\"python3 build.py\"]\n",
    );
    std::fs::write(ds.join("holder/repo/build.py"), "pass\n").unwrap();
    let toml = ds.join("holder/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace("pids = 128\n", "pids = 128\ndisk = \"256m\"\n"),
    )
    .unwrap();
    // Base's algorithm, and an install that holds 600 MiB of deleted files for 8 s.
    let patch = diff("build.py", "pass\n", HOLDING);
    let preds = tmp.path().join("p.jsonl");
    predictions(&preds, &[("holder", Some(&patch))]);
    let out = tmp.path().join("out");
    let o = run(harness()
        .args(["opt-at-k", "--model", "test-model", "--k", "1"])
        .args(["--run-id", "held", "--dataset"])
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
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("held/test-model/holder/0/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["status"], "build_failed", "{report}");
    let detail = report["detail"].as_str().unwrap_or("");
    assert!(detail.contains("disk limit"), "{report}");
    assert!(containers_of_run("held").is_empty());
}
