//! `--criterion simulated` against the real daemon: each variant's cost counted once by
//! cachegrind (estimated cycles), the same number on a second run, GSO's thresholds on it;
//! refused where it does not apply.

use std::path::Path;

use crate::common::*;

const HIDDEN_CHILD: &str = "import subprocess, sys\n\ndef work(n):\n    code = 'total = 0\\nfor i in range(%d):\\n    total += sum([i * i])\\nprint(total)\\n' % n\n    out = subprocess.run([sys.executable, '-c', code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout\n    return int(out)\n";

fn opt_at_k(ds: &Path, out: &Path, preds: &Path, run_id: &str) -> std::process::Output {
    test_model_run(ds, out, preds, run_id, "3", &["--criterion", "simulated"])
}

/// A patch of `mod.py` that also adds an unused file, so its tree is not human's or base's
/// and it is counted on its own.
fn with_new_file(module_diff: &str) -> String {
    format!(
        "{module_diff}diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+unused\n"
    )
}

fn base_cycles(dir: &Path) -> f64 {
    let log = read_json(&dir.join("test-model/sim-task/0/bench.json"));
    let runs = log["runs"].as_array().unwrap();
    let base: Vec<&serde_json::Value> = runs.iter().filter(|r| r["variant"] == "base").collect();
    assert_eq!(
        base.len(),
        1,
        "one count per variant and bench, no warmup: {runs:?}"
    );
    assert_eq!(log["benches"][0]["metric"], "simulated (estimated cycles)");
    base[0]["value"].as_f64().unwrap()
}

#[test]
fn simulated_counts_decide_and_repeat_exactly() {
    if !docker_available("simulated_criterion") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "sim-task", SLOW, FAST, "");
    let preds = tmp.path().join("preds.jsonl");
    let human_code = with_new_file(&diff("mod.py", SLOW, FAST));
    let no_op = with_new_file("");
    // The slow work moved to a child process that closes the harness's descriptors (its
    // counts would go to its stderr, thrown away): never a cheap count.
    let hidden = diff("mod.py", SLOW, HIDDEN_CHILD);
    predictions(
        &preds,
        &[
            ("sim-task", Some(&human_code)),
            ("sim-task", Some(&no_op)),
            ("sim-task", Some(&hidden)),
        ],
    );
    let out = tmp.path().join("out");
    let o = opt_at_k(&ds, &out, &preds, "sim");
    assert_eq!(o.status.code(), Some(0));
    let dir = out.join("sim");
    let human = read_json(&dir.join("test-model/sim-task/0/report.json"));
    assert_eq!(human["status"], "passed", "{human}");
    assert_eq!(human["criterion"], "simulated");
    assert_eq!(human["opt_base"], true, "{human}");
    assert_eq!(human["opt_commit"], true, "{human}");
    let noop = read_json(&dir.join("test-model/sim-task/1/report.json"));
    assert_eq!(noop["status"], "passed", "{noop}");
    assert_eq!(noop["opt_base"], false, "{noop}");
    assert_eq!(
        noop["inconclusive"], false,
        "a count is always decided: {noop}"
    );
    let hidden = read_json(&dir.join("test-model/sim-task/2/report.json"));
    assert_eq!(hidden["status"], "test_failed", "{hidden}");
    assert!(
        hidden["detail"]
            .as_str()
            .unwrap_or("")
            .contains("outside the simulator's count"),
        "{hidden}"
    );
    // No GSO report: GSO's numbers are seconds, never simulated counts.
    assert!(!dir.join("test-model.sim.report.json").exists());
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("criterion simulated"), "{summary}");

    // The same code counted again in fresh containers: the same number to a few millionths
    // (measured here: 80 estimated cycles of 458 million apart; over two runs of the
    // shipped examples at most 1.8e-6; a clock's runs are 10-25% apart on a noisy hour).
    let o = opt_at_k(&ds, &out, &preds, "sim-again");
    assert_eq!(o.status.code(), Some(0));
    let (a, b) = (base_cycles(&dir), base_cycles(&out.join("sim-again")));
    assert!((a - b).abs() / a < 1e-5, "{a} vs {b}");
    // Each count's input is drawn at random, recorded, never computed from the task (a
    // patch's install could compute that one and answer it).
    let seeds = |d: &Path| {
        read_json(&d.join("test-model/sim-task/0/bench.json"))["rounds"][0]["seeds"].clone()
    };
    assert_eq!(
        seeds(&dir).as_array().map(Vec::len),
        Some(1),
        "{}",
        seeds(&dir)
    );
    assert_ne!(seeds(&dir), seeds(&out.join("sim-again")));
    assert!(containers_of_run("sim").is_empty());

    // Clock timings and counts are not regraded into each other.
    let o = run(harness()
        .args(["report", "--criterion", "strict"])
        .arg(&dir));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be regraded"));

    // Nor is a GPU task counted by a CPU simulator.
    let gpu_ds = tmp.path().join("gpu-ds");
    make_gpu_task(&gpu_ds, "gpu-task");
    let gpu_preds = tmp.path().join("gpu.jsonl");
    predictions(
        &gpu_preds,
        &[("gpu-task", Some(&diff("mod.py", SLOW, FAST)))],
    );
    let o = opt_at_k(&gpu_ds, &out, &gpu_preds, "sim-gpu");
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not see what a GPU does): gpu-task"));
}
