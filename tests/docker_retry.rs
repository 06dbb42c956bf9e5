//! The engine behind a proxy that drops connections: transient failures are retried and
//! the run's results are those of an undisturbed run; a failure that outlasts the retries
//! makes that sample `error` (retried on resume), never a crash, and leaves no container.

use crate::common::proxy::{Drop, FlakyProxy};
use crate::common::*;

const DOCKER_SOCKET: &str = "/var/run/docker.sock";

fn opt_at_k(
    ds: &std::path::Path,
    p: &std::path::Path,
    results: &std::path::Path,
    run_id: &str,
) -> std::process::Command {
    let mut cmd = harness();
    cmd.args([
        "opt-at-k",
        "--model",
        "test-model",
        "--k",
        "2",
        "--run-id",
        run_id,
        "--json",
        "--min-rounds",
        "3",
        "--max-rounds",
        "4",
        "--replicas",
        "2",
        "-v",
    ])
    .arg("--predictions")
    .arg(p)
    .arg("--dataset")
    .arg(ds)
    .arg("--results-dir")
    .arg(results);
    cmd
}

fn dataset(tmp: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let ds = tmp.join("ds");
    make_task(&ds, "flaky", SLOW, FAST, "");
    let human = std::fs::read_to_string(ds.join("flaky/human.patch")).unwrap();
    let broken = diff("mod.py", SLOW, "def work(n):\n    return 0\n");
    let p = tmp.join("p.jsonl");
    predictions(&p, &[("flaky", Some(&human)), ("flaky", Some(&broken))]);
    (ds, p)
}

#[test]
fn dropped_connections_are_retried_and_change_nothing() {
    if !docker_available("dropped_connections_are_retried") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (ds, p) = dataset(tmp.path());
    // The first connection (version negotiation) and every 9th after it are dropped once
    // the request is sent: container creation, exec starts, uploads, builds, removals.
    let proxy = FlakyProxy::start(tmp.path(), DOCKER_SOCKET, Drop::EveryNth(9));
    let results = tmp.path().join("out");
    let out = run(opt_at_k(&ds, &p, &results, "flaky").env("DOCKER_HOST", proxy.docker_host()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let dropped = proxy.dropped.load(std::sync::atomic::Ordering::SeqCst);
    let forwarded = proxy.forwarded.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!("proxy: {dropped} dropped, {forwarded} forwarded");
    assert!(
        dropped >= 10,
        "the proxy dropped only {dropped} connections"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "a run with retried calls completes"
    );
    assert!(
        stderr.contains("retried after transient engine failures"),
        "{stderr}"
    );
    let rep =
        |i: usize| read_json(&results.join(format!("flaky/test-model/flaky/{i}/report.json")));
    assert_eq!(rep(0)["status"], "passed", "{}", rep(0));
    assert_eq!(rep(0)["shared_with"], "human", "{}", rep(0));
    assert_eq!(rep(1)["status"], "test_failed", "{}", rep(1));
    assert!(containers_of_run("flaky").is_empty(), "no container left");
}

#[test]
fn an_outage_longer_than_the_retries_is_an_error_then_resumes() {
    if !docker_available("an_outage_longer_than_the_retries") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (ds, p) = dataset(tmp.path());
    // Past connection 40 (the image is built by then; containers are running), nothing
    // gets through for 20 s: longer than the ~8 s the retries wait in all.
    let proxy = FlakyProxy::start(
        tmp.path(),
        DOCKER_SOCKET,
        Drop::Outage {
            from: 40,
            window: std::time::Duration::from_secs(20),
        },
    );
    let results = tmp.path().join("out");
    let out = run(opt_at_k(&ds, &p, &results, "outage").env("DOCKER_HOST", proxy.docker_host()));
    assert_eq!(
        out.status.code(),
        Some(1),
        "samples in `error`: exit 1, and the run itself finished"
    );
    let run_json = read_json(&results.join("outage/run.json"));
    assert!(run_json["finished_at"].is_string(), "{run_json}");
    let rep =
        |i: usize| read_json(&results.join(format!("outage/test-model/flaky/{i}/report.json")));
    assert!(
        (0..2).any(|i| rep(i)["status"] == "error"),
        "{} {}",
        rep(0),
        rep(1)
    );
    // Containers made before the outage are removed once the engine answers again.
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(containers_of_run("outage").is_empty(), "no container left");

    // The same command with the engine back resumes: the errors are evaluated again.
    drop(proxy);
    let out = run(&mut opt_at_k(&ds, &p, &results, "outage"));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(rep(0)["status"], "passed", "{}", rep(0));
    assert_eq!(rep(1)["status"], "test_failed", "{}", rep(1));
    assert!(containers_of_run("outage").is_empty());
}
