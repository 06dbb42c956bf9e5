//! `harness slurm submit` on a real one-node Slurm cluster (Debian's slurmctld, slurmd and
//! munge, started by scripts/slurm-local.sh for this test and stopped after it, whatever
//! happens): two of the shipped example tasks as a 2-element array plus the merge job; the
//! merged run's verdicts equal one whole run's, `harness status` sees every part done, and
//! no Slurm daemon or job is left behind.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// The cluster, stopped when dropped.
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn start(dir: &Path) -> Option<Cluster> {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/slurm-local.sh"))
            .arg("start")
            .arg(dir)
            .output()
            .expect("run slurm-local.sh");
        eprintln!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            if std::env::var_os("CI").is_some() {
                panic!("CI is set and the one-node Slurm cluster did not start");
            }
            eprintln!("skipping: no one-node Slurm here (scripts/slurm-local.sh start failed)");
            return None;
        }
        Some(Cluster {
            dir: dir.to_path_buf(),
        })
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    fn squeue(&self, jobs: &str) -> String {
        let out = Command::new("squeue")
            .env("SLURM_CONF", self.conf())
            .args(["-h", "-o", "%i %T", "-j", jobs])
            .output()
            .expect("squeue");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("scripts/slurm-local.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

fn daemons_running() -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-a", "-x", "slurmctld|slurmd"])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

const OPTIONS: [&str; 12] = [
    "--model",
    "demo-agent",
    "--predictions",
    "tasks/_predictions/demo-agent.jsonl",
    "--k",
    "3",
    "--instance-ids",
    "dedupe-list,word-freq",
    "--min-rounds",
    "5",
    "--max-rounds",
    "5",
];

/// (instance, sample) → (status, opt_base, opt_commit) of every sample of a run folder.
fn verdicts(run: &Path) -> Vec<(String, u64, String, bool, bool)> {
    let mut out = Vec::new();
    for id in ["dedupe-list", "word-freq"] {
        for sample in 0..3 {
            let r = read_json(&run.join(format!("demo-agent/{id}/{sample}/report.json")));
            out.push((
                id.to_string(),
                sample,
                r["status"].as_str().unwrap_or("?").to_string(),
                r["opt_base"].as_bool().unwrap_or(false),
                r["opt_commit"].as_bool().unwrap_or(false),
            ));
        }
    }
    out
}

#[test]
fn a_two_element_array_and_its_merge_give_one_runs_verdicts() {
    if !docker_available("slurm_array") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(cluster) = Cluster::start(&tmp.path().join("cluster")) else {
        return;
    };

    // One whole run, for the verdicts and the wall time to compare with.
    let started = Instant::now();
    let single = run(harness()
        .args(["opt-at-k", "--run-id", "single", "--json"])
        .args(OPTIONS)
        .arg("--results-dir")
        .arg(tmp.path().join("single")));
    assert_eq!(single.status.code(), Some(0));
    let single_s = started.elapsed().as_secs_f64();

    let fan = tmp.path().join("fan");
    let started = Instant::now();
    let out = run(harness()
        .env("SLURM_CONF", cluster.conf())
        .args(["slurm", "submit", "--nodes", "2", "--out"])
        .arg(&fan)
        .arg("--")
        .args(OPTIONS));
    assert_eq!(out.status.code(), Some(0));
    let fanout = read_json(&fan.join("fanout.json"));
    let (array, merge) = (
        fanout["array_job"].as_str().unwrap().to_string(),
        fanout["merge_job"].as_str().unwrap().to_string(),
    );
    let jobs = format!("{array},{merge}");
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let queue = cluster.squeue(&jobs);
        if queue.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "jobs still queued: {queue}");
        std::thread::sleep(Duration::from_secs(2));
    }
    let fan_s = started.elapsed().as_secs_f64();
    eprintln!("one run: {single_s:.1} s; 2-element array and merge: {fan_s:.1} s");
    for log in ["slurm/part-1.log", "slurm/part-2.log", "slurm/merge.log"] {
        let text = std::fs::read_to_string(fan.join(log)).unwrap_or_default();
        eprintln!("--- {log}:\n{text}");
    }

    let merged = fan.join("demo-agent-k3");
    assert!(merged.join("run.json").is_file(), "no merged run");
    let want = verdicts(&tmp.path().join("single/single"));
    assert_eq!(verdicts(&merged), want);
    let parts = read_json(&merged.join("run.json"));
    assert_eq!(parts["merged_from"].as_array().map(Vec::len), Some(2));

    // One view of the fan-out.
    let status = run(harness().arg("status").arg(&fan));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("fan-out of demo-agent (K=3), 2 parts: done 1, 2; failed -"),
        "{text}"
    );
    assert!(containers_of_run("demo-agent-k3-part1of2").is_empty());

    drop(cluster);
    assert!(daemons_running().is_empty(), "{:?}", daemons_running());
}
