//! Operating the harness against the real daemon, without measuring anything: `harness
//! doctor`, `harness images gc` (on images this test makes and removes), and `opt-at-k`'s
//! `--junit` / `--fail-under` on a run that starts no container (a GPU task on this GPU-less
//! host).

use std::path::Path;
use std::process::Command;

use crate::common::*;

fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn check<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    j["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {j}"))
}

#[test]
fn doctor_checks_the_engine_and_says_what_to_fix() {
    if !docker_available("doctor_checks_the_engine") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-libnvidia-ml.so.1");
    let doctor = |extra: &[&str], docker_host: Option<&str>| {
        let mut c = harness();
        c.arg("doctor")
            .arg("--json")
            .arg("--nvml-lib")
            .arg(&missing)
            .args(extra)
            .env_remove("HARNESS_NVML_LIB");
        match docker_host {
            Some(h) => c.env("DOCKER_HOST", h),
            None => c.env_remove("DOCKER_HOST"),
        };
        run(&mut c)
    };

    let out = doctor(&[], None);
    let j = json_of(&out);
    assert_eq!(check(&j, "docker daemon")["level"], "OK", "{j}");
    let api = check(&j, "docker API");
    assert_eq!(api["level"], "OK", "{j}");
    assert!(api["found"].as_str().unwrap().contains("API 1."), "{api}");
    assert!(check(&j, "storage driver")["found"].as_str().unwrap() != "unknown");
    let disk = check(&j, "disk free");
    assert!(
        disk["found"].as_str().unwrap().contains("GiB free"),
        "{disk}"
    );
    check(&j, "base image");
    // This engine lets task containers make each run's sandbox (the supervisor ran once).
    let sandbox = check(&j, "run sandbox");
    assert_eq!(sandbox["level"], "OK", "{sandbox}");
    check(&j, "nvidia runtime");
    // NVML missing: a warning (CPU tasks run), with what to do.
    let nvml = check(&j, "nvml");
    assert_eq!(nvml["level"], "WARN", "{nvml}");
    assert!(
        nvml["found"].as_str().unwrap().contains("NVML not found"),
        "{nvml}"
    );
    assert!(
        nvml["fix"]
            .as_str()
            .unwrap()
            .contains("install the NVIDIA driver"),
        "{nvml}"
    );
    let any_fail = j["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["level"] == "FAIL");
    assert_eq!(out.status.code(), Some(if any_fail { 1 } else { 0 }), "{j}");

    // A GPU runner: no NVML is a failure, and the exit code says so.
    let out = doctor(&["--require-gpu"], None);
    assert_eq!(check(&json_of(&out), "nvml")["level"], "FAIL");
    assert_eq!(out.status.code(), Some(1));

    // DOCKER_HOST is what is used: this machine's socket by another path answers...
    let link = tmp.path().join("engine.sock");
    std::os::unix::fs::symlink("/var/run/docker.sock", &link).unwrap();
    let host = format!("unix://{}", link.display());
    let out = doctor(&[], Some(&host));
    let daemon = check(&json_of(&out), "docker daemon").clone();
    assert_eq!(daemon["level"], "OK", "{daemon}");
    assert!(
        daemon["found"]
            .as_str()
            .unwrap()
            .contains(&format!("{host} (from DOCKER_HOST)")),
        "{daemon}"
    );
    // ... a socket that is not there fails, named, with the fix, and the text form says it.
    let nowhere = format!("unix://{}", tmp.path().join("nothing.sock").display());
    let out = doctor(&[], Some(&nowhere));
    assert_eq!(out.status.code(), Some(1));
    let daemon = check(&json_of(&out), "docker daemon").clone();
    assert_eq!(daemon["level"], "FAIL", "{daemon}");
    assert!(
        daemon["found"].as_str().unwrap().contains(&nowhere),
        "{daemon}"
    );
    assert!(
        daemon["fix"].as_str().unwrap().contains("DOCKER_HOST"),
        "{daemon}"
    );
    let out = run(harness()
        .arg("doctor")
        .arg("--nvml-lib")
        .arg(&missing)
        .env("DOCKER_HOST", &nowhere));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("FAIL  docker daemon")),
        "{text}"
    );
    assert!(text.contains("fix: start the Docker Engine"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("WARN  nvml")), "{text}");
}

