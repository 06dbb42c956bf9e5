//! GPU tasks on this GPU-less engine: the device request the harness makes (seen in the
//! container's inspect data), and a dataset mixing CPU and GPU tasks, where the GPU task gets
//! one clear message (`error`, or `skipped` with `--skip-gpu`) and the CPU task finishes.

mod common;

use std::collections::HashMap;

use common::*;
use harness::core::task::Resources;
use harness::sandbox::docker::Engine;
use harness::sandbox::docker::container::{GpuRequest, Sandbox, SandboxSpec};

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
    let nvml = common::standin::standin(
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
