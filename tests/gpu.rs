//! GPU tasks on this GPU-less engine: the device request the harness makes (seen in the
//! container's inspect data), and a dataset mixing CPU and GPU tasks, where the GPU task gets
//! one clear message (`error`, or `skipped` with `--skip-gpu`) and the CPU task finishes.

use std::collections::HashMap;

use crate::common::standin::{Nvml, R, UUID0, UUID1, device, script, standin};
use crate::common::*;
use harness::core::task::Resources;
use harness::sandbox::docker::Engine;
use harness::sandbox::docker::container::Sandbox;
use harness::sandbox::docker::spec::{GpuRequest, SandboxSpec};

#[tokio::test]
async fn containers_carry_a_device_request_with_exactly_the_assigned_ids() {
    if !docker_available("containers_carry_a_device_request") {
        return;
    }
    let engine = Engine::connect().await.unwrap();
    let spec = SandboxSpec {
        image: "harness-base:bookworm".into(),
        name_hint: "gpu-request".into(),
        labels: HashMap::new(),
        resources: Resources {
            cpus: 1.0,
            memory_bytes: 256 << 20,
            pids: 64,
            network: false,
            gpus: 2,
            disk_bytes: 1 << 30,
        },
        cpuset: None,
        gpu_ids: vec!["0".into(), "2".into()],
        env: Vec::new(),
        binds: Vec::new(),
    };
    let sandbox = Sandbox::create(&engine, &spec).await.unwrap();
    let requests = sandbox.device_requests().await.unwrap();
    sandbox.remove().await.unwrap();
    assert_eq!(
        requests,
        vec![GpuRequest {
            driver: "nvidia".into(),
            device_ids: vec!["0".into(), "2".into()],
            count: requests[0].count,
            capabilities: vec![vec!["gpu".into()]],
        }]
    );
    assert_eq!(requests[0].count.unwrap_or(0), 0, "ids, not a count");

    // A CPU task's container asks for no device.
    let cpu = SandboxSpec {
        gpu_ids: Vec::new(),
        ..spec.clone()
    };
    let sandbox = Sandbox::create(&engine, &cpu).await.unwrap();
    let none = sandbox.device_requests().await.unwrap();
    sandbox.remove().await.unwrap();
    assert!(none.is_empty(), "{none:?}");

    // Started on an engine without the NVIDIA runtime: a clear failure, nothing left.
    if !engine
        .runtimes()
        .await
        .unwrap()
        .iter()
        .any(|r| r == "nvidia")
    {
        let err = match Sandbox::start(&engine, &spec).await {
            Ok(_) => panic!("a GPU container started on an engine without the NVIDIA runtime"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains("nvidia"), "{err}");
        assert!(engine.live_containers().is_empty());
    }
}

/// A dataset with one CPU task and one GPU task (same code; the GPU one names a CUDA base
/// image this machine does not have, which must not be fetched or built).
fn mixed_dataset(root: &std::path::Path) {
    make_task(root, "cpu-task", SLOW, FAST, "");
    make_gpu_task(root, "gpu-task");
}

fn run_mixed(
    tmp: &std::path::Path,
    run_id: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Output, std::path::PathBuf) {
    let ds = tmp.join("ds");
    if !ds.exists() {
        mixed_dataset(&ds);
    }
    let human = std::fs::read_to_string(ds.join("cpu-task/human.patch")).unwrap();
    let p = tmp.join("p.jsonl");
    predictions(
        &p,
        &[("cpu-task", Some(&human)), ("gpu-task", Some(&human))],
    );
    let results = tmp.join("out");
    let mut cmd = harness();
    cmd.args([
        "opt-at-k",
        "--model",
        "test-model",
        "--k",
        "1",
        "--run-id",
        run_id,
        "--replicas",
        "2",
        "--min-rounds",
        "5",
        "--max-rounds",
        "6",
    ])
    .args(extra)
    .arg("--predictions")
    .arg(&p)
    .arg("--dataset")
    .arg(&ds)
    .arg("--results-dir")
    .arg(&results)
    .env_remove("HARNESS_NVML_LIB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    (run(&mut cmd), results)
}

#[test]
fn a_gpu_task_without_gpus_gets_a_clear_error_and_cpu_tasks_finish() {
    if !docker_available("a_gpu_task_without_gpus") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // No NVML on this machine: the library cannot be loaded.
    let missing = tmp.path().join("no-such-libnvidia-ml.so");
    let (out, results) = run_mixed(
        tmp.path(),
        "mixed",
        &[],
        &[("HARNESS_NVML_LIB", missing.to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an `error` sample: exit 1\n{stderr}"
    );
    let rep = |id: &str| read_json(&results.join(format!("mixed/test-model/{id}/0/report.json")));
    let gpu = rep("gpu-task");
    assert_eq!(gpu["status"], "error", "{gpu}");
    let detail = gpu["detail"].as_str().unwrap();
    assert!(detail.contains("needs 1 GPU(s)"), "{detail}");
    assert!(detail.contains("NVML"), "{detail}");
    assert!(detail.contains("NVIDIA Container Toolkit"), "{detail}");
    assert!(
        stderr.contains("GPU task(s) cannot run on this host"),
        "said once, up front: {stderr}"
    );
    let cpu = rep("cpu-task");
    assert_eq!(cpu["status"], "passed", "{cpu}");
    assert!(cpu["measured_rounds"].as_u64().unwrap() >= 5, "{cpu}");
    // The CUDA image was neither pulled nor built.
    let images = std::process::Command::new("docker")
        .args(["images", "-q", "nvidia/cuda"])
        .output()
        .unwrap();
    assert!(images.stdout.is_empty());
    let summary = read_json(&results.join("mixed/test-model.mixed.report.json"));
    assert_eq!(summary["complete"], false, "{summary}");
    assert!(containers_of_run("mixed").is_empty());

    // --skip-gpu: the GPU task is skipped and reported apart; the run is complete.
    let (out, results) = run_mixed(
        tmp.path(),
        "mixed-skip",
        &["--skip-gpu", "--json"],
        &[("HARNESS_NVML_LIB", missing.to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let gpu = read_json(&results.join("mixed-skip/test-model/gpu-task/0/report.json"));
    assert_eq!(gpu["status"], "skipped", "{gpu}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let totals = if json.get("totals").is_some() {
        &json["totals"]
    } else {
        &json
    };
    assert_eq!(
        totals["skipped_ids"],
        serde_json::json!(["gpu-task"]),
        "{json}"
    );
    assert_eq!(totals["total_instances"], 1, "{json}");
    assert_eq!(totals["complete"], true, "{json}");
    assert!(containers_of_run("mixed-skip").is_empty());
}

/// NVML answers (the stand-in, one scripted H100) but the engine has no NVIDIA runtime:
/// the message says that, the fingerprint is untouched, and `--gpus` naming a device NVML
/// does not list is its own clear message.
#[test]
fn nvml_answering_without_the_nvidia_runtime_is_named_as_such() {
    if !docker_available("nvml_answering_without_the_nvidia_runtime") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let nvml = crate::common::standin::standin(
        "driver 550.54.15\nnvml 12.550.54.15\ndevice GPU-11111111-2222-3333-4444-555555555555 NVIDIA H100 80GB HBM3\n\
         reading gpu=50 mem=10 used=1073741824 total=85899345920 power_mw=300000 sm=1980 memclk=2619 temp=40 throttle=0x0\n",
    );
    let lib = nvml.lib.to_str().unwrap().to_string();
    let (out, results) = run_mixed(
        tmp.path(),
        "no-runtime",
        &["--instance-ids", "gpu-task"],
        &[("HARNESS_NVML_LIB", &lib)],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gpu = read_json(&results.join("no-runtime/test-model/gpu-task/0/report.json"));
    assert_eq!(gpu["status"], "error", "{gpu}");
    let detail = gpu["detail"].as_str().unwrap();
    assert!(detail.contains("no NVIDIA runtime"), "{detail}");
    assert!(detail.contains("nvidia-ctk runtime configure"), "{detail}");

    let (out, results) = run_mixed(
        tmp.path(),
        "bad-gpus",
        &["--instance-ids", "gpu-task", "--gpus", "3"],
        &[("HARNESS_NVML_LIB", &lib)],
    );
    assert_eq!(out.status.code(), Some(1));
    let gpu = read_json(&results.join("bad-gpus/test-model/gpu-task/0/report.json"));
    let detail = gpu["detail"].as_str().unwrap();
    assert!(
        detail.contains(
            "--gpus names device 3, which NVML does not list (devices: 0 (NVIDIA H100 80GB HBM3))"
        ),
        "{detail}"
    );
}

// `harness gpu probe`: the binary, a command on this host, the stand-in as its NVML.

/// Runs `harness gpu probe` with `args` before `--` and `command` after it; its exit code,
/// stdout and stderr, and the JSON report it wrote.
fn gpu_probe(
    nvml: &Nvml,
    args: &[&str],
    command: &[&str],
) -> (Option<i32>, String, String, Option<serde_json::Value>) {
    let out = nvml.dir.path().join("probe.json");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["gpu", "probe", "--nvml-lib"])
        .arg(&nvml.lib)
        .arg("--out")
        .arg(&out)
        .args(args)
        .arg("--")
        .args(command)
        .env_remove("HARNESS_NVML_LIB")
        .output()
        .unwrap();
    let report = std::fs::read_to_string(&out)
        .ok()
        .map(|text| serde_json::from_str(&text).unwrap());
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        report,
    )
}

/// The trapezoid integral of `(t, watts)` over 0..end, the first and last readings held to
/// the edges: the test's own reckoning of what the probe reports.
fn integral(points: &[(f64, f64)], end: f64) -> f64 {
    let mut e = points[0].1 * points[0].0;
    for w in points.windows(2) {
        e += (w[0].1 + w[1].1) / 2.0 * (w[1].0 - w[0].0);
    }
    e + points[points.len() - 1].1 * (end - points[points.len() - 1].0)
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn gpu_probe_reports_every_field_of_a_command_run() {
    let readings = [
        R {
            gpu: 10,
            mem: 5,
            used: 1 << 30,
            total: 80 << 30,
            power_mw: 100_000,
            sm: 1410,
            memclk: 2619,
            temp: 40,
            throttle: 0x1,
            energy_mj: 500_000,
        },
        R {
            gpu: 90,
            mem: 45,
            used: 3 << 30,
            total: 80 << 30,
            power_mw: 300_000,
            sm: 1980,
            memclk: 2619,
            temp: 61,
            throttle: 0x4,
            energy_mj: 530_000,
        },
    ];
    let nvml = standin(&script(&[device(
        UUID0,
        "NVIDIA H100 80GB HBM3",
        &readings,
        "",
    )]));
    let (code, stdout, stderr, report) = gpu_probe(
        &nvml,
        &["--interval-ms", "20"],
        &["sh", "-c", "echo from-the-command; sleep 0.3; exit 3"],
    );
    assert_eq!(code, Some(3), "the command's exit code; stderr: {stderr}");
    let report = report.expect("the JSON report is written whatever the command's status");
    assert!(stdout.contains("from-the-command"), "{stdout}");
    assert_eq!(report["exit_code"], 3);
    assert_eq!(report["interval_ms"], 20);
    assert_eq!(report["gpus"][0]["driver_version"], "550.54.15");
    let wall = f(&report["wall_s"]);
    assert!(wall >= 0.3, "{wall}");
    let d = &report["devices"][0];
    let samples = report["samples"].as_array().unwrap();
    let n = samples.len();
    assert_eq!(d["samples"], n);
    // 300 ms at 20 ms: about 16 rounds; never more than one per interval plus the two ends.
    assert!((5..=2 + (wall / 0.02) as usize).contains(&n), "{n}");
    // Sample k has reading k, the last reading held: every field as scripted.
    for (k, s) in samples.iter().enumerate() {
        let r = &readings[k.min(1)];
        assert_eq!(s["gpu_util"], r.gpu, "sample {k}");
        assert_eq!(s["mem_util"], r.mem, "sample {k}");
        assert_eq!(s["mem_used_bytes"], r.used, "sample {k}");
        assert_eq!(s["sm_clock_mhz"], r.sm, "sample {k}");
        assert_eq!(s["mem_clock_mhz"], r.memclk, "sample {k}");
        assert_eq!(s["temperature_c"], r.temp, "sample {k}");
        assert_eq!(s["throttle_bits"], r.throttle, "sample {k}");
        assert_eq!(
            f(&s["power_w"]),
            f64::from(r.power_mw) / 1000.0,
            "sample {k}"
        );
        assert_eq!(s["energy_counter_mj"], r.energy_mj, "sample {k}");
    }
    let nf = n as f64;
    assert!((f(&d["power_w"]["mean"]) - (100.0 + 300.0 * (nf - 1.0)) / nf).abs() < 1e-9);
    assert_eq!(f(&d["power_w"]["max"]), 300.0);
    assert_eq!(f(&d["sm_clock_mhz"]["max"]), 1980.0);
    assert_eq!(f(&d["temperature_c"]["max"]), 61.0);
    assert_eq!(f(&d["gpu_util"]["max"]), 90.0);
    assert_eq!(
        d["throttle_reasons"],
        serde_json::json!(["gpu_idle", "sw_power_cap"])
    );
    assert_eq!(d["throttled"], true);
    // The energy integral, reckoned again from the samples the report holds.
    let points: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| (f(&s["t"]), f(&s["power_w"])))
        .collect();
    let energy = f(&d["energy_j"]);
    assert!((energy - integral(&points, wall)).abs() < 1e-6, "{energy}");
    assert!(energy > 100.0 * wall && energy < 300.0 * wall, "{energy}");
    // The driver's counter: 530,000 - 500,000 mJ; the difference against it, in percent.
    assert_eq!(f(&d["energy_counter_j"]), 30.0);
    let pct = f(&d["energy_difference_pct"]);
    assert!((pct - (energy - 30.0) / 30.0 * 100.0).abs() < 1e-6, "{pct}");
    assert_eq!(d["incomplete"], serde_json::Value::Null);
    for line in [
        "GPU 0 NVIDIA H100 80GB HBM3",
        "J integrated",
        "30.0 J by the driver's counter",
        "gpu_idle, sw_power_cap (thermal or power: clocks were cut)",
        "command exited 3 after",
    ] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
}

#[test]
fn gpu_probe_goes_on_when_a_device_is_lost_mid_run() {
    // GPU 0 has no energy counter (an older GPU); GPU 1 is lost after three readings.
    let nvml = standin(&format!(
        "driver 550.54.15\n\
         device {UUID0} Older GPU\n\
         reading gpu=1 mem=1 used=1 total=10 power_mw=50000 sm=1 memclk=1 temp=30 throttle=0\n\
         device {UUID1} Falling GPU\n\
         reading gpu=1 mem=1 used=1 total=10 power_mw=200000 sm=1 memclk=1 temp=30 throttle=0 \
         energy_mj=1000\n\
         lost_after 3\n"
    ));
    let (code, stdout, stderr, report) =
        gpu_probe(&nvml, &["--interval-ms", "20"], &["sleep", "0.3"]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.unwrap();
    let wall = f(&report["wall_s"]);
    let (old, lost) = (&report["devices"][0], &report["devices"][1]);
    // The older GPU: sampled throughout, no counter (null, with the reason once).
    assert!(old["samples"].as_u64().unwrap() >= 5);
    assert!((f(&old["energy_j"]) - 50.0 * wall).abs() < 1e-6);
    assert_eq!(old["energy_counter_j"], serde_json::Value::Null);
    assert_eq!(old["energy_difference_pct"], serde_json::Value::Null);
    let notes = old["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .contains("nvmlDeviceGetTotalEnergyConsumption")
    );
    // The lost GPU: three samples, the integral ends at its last one, marked incomplete.
    assert_eq!(lost["samples"], 3);
    let last_t = report["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["device_index"] == 1)
        .map(|s| f(&s["t"]))
        .fold(0.0, f64::max);
    assert!(last_t < wall);
    assert!((f(&lost["energy_j"]) - 200.0 * last_t).abs() < 1e-6);
    let why = lost["incomplete"].as_str().unwrap();
    assert!(
        why.contains("GPU 1") && why.contains("NVML_ERROR_GPU_IS_LOST"),
        "{why}"
    );
    assert!(stdout.contains("incomplete: GPU 1"), "{stdout}");
    assert!(stdout.contains("no driver energy counter"), "{stdout}");
    assert!(stdout.contains("wrote "), "{stdout}");
    // -q: the report, not the line saying where it was written.
    let (code, stdout, stderr, _) = gpu_probe(&nvml, &["-q"], &["true"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("wrote "), "{stdout}");
}

#[test]
fn gpu_probe_without_nvml_says_so_and_runs_nothing() {
    let nvml = standin("driver 1\n");
    let marker = nvml.dir.path().join("ran");
    let missing = Nvml {
        lib: nvml.dir.path().join("no-such-libnvidia-ml.so.1"),
        dir: tempfile::tempdir().unwrap(),
    };
    let (code, _, stderr, report) = gpu_probe(&missing, &[], &["touch", marker.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("NVML not found"), "{stderr}");
    assert!(stderr.contains("Install the NVIDIA driver"), "{stderr}");
    assert!(report.is_none());
    assert!(!marker.exists(), "the command ran without telemetry");
    // A stand-in that lists no GPU: said plainly too.
    let (code, _, stderr, _) = gpu_probe(&nvml, &[], &["touch", marker.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("lists no GPU"), "{stderr}");
    assert!(!marker.exists());
}

#[test]
fn gpu_check_script_without_a_driver_fails_plainly() {
    let out = tempfile::tempdir().unwrap();
    let output = std::process::Command::new("bash")
        .arg(crate::common::repo_root().join("scripts/gpu-check.sh"))
        .arg(out.path().join("check"))
        .env("HARNESS", env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_NVML_LIB", out.path().join("no-libnvidia-ml.so.1"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(text.contains("no NVIDIA GPU to check here"), "{text}");
    assert!(text.contains("NVML not found"), "{text}");
}