#[test]
fn doctor_sees_gpus_through_nvml() {
    if !docker_available("doctor_sees_gpus_through_nvml") {
        return;
    }
    let nvml = crate::common::standin::standin(
        "driver 550.54.15\nnvml 12.550.54.15\ndevice GPU-11111111-2222-3333-4444-555555555555 NVIDIA H100 80GB HBM3\n\
         reading gpu=0 mem=0 used=0 total=85899345920 power_mw=0 sm=0 memclk=0 temp=0 throttle=0x0\n",
    );
    let out = run(harness()
        .args(["doctor", "--json", "--nvml-lib"])
        .arg(&nvml.lib));
    let j = json_of(&out);
    let c = check(&j, "nvml");
    assert_eq!(c["level"], "OK", "{c}");
    let found = c["found"].as_str().unwrap();
    assert!(
        found.contains("1 GPU(s), driver 550.54.15: 0 NVIDIA H100 80GB HBM3"),
        "{found}"
    );
}

// ---- images gc ----

fn docker(args: &[&str]) -> std::process::Output {
    let out = Command::new("docker").args(args).output().expect("docker");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn image_exists(name: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", name])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Makes `tag` from the base image with a 100 kB file added, committed with `labels`.
fn make_image(tag: &str, labels: &[(&str, &str)], payload: &Path) {
    let out = docker(&["create", "harness-base:bookworm", "true"]);
    let cid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    docker(&[
        "cp",
        payload.to_str().unwrap(),
        &format!("{cid}:/gc-payload"),
    ]);
    let mut args: Vec<String> = vec!["commit".into()];
    if !labels.is_empty() {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        args.push("--change".into());
        args.push(format!("LABEL {}", l.join(" ")));
    }
    args.push(cid.clone());
    args.push(tag.into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    docker(&refs);
    docker(&["rm", &cid]);
}

/// Removes what the test made, however it ends.
struct Cleanup {
    containers: Vec<String>,
    images: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = Command::new("docker").args(["rm", "-f", c]).output();
        }
        for i in &self.images {
            let _ = Command::new("docker").args(["rmi", i]).output();
        }
    }
}

fn verdict<'a>(j: &'a serde_json::Value, tag: &str) -> &'a serde_json::Value {
    j["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["tags"].as_array().unwrap().iter().any(|t| t == tag))
        .unwrap_or_else(|| panic!("{tag} not in {j}"))
}

