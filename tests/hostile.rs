//! The hostile catalogue (tasks/_predictions/hostile.jsonl on tasks/_hostile) against the real
//! daemon: every row gets the outcome tasks/_predictions/HOSTILE.md gives it, Opt@K of
//! `hostile` is 0,
//! the harness's memory stays bounded, no container is left and no file appears outside
//! the containers.

use std::path::Path;

use crate::common::*;

struct Row {
    instance: String,
    sample: usize,
    design: String,
    status: String,
    opt_base: bool,
    opt_commit: bool,
    detail: String,
}

/// The table of HOSTILE.md (the first one, under its `| instance_id` header), row by row.
fn expected() -> Vec<Row> {
    let text = std::fs::read_to_string(repo_root().join("tasks/_predictions/HOSTILE.md")).unwrap();
    text.lines()
        .skip_while(|l| !l.starts_with("| instance_id"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_end_matches('|').trim().to_string())
                .collect();
            assert_eq!(cells.len(), 7, "HOSTILE.md row {l:?}");
            Row {
                instance: cells[0].clone(),
                sample: cells[1].parse().unwrap(),
                design: cells[2].clone(),
                status: cells[3].clone(),
                opt_base: cells[4] == "true",
                opt_commit: cells[5] == "true",
                detail: cells[6].clone(),
            }
        })
        .collect()
}

fn peak_rss_kb(time_v_stderr: &str) -> Option<u64> {
    time_v_stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|n| n.trim().parse().ok())
}

#[test]
fn hostile_catalogue_gets_its_expected_outcomes_and_scores_zero() {
    if !docker_available("hostile_catalogue") {
        return;
    }
    let rows = expected();
    let jsonl =
        std::fs::read_to_string(repo_root().join("tasks/_predictions/hostile.jsonl")).unwrap();
    assert_eq!(
        rows.len(),
        jsonl.lines().count(),
        "HOSTILE.md lists every row of hostile.jsonl"
    );
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("out");
    // Files a patch aims at outside the tree: none may appear on the host.
    let outside = [
        Path::new("/x").to_path_buf(),
        Path::new("/tmp/x").to_path_buf(),
        repo_root().join("../../x"),
        results.join("../../x"),
    ];
    let absent_before: Vec<_> = outside.iter().filter(|p| !p.exists()).cloned().collect();

    let time_v = Path::new("/usr/bin/time").exists();
    let mut cmd = if time_v {
        let mut c = std::process::Command::new("/usr/bin/time");
        c.arg("-v").arg(env!("CARGO_BIN_EXE_harness"));
        c.current_dir(repo_root());
        c
    } else {
        harness()
    };
    cmd.args([
        "opt-at-k",
        "--model",
        "hostile",
        "--dataset",
        "tasks/_hostile",
        "--predictions",
        "tasks/_predictions/hostile.jsonl",
        "--k",
        "20",
        "--timeout-scale",
        "0.25",
        "--run-id",
        "hostile",
        "--json",
    ])
    .arg("--results-dir")
    .arg(&results);
    let started = std::time::Instant::now();
    let out = run(&mut cmd);
    let wall = started.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(0), "the run completes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(kb) = peak_rss_kb(&stderr) {
        eprintln!(
            "hostile run: {wall:.0} s, harness peak RSS {} MiB",
            kb / 1024
        );
        // Bounded: a 50 MB patch and 2 GB of output must not be held whole (the patch is
        // ~50 MB once, while its line is read; the output is cut in the container).
        assert!(kb < 400 * 1024, "peak RSS {kb} kB");
    }
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let dir = results.join("hostile/hostile");
    let mut problems = Vec::new();
    for r in &rows {
        let path = dir.join(format!("{}/{}/report.json", r.instance, r.sample));
        let Ok(text) = std::fs::read_to_string(&path) else {
            problems.push(format!("{}/{}: no report", r.instance, r.sample));
            continue;
        };
        let rep: serde_json::Value = serde_json::from_str(&text).unwrap();
        let detail = rep["detail"].as_str().unwrap_or("");
        let got = (
            rep["status"].as_str().unwrap_or("?"),
            rep["opt_base"].as_bool(),
            rep["opt_commit"].as_bool(),
        );
        let want = (r.status.as_str(), Some(r.opt_base), Some(r.opt_commit));
        if got != want || !detail.contains(&r.detail) {
            problems.push(format!(
                "{}/{} ({}): want {want:?} with detail containing {:?}; got {got:?}: {detail}",
                r.instance, r.sample, r.design, r.detail
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    assert_eq!(summary["totals"]["score"], 0.0, "Opt@20 of hostile is 0");
    assert_eq!(summary["totals"]["complete"], true);
    assert!(
        containers_of_run("hostile").is_empty(),
        "containers left: {:?}",
        containers_of_run("hostile")
    );
    for p in &absent_before {
        assert!(!p.exists(), "{} appeared on the host", p.display());
    }
    // The background process of primes-sieve/7 and the zombie-led burner of primes-sieve/9
    // were killed after every one of their runs.
    let bench = read_json(&dir.join("primes-sieve/7/bench.json"));
    for variant in ["s7", "s9"] {
        let runs: Vec<&serde_json::Value> = bench["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["variant"] == variant)
            .collect();
        assert!(!runs.is_empty(), "{variant} was measured");
        assert!(
            runs.iter()
                .all(|r| r["lingering_killed"].as_u64().unwrap_or(0) > 0),
            "{variant}: what it left running is killed after every run"
        );
    }
}