#[test]
fn images_gc_removes_only_stale_images_the_harness_made() {
    if !docker_available("images_gc_removes_only_stale_images") {
        return;
    }
    if !image_exists("harness-base:bookworm") {
        if std::env::var_os("CI").is_some() {
            panic!("harness-base:bookworm is missing (CI makes it first)");
        }
        eprintln!("skipping: harness-base:bookworm is missing (any harness run makes it)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let id = format!("gc-test-{}", std::process::id());
    let other = format!("gc-other-{}", std::process::id());
    let ds = tmp.path().join("ds");
    make_task(&ds, &id, SLOW, FAST, "");
    let payload = tmp.path().join("payload");
    std::fs::write(&payload, vec![7u8; 100_000]).unwrap();

    let stale = format!("harness-task/{id}:deadbeef");
    let unlabelled = format!("harness-task/{id}:cafebabe");
    let in_use = format!("harness-task/{id}:inuse");
    let foreign_task = format!("harness-task/{other}:deadbeef");
    let mut cleanup = Cleanup {
        containers: vec![],
        images: vec![
            stale.clone(),
            unlabelled.clone(),
            in_use.clone(),
            foreign_task.clone(),
        ],
    };
    let ours = |task: &str| -> Vec<(String, String)> {
        vec![
            ("org.harness.managed".into(), "true".into()),
            ("org.harness.instance".into(), task.into()),
        ]
    };
    for (tag, labels) in [
        (&stale, ours(&id)),
        (&unlabelled, vec![]),
        (&in_use, ours(&id)),
        (&foreign_task, ours(&other)),
    ] {
        let l: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        make_image(tag, &l, &payload);
    }
    // A container (not started) that uses one of the stale images.
    let user = format!("gc-user-{}", std::process::id());
    docker(&["create", "--name", &user, &in_use, "true"]);
    cleanup.containers.push(user.clone());

    let gc = |extra: &[&str]| {
        let mut c = harness();
        c.args(["images", "gc", "--json", "--dataset"])
            .arg(&ds)
            .arg("--results-dir")
            .arg(tmp.path().join("results"))
            .args(extra);
        run(&mut c)
    };

    // Dry run: says what would go, removes nothing.
    let out = gc(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    let j = json_of(&out);
    assert_eq!(j["dry_run"], true);
    assert_eq!(verdict(&j, &stale)["action"], "remove", "{j}");
    assert!(
        verdict(&j, &stale)["reason"]
            .as_str()
            .unwrap()
            .contains("outdated"),
        "{j}"
    );
    assert!(
        verdict(&j, &stale)["bytes"].as_u64().unwrap() >= 100_000,
        "{j}"
    );
    let kept = verdict(&j, &in_use);
    assert_eq!(kept["action"], "keep", "{j}");
    assert!(kept["reason"].as_str().unwrap().contains(&user), "{kept}");
    assert_eq!(verdict(&j, &foreign_task)["action"], "keep", "{j}");
    assert!(
        j["images"].as_array().unwrap().iter().all(|i| !i["tags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == &unlabelled)),
        "an unlabelled image is not even looked at: {j}"
    );
    assert!(image_exists(&stale), "a dry run removes nothing");
    // --all-tasks would also take the other task's image (dry run: nothing removed).
    let j = json_of(&gc(&["--dry-run", "--all-tasks"]));
    assert_eq!(verdict(&j, &foreign_task)["action"], "remove", "{j}");
    assert_eq!(verdict(&j, &in_use)["action"], "keep", "{j}");

    // For real.
    let out = gc(&[]);
    assert_eq!(out.status.code(), Some(0));
    let j = json_of(&out);
    assert_eq!(verdict(&j, &stale)["action"], "remove", "{j}");
    assert!(j["bytes_freed"].as_u64().unwrap() >= 100_000, "{j}");
    assert!(!image_exists(&stale), "the stale labelled image is gone");
    assert!(
        image_exists(&unlabelled),
        "an unlabelled image of the same name is untouched"
    );
    assert!(image_exists(&in_use), "an image a container uses is kept");
    assert!(
        image_exists(&foreign_task),
        "another task's image is kept without --all-tasks"
    );
    let containers = docker(&["ps", "-a", "-q", "--filter", &format!("name={user}")]);
    assert!(
        !containers.stdout.is_empty(),
        "no container is removed but killed runs'"
    );

    // The text form reports the space freed.
    make_image(
        &stale,
        &[
            ("org.harness.managed", "true"),
            ("org.harness.instance", &id),
        ],
        &payload,
    );
    let out = run(harness()
        .args(["images", "gc", "--dataset"])
        .arg(&ds)
        .arg("--results-dir")
        .arg(tmp.path().join("results")));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("removed {stale} (outdated")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("freed ") && l.contains("kB")),
        "{text}"
    );
    assert!(!image_exists(&stale));
    drop(cleanup);
    assert!(!image_exists(&in_use) && !image_exists(&unlabelled));
}

// ---- opt-at-k's CI outputs, on a run that starts no container ----

/// One GPU task: on this host (no NVML) it ends `error`, or `skipped` with --skip-gpu,
/// before any image or container is made.
fn gpu_run(tmp: &Path, run_id: &str, extra: &[&str]) -> std::process::Output {
    let ds = tmp.join("ds");
    if !ds.exists() {
        make_gpu_task(&ds, "gpu-task");
    }
    let human = std::fs::read_to_string(ds.join("gpu-task/human.patch")).unwrap();
    let p = tmp.join("p.jsonl");
    predictions(&p, &[("gpu-task", Some(&human))]);
    let mut cmd = harness();
    cmd.args([
        "opt-at-k",
        "--model",
        "test-model",
        "--k",
        "1",
        "--run-id",
        run_id,
    ])
    .arg("--predictions")
    .arg(&p)
    .arg("--dataset")
    .arg(&ds)
    .arg("--results-dir")
    .arg(tmp.join("out"))
    .arg("--nvml-lib")
    .arg(tmp.join("no-libnvidia-ml.so.1"))
    .args(extra)
    .env_remove("HARNESS_NVML_LIB");
    run(&mut cmd)
}

#[test]
fn opt_at_k_writes_junit_and_gates_its_exit_code() {
    if !docker_available("opt_at_k_writes_junit") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let junit = tmp.path().join("junit.xml");
    let j = junit.to_str().unwrap();

    // Bad thresholds are bad input, before anything runs.
    let out = gpu_run(tmp.path(), "ci-bad", &["--fail-under", "opt@2=10"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside 1..1"));
    assert!(!tmp.path().join("out/ci-bad").exists(), "nothing ran");

    // Skipped (not attempted): the run completes; Opt@1 = 0 of 0 instances.
    let out = gpu_run(
        tmp.path(),
        "ci-skip",
        &["--skip-gpu", "--junit", j, "--fail-under", "opt@1=0"],
    );
    assert_eq!(out.status.code(), Some(0), "0% >= 0%");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\""),
        "{xml}"
    );
    assert!(
        xml.contains("<testcase classname=\"gpu-task\" name=\"sample 0\""),
        "{xml}"
    );
    let out = gpu_run(
        tmp.path(),
        "ci-skip",
        &[
            "--skip-gpu",
            "--fail-under",
            "opt@1=0",
            "--fail-under",
            "pass@1=1",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "pass@1 0% < 1%: below threshold"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("fail-under pass@1: 0.00% < 1% MISSED"));

    // Without --skip-gpu the sample ends `error`: exit 1 wins over a missed threshold.
    let out = gpu_run(
        tmp.path(),
        "ci-error",
        &["--junit", j, "--fail-under", "pass@1=50"],
    );
    assert_eq!(out.status.code(), Some(1));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\""),
        "{xml}"
    );
    assert!(xml.contains("type=\"error\""), "{xml}");
    assert!(containers_of_run("ci-error").is_empty());
}

/// A run whose install may write more than Docker's data root has free (one task with an
/// install asking `resources.disk = "100000g"`) is refused before anything is built or
/// started, naming both figures and what to change; `--disk-check off` says so and runs it.
#[test]
fn a_run_whose_containers_may_not_fit_on_disk_is_refused_before_it_starts() {
    if !docker_available("a_run_whose_containers_may_not_fit_on_disk") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(
        &ds,
        "huge-disk",
        SLOW,
        FAST,
        "[install]\ncommands = [\"true\"]\n",
    );
    let toml = ds.join("huge-disk/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace("pids = 128\n", "pids = 128\ndisk = \"100000g\"\n"),
    )
    .unwrap();
    let preds = tmp.path().join("p.jsonl");
    predictions(&preds, &[("huge-disk", Some(&diff("mod.py", SLOW, FAST)))]);
    let out = tmp.path().join("out");
    let opt_at_k = |run_id: &str, extra: &[&str]| {
        run(harness()
            .args([
                "opt-at-k",
                "--model",
                "test-model",
                "--k",
                "1",
                "--run-id",
                run_id,
            ])
            .args(extra)
            .arg("--dataset")
            .arg(&ds)
            .arg("--predictions")
            .arg(&preds)
            .arg("--results-dir")
            .arg(&out)
            // A cache of its own: no earlier run's measured install in the forecast.
            .env("HARNESS_CACHE_DIR", tmp.path().join("cache")))
    };

    let o = opt_at_k("disk-refused", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    for needle in [
        "not enough free disk",
        "on Docker's data root",
        "is free",
        "huge-disk: 3 variant(s) x up to 11 container(s) x ",
        "(install not measured yet)",
        "an install in flight may write up to resources.disk 100000.0 GiB",
        "--replicas",
        "--disk-check off",
    ] {
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
    }
    assert!(containers_of_run("disk-refused").is_empty());
    assert!(
        !out.join("disk-refused/run.json").exists(),
        "refused before run.json says a run began"
    );
    // The count follows --replicas: one container per variant.
    let o = opt_at_k("disk-refused", &["--replicas", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("3 variant(s) x up to 1 container(s)"), "{err}");

    // Off: a warning with the same figures, and the run goes ahead.
    let o = opt_at_k(
        "disk-off",
        &[
            "--disk-check",
            "off",
            "--replicas",
            "1",
            "--min-rounds",
            "3",
            "--max-rounds",
            "3",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("not enough free disk") && err.contains("--disk-check off: starting anyway"),
        "{err}"
    );
    assert!(
        out.join("disk-off/test-model/huge-disk/0/report.json")
            .is_file()
    );
    assert!(containers_of_run("disk-off").is_empty());
}

/// With the defaults (no `disk` key: 4 GiB a container) a task with five variants starts on
/// a machine whose disk holds far less than their limits (5 variants x up to 11 containers
/// x 4 GiB = 220 GiB, where this machine has about 80 GiB free): the check counts what the
/// containers write, and each install starts only with room for its own limit. What the
/// install wrote is kept in the harness's cache by task image: the next run's forecast.
#[test]
fn a_run_is_checked_against_what_it_writes_and_installs_are_measured() {
    if !docker_available("a_run_is_checked_against_what_it_writes") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(
        &ds,
        "five",
        SLOW,
        FAST,
        "[install]\ncommands = [\"dd if=/dev/zero of=built.bin bs=1M count=24 status=none\"]\n",
    );
    let preds = tmp.path().join("p.jsonl");
    let fast = diff("mod.py", SLOW, FAST);
    predictions(
        &preds,
        &[("five", Some(&fast)), ("five", Some(&fast)), ("five", None)],
    );
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let o = run(harness()
        .args(["opt-at-k", "--model", "test-model", "--k", "3"])
        .args(["--run-id", "five", "--dataset"])
        .arg(&ds)
        .arg("--predictions")
        .arg(&preds)
        .arg("--results-dir")
        .arg(&out)
        .env("HARNESS_CACHE_DIR", &cache));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("not enough free disk"), "{err}");
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("five/test-model/five/0/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["status"], "passed", "{report}");
    let kept: std::collections::BTreeMap<String, u64> = serde_json::from_slice(
        &std::fs::read(cache.join("install-writes.json")).expect("installs measured"),
    )
    .unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let (image, bytes) = kept.iter().next().unwrap();
    assert!(image.contains("five"), "{image}");
    assert!(
        (24 << 20..64 << 20).contains(bytes),
        "the install wrote 24 MiB: {bytes}"
    );
    assert!(containers_of_run("five").is_empty());
}

/// GSO's and ISO-Bench's `opt_at_k.py` spellings: `--model_name`, `--prediction_paths` (one
/// rollout a file, natural order, the first --k), `--run_id`, `--instance_ids`, `--timeout`
/// (the instance's wall limit: past it, its containers go and its samples end `error`).
#[test]
fn gso_spellings_run_as_gsos_opt_at_k() {
    if !docker_available("gso_spellings_run_as_gsos_opt_at_k") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "spelled", SLOW, FAST, "");
    let fast = diff("mod.py", SLOW, FAST);
    // Rollout files name their own model; each is one rollout of --model_name.
    let run_2 = tmp.path().join("m-run_2.jsonl");
    let run_10 = tmp.path().join("m-run_10.jsonl");
    predictions(&run_2, &[("spelled", Some(&fast))]);
    predictions(&run_10, &[("spelled", None)]);
    let out = tmp.path().join("out");
    let gso = |run_id: &str, timeout: &str| {
        run(harness()
            .args(["opt-at-k", "--model_name", "M", "--prediction_paths"])
            .arg(&run_10)
            .arg(&run_2)
            .args(["--run_id", run_id, "--timeout", timeout, "--k", "2"])
            .args(["--instance_ids", "spelled", "--dataset"])
            .arg(&ds)
            .arg("--results-dir")
            .arg(&out))
    };
    let o = gso("r", "3600");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let status = |run_id: &str, sample: u32| {
        let path = out.join(format!("{run_id}/M/spelled/{sample}/report.json"));
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        (
            r["status"].as_str().unwrap_or("").to_string(),
            r.to_string(),
        )
    };
    // Natural order: run_2 is sample 0, run_10 sample 1.
    assert_eq!(status("r", 0).0, "passed", "{}", status("r", 0).1);
    assert_eq!(status("r", 1).0, "empty_patch", "{}", status("r", 1).1);

    // One second for the whole instance: nothing is decided, no container stays; the
    // limit is the run's, so the samples end `error` (exit 1) and a repeat runs them again.
    let o = gso("short", "1");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let (st, report) = status("short", 0);
    assert_eq!(st, "error", "{report}\n{err}");
    assert!(report.contains("longer than --timeout 1 s"), "{report}");
    assert!(containers_of_run("short").is_empty());
    let o = gso("short", "3600");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(status("short", 0).0, "passed", "{}", status("short", 0).1);
}
