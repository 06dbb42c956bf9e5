//! GPU telemetry through the real `nvml-wrapper` code path, against `nvml-standin` (a scripted
//! stand-in for `libnvidia-ml.so.1` in this workspace), so no GPU is needed.
//!
//! The stand-in is built once per test process with `cargo build -p nvml-standin` into its own
//! target directory under `CARGO_TARGET_TMPDIR` (a separate build lock, so the outer `cargo test`
//! cannot deadlock with it). Each test copies the library into its own temporary directory next to
//! its own script (`nvml-standin.script`): a copy is a separate file, so `dlopen` gives each test a
//! fresh instance with its own state, and tests can run in parallel.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::common::standin::{
    BASE, Nvml, R, UUID0, UUID1, device, install, script, standin, standin_lib_without_power,
};

use harness::telemetry::{
    DeviceSelector, GpuInfo, GpuSample, ManualClock, RunTag, Sampler, SamplerConfig, Stat,
    TelemetryError, TelemetryLine, probe_gpus,
};

fn tag(run: u32) -> RunTag {
    RunTag {
        variant: "patched".into(),
        round: 2,
        run,
    }
}

/// A sampler on `nvml` that samples only when told, stamped by the returned clock.
async fn manual_sampler(nvml: &Nvml, devices: &[u32]) -> (Sampler, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let config = SamplerConfig {
        lib_path: Some(nvml.lib.clone()),
        devices: devices.iter().map(|&i| DeviceSelector::Index(i)).collect(),
        interval: None,
        clock: clock.clone(),
    };
    let sampler = Sampler::start(config).await.unwrap();
    (sampler, clock)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn assert_stat(stat: Option<Stat>, mean: f64, max: f64, what: &str) {
    let stat = stat.unwrap_or_else(|| panic!("{what}: no values"));
    assert!(
        close(stat.mean, mean) && close(stat.max, max),
        "{what}: {stat:?}, expected mean {mean} max {max}"
    );
}

#[tokio::test]
async fn fingerprint_names_uuids_and_driver() {
    let nvml = standin(&script(&[
        device(UUID0, "NVIDIA H100 80GB HBM3", &[BASE], ""),
        device(UUID1, "NVIDIA A100-SXM4-40GB", &[BASE], ""),
    ]));
    let info = |index: u32, name: &str, uuid: &str| GpuInfo {
        index,
        name: name.into(),
        uuid: uuid.into(),
        driver_version: "550.54.15".into(),
        nvml_version: Some("12.550.54.15".into()),
    };
    let all = probe_gpus(Some(&nvml.lib)).unwrap();
    assert_eq!(
        all,
        [
            info(0, "NVIDIA H100 80GB HBM3", UUID0),
            info(1, "NVIDIA A100-SXM4-40GB", UUID1)
        ]
    );

    // Selected by UUID and by index, in selection order, each once.
    let config = SamplerConfig {
        lib_path: Some(nvml.lib.clone()),
        devices: vec![
            DeviceSelector::Uuid(UUID1.into()),
            DeviceSelector::Index(0),
            DeviceSelector::Index(1),
        ],
        interval: None,
        clock: Arc::new(ManualClock::new()),
    };
    let sampler = Sampler::start(config).await.unwrap();
    assert_eq!(
        sampler.gpus(),
        [
            info(1, "NVIDIA A100-SXM4-40GB", UUID1),
            info(0, "NVIDIA H100 80GB HBM3", UUID0)
        ]
    );
}

#[tokio::test]
async fn every_field_comes_through_exactly() {
    let d0 = [
        R {
            gpu: 10,
            mem: 5,
            used: 1_000_000_000,
            total: 80_000_000_000,
            power_mw: 100_000,
            sm: 1410,
            memclk: 2619,
            temp: 40,
            throttle: 0x1,
            energy_mj: 1_000_000,
        },
        R {
            gpu: 90,
            mem: 45,
            used: 3_000_000_000,
            total: 80_000_000_000,
            power_mw: 200_000,
            sm: 1980,
            memclk: 2619,
            temp: 55,
            throttle: 0x0,
            energy_mj: 1_025_000,
        },
        R {
            gpu: 80,
            mem: 40,
            used: 2_000_000_000,
            total: 80_000_000_000,
            power_mw: 300_500,
            sm: 1755,
            memclk: 1593,
            temp: 61,
            throttle: 0x4,
            energy_mj: 1_055_000,
        },
    ];
    let d1 = [
        R {
            gpu: 1,
            mem: 2,
            used: 7,
            total: 40_000_000_000,
            power_mw: 50_000,
            sm: 210,
            memclk: 405,
            temp: 30,
            throttle: 0x0,
            energy_mj: 5_000,
        },
        R {
            gpu: 3,
            mem: 4,
            used: 9,
            total: 40_000_000_000,
            power_mw: 50_000,
            sm: 1095,
            memclk: 1215,
            temp: 31,
            throttle: 0x0,
            energy_mj: 10_000,
        },
        R {
            gpu: 5,
            mem: 6,
            used: 11,
            total: 40_000_000_000,
            power_mw: 80_000,
            sm: 1410,
            memclk: 1215,
            temp: 33,
            throttle: 0x10,
            energy_mj: 18_000,
        },
    ];
    let nvml = standin(&script(&[
        device(UUID0, "NVIDIA H100 80GB HBM3", &d0, ""),
        device(UUID1, "NVIDIA A100-SXM4-40GB", &d1, ""),
    ]));
    let (sampler, clock) = manual_sampler(&nvml, &[0, 1]).await;
    clock.set(Duration::from_millis(7000));
    sampler.start_run(tag(4)).await.unwrap();
    clock.set(Duration::from_millis(7100));
    sampler.sample_now().await.unwrap();
    clock.set(Duration::from_millis(7200));
    let report = sampler.end_run().await.unwrap();

    assert_eq!(report.tag, tag(4));
    assert!(close(report.duration_s, 0.2), "{}", report.duration_s);
    let times = [0.0, 0.1, 0.2];
    let expected = |k: usize, index: u32, uuid: &str, r: &R, names: &[&str], flagged: bool| {
        let s = &report.samples[k];
        assert!(close(s.t, times[k / 2]), "sample {k}: t {}", s.t);
        let want = GpuSample {
            t: s.t,
            device_index: index,
            uuid: uuid.into(),
            gpu_util: Some(r.gpu),
            mem_util: Some(r.mem),
            mem_used_bytes: Some(r.used),
            mem_total_bytes: Some(r.total),
            power_w: Some(f64::from(r.power_mw) / 1000.0),
            sm_clock_mhz: Some(r.sm),
            mem_clock_mhz: Some(r.memclk),
            temperature_c: Some(r.temp),
            throttle_bits: Some(r.throttle),
            throttle_reasons: names.iter().map(|n| n.to_string()).collect(),
            throttled_thermal_or_power: flagged,
            energy_counter_mj: Some(r.energy_mj),
        };
        assert_eq!(*s, want, "sample {k}");
    };
    assert_eq!(report.samples.len(), 6);
    expected(0, 0, UUID0, &d0[0], &["gpu_idle"], false);
    expected(1, 1, UUID1, &d1[0], &[], false);
    expected(2, 0, UUID0, &d0[1], &[], false);
    expected(3, 1, UUID1, &d1[1], &[], false);
    expected(4, 0, UUID0, &d0[2], &["sw_power_cap"], true);
    expected(5, 1, UUID1, &d1[2], &["sync_boost"], false);
    assert_eq!(report.samples[4].power_w, Some(300.5));

    let s0 = report.device(0).unwrap();
    assert_eq!(
        (s0.name.as_str(), s0.uuid.as_str()),
        ("NVIDIA H100 80GB HBM3", UUID0)
    );
    assert_eq!(s0.samples, 3);
    assert_stat(s0.gpu_util, 60.0, 90.0, "gpu_util");
    assert_stat(s0.mem_util, 30.0, 45.0, "mem_util");
    assert_stat(s0.mem_used_bytes, 2e9, 3e9, "mem_used_bytes");
    assert_stat(s0.power_w, 600.5 / 3.0, 300.5, "power_w");
    assert_stat(s0.sm_clock_mhz, 5145.0 / 3.0, 1980.0, "sm_clock_mhz");
    assert_stat(s0.mem_clock_mhz, 6831.0 / 3.0, 2619.0, "mem_clock_mhz");
    assert_stat(s0.temperature_c, 52.0, 61.0, "temperature_c");
    // (100+200)/2*0.1 + (200+300.5)/2*0.1 = 15 + 25.025
    assert!(close(s0.energy_j.unwrap(), 40.025), "{:?}", s0.energy_j);
    // The driver's counter: 1,055,000 - 1,000,000 mJ.
    assert!(
        close(s0.energy_counter_j.unwrap(), 55.0),
        "{:?}",
        s0.energy_counter_j
    );
    assert!(s0.throttled);
    assert_eq!(s0.throttle_reasons, ["gpu_idle", "sw_power_cap"]);
    assert_eq!(s0.incomplete, None);
    assert!(s0.notes.is_empty(), "{:?}", s0.notes);

    let s1 = report.device(1).unwrap();
    assert_stat(s1.gpu_util, 3.0, 5.0, "gpu_util");
    assert_stat(s1.mem_used_bytes, 9.0, 11.0, "mem_used_bytes");
    assert_stat(s1.temperature_c, 94.0 / 3.0, 33.0, "temperature_c");
    // (50+50)/2*0.1 + (50+80)/2*0.1 = 5 + 6.5
    assert!(close(s1.energy_j.unwrap(), 11.5), "{:?}", s1.energy_j);
    assert!(
        close(s1.energy_counter_j.unwrap(), 13.0),
        "{:?}",
        s1.energy_counter_j
    );
    assert!(!s1.throttled, "sync boost is not a thermal or power reason");

    // telemetry.jsonl: one tagged line per sample, every field.
    let mut jsonl = Vec::new();
    report.write_jsonl(&mut jsonl).unwrap();
    let text = String::from_utf8(jsonl).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6);
    for (line, sample) in lines.iter().zip(&report.samples) {
        let parsed: TelemetryLine = serde_json::from_str(line).unwrap();
        assert_eq!(parsed.tag, tag(4));
        assert_eq!(&parsed.sample, sample);
    }
    let v: serde_json::Value = serde_json::from_str(lines[4]).unwrap();
    assert_eq!(v["variant"], "patched");
    assert_eq!((v["round"].as_u64(), v["run"].as_u64()), (Some(2), Some(4)));
    assert_eq!(v["uuid"], UUID0);
    assert_eq!(v["power_w"], 300.5);
    assert_eq!(v["sm_clock_mhz"], 1755);
    assert_eq!(v["mem_used_bytes"], 2_000_000_000u64);
    assert_eq!(v["throttle_reasons"], serde_json::json!(["sw_power_cap"]));
    assert_eq!(v["throttled_thermal_or_power"], true);

    // After the readings run out the last one holds; a second run goes on from there.
    clock.set(Duration::from_millis(9000));
    sampler.start_run(tag(5)).await.unwrap();
    clock.set(Duration::from_millis(9500));
    let again = sampler.end_run().await.unwrap();
    assert_eq!(again.tag, tag(5));
    assert_eq!(again.samples.len(), 4);
    assert!(close(again.samples[2].t, 0.5));
    assert_eq!(again.samples[2].sm_clock_mhz, Some(1755));
    // 300.5 W for 0.5 s.
    assert!(close(again.device(0).unwrap().energy_j.unwrap(), 150.25));
}

#[tokio::test]
async fn energy_is_the_trapezoid_over_uneven_samples() {
    let nvml = standin(&script(&[device(
        UUID0,
        "GPU",
        &[R::power(100_000), R::power(300_000), R::power(200_000)],
        "",
    )]));
    let (sampler, clock) = manual_sampler(&nvml, &[0]).await;
    clock.set(Duration::from_millis(100000));
    sampler.start_run(tag(0)).await.unwrap();
    clock.set(Duration::from_millis(100100));
    sampler.sample_now().await.unwrap();
    clock.set(Duration::from_millis(100400));
    let report = sampler.end_run().await.unwrap();
    // 100 W at 0, 300 W at 0.1, 200 W at 0.4 (the end):
    // (100+300)/2*0.1 + (300+200)/2*0.3 = 20 + 75 = 95 J.
    let energy = report.devices[0].energy_j.unwrap();
    assert!(close(energy, 95.0), "{energy}");
    assert!(close(report.duration_s, 0.4));
}

#[tokio::test]
async fn thermal_and_power_reasons_flag_the_run_and_others_do_not() {
    let flagged = [
        (0x4u64, "sw_power_cap"),
        (0x8, "hw_slowdown"),
        (0x20, "sw_thermal_slowdown"),
        (0x40, "hw_thermal_slowdown"),
        (0x80, "hw_power_brake_slowdown"),
    ];
    let mut devices: Vec<String> = flagged
        .iter()
        .enumerate()
        .map(|(i, (bit, _))| {
            device(
                &format!("GPU-{i}"),
                "GPU",
                // The reason only in the middle sample.
                &[R::throttle(0), R::throttle(*bit), R::throttle(0)],
                "",
            )
        })
        .collect();
    // GPU idle, applications clocks, sync boost, display clock: not throttling.
    let benign = 0x1 | 0x2 | 0x10 | 0x100;
    devices.push(device(
        "GPU-benign",
        "GPU",
        &[R::throttle(benign), R::throttle(0x1), R::throttle(0)],
        "",
    ));
    let nvml = standin(&script(&devices));
    let (sampler, clock) = manual_sampler(&nvml, &[0, 1, 2, 3, 4, 5]).await;
    sampler.start_run(tag(0)).await.unwrap();
    clock.set(Duration::from_millis(100));
    sampler.sample_now().await.unwrap();
    clock.set(Duration::from_millis(200));
    let report = sampler.end_run().await.unwrap();
    for (i, (_, name)) in flagged.iter().enumerate() {
        let d = report.device(i as u32).unwrap();
        assert!(d.throttled, "{name} must flag the run");
        assert_eq!(d.throttle_reasons, [*name]);
    }
    let benign = report.device(5).unwrap();
    assert!(!benign.throttled, "{:?}", benign.throttle_reasons);
    assert_eq!(
        benign.throttle_reasons,
        [
            "gpu_idle",
            "applications_clocks_setting",
            "sync_boost",
            "display_clock_setting"
        ]
    );
    assert!(report.samples.iter().all(|s| s.device_index == 5 || {
        s.throttled_thermal_or_power == (s.t > 0.05 && s.t < 0.15)
    }));
}

#[tokio::test]
async fn a_device_lost_mid_run_marks_only_its_telemetry_incomplete() {
    let nvml = standin(&script(&[
        device(UUID0, "GPU zero", &[R::power(100_000)], ""),
        device(UUID1, "GPU one", &[R::power(200_000)], "lost_after 2\n"),
    ]));
    let (sampler, clock) = manual_sampler(&nvml, &[0, 1]).await;
    sampler.start_run(tag(0)).await.unwrap();
    clock.set(Duration::from_millis(100));
    sampler.sample_now().await.unwrap();
    clock.set(Duration::from_millis(300));
    let report = sampler.end_run().await.unwrap();

    let ok = report.device(0).unwrap();
    assert_eq!((ok.samples, ok.incomplete.as_deref()), (3, None));
    assert!(close(ok.energy_j.unwrap(), 30.0), "{:?}", ok.energy_j);

    let lost = report.device(1).unwrap();
    assert_eq!(lost.samples, 2);
    let reason = lost.incomplete.as_deref().unwrap();
    assert!(reason.contains(UUID1), "{reason}");
    assert!(reason.contains("NVML_ERROR_GPU_IS_LOST"), "{reason}");
    assert!(reason.contains("t=0.300"), "{reason}");
    // 200 W up to its last sample at 0.1 s only: 20 J, not 60 J.
    assert!(close(lost.energy_j.unwrap(), 20.0), "{:?}", lost.energy_j);

    // The next run: the lost device stays incomplete, the other goes on.
    clock.set(Duration::from_millis(1000));
    sampler.start_run(tag(1)).await.unwrap();
    clock.set(Duration::from_millis(1500));
    let next = sampler.end_run().await.unwrap();
    assert_eq!(next.device(0).unwrap().samples, 2);
    assert!(close(next.device(0).unwrap().energy_j.unwrap(), 50.0));
    let gone = next.device(1).unwrap();
    assert_eq!((gone.samples, gone.energy_j), (0, None));
    let reason = gone.incomplete.as_deref().unwrap();
    assert!(reason.starts_with("lost before this run"), "{reason}");
    assert!(next.samples.iter().all(|s| s.device_index == 0));
}

#[tokio::test]
async fn samples_at_the_configured_rate_only_while_a_run_is_active() {
    // Reading k has SM clock k, so the samples show which readings they got.
    let readings: Vec<R> = (0..400)
        .map(|k| R {
            sm: k,
            power_mw: 150_000,
            ..BASE
        })
        .collect();
    let nvml = standin(&script(&[device(UUID0, "GPU", &readings, "")]));
    let mut config = SamplerConfig::new(vec![DeviceSelector::Index(0)]);
    config.lib_path = Some(nvml.lib.clone());
    config.interval = Some(Duration::from_millis(20));
    let sampler = Sampler::start(config).await.unwrap();

    // Idle before the run: nothing is sampled.
    tokio::time::sleep(Duration::from_millis(100)).await;
    sampler.start_run(tag(0)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = sampler.end_run().await.unwrap();
    let n = report.samples.len();
    assert!(report.duration_s >= 0.3, "{}", report.duration_s);
    // 300 ms at 20 ms: about 16; a loaded machine may do fewer, never more than 1 + 300/20 + 1.
    assert!(
        (5..=2 + (report.duration_s / 0.02) as usize).contains(&n),
        "{n} samples in {} s",
        report.duration_s
    );
    for (k, s) in report.samples.iter().enumerate() {
        assert_eq!(s.sm_clock_mhz, Some(k as u32), "sample {k}");
    }
    assert_eq!(report.samples[0].t, 0.0);
    assert!(report.samples.windows(2).all(|w| w[0].t < w[1].t));
    assert_eq!(report.samples[n - 1].t, report.duration_s);
    // Constant 150 W: energy is 150 W times the run's length whatever the sample times.
    let energy = report.devices[0].energy_j.unwrap();
    assert!(
        (energy - 150.0 * report.duration_s).abs() < 1e-6,
        "{energy}"
    );

    // Idle after the run: the next run's first sample is the next reading.
    tokio::time::sleep(Duration::from_millis(100)).await;
    sampler.start_run(tag(1)).await.unwrap();
    let next = sampler.end_run().await.unwrap();
    assert_eq!(next.samples[0].sm_clock_mhz, Some(n as u32));
}

#[tokio::test]
async fn an_unreadable_field_is_null_with_a_note() {
    let nvml = standin(&script(&[device(
        UUID0,
        "GPU",
        &[R {
            temp: 50,
            ..R::power(100_000)
        }],
        "unsupported nvmlDeviceGetPowerUsage\n",
    )]));
    let (sampler, clock) = manual_sampler(&nvml, &[0]).await;
    sampler.start_run(tag(0)).await.unwrap();
    clock.set(Duration::from_millis(1000));
    let report = sampler.end_run().await.unwrap();
    assert!(report.samples.iter().all(|s| s.power_w.is_none()));
    assert!(report.samples.iter().all(|s| s.temperature_c == Some(50)));
    let d = &report.devices[0];
    assert_eq!(
        (d.power_w, d.energy_j, d.incomplete.as_deref()),
        (None, None, None)
    );
    assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
    assert!(
        d.notes[0].contains("nvmlDeviceGetPowerUsage"),
        "{:?}",
        d.notes
    );
    let line = &report.jsonl_lines()[0];
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["power_w"], serde_json::Value::Null);
}

#[tokio::test]
async fn the_library_missing_is_a_clear_error() {
    let missing = PathBuf::from("/nonexistent/nvidia/libnvidia-ml.so.1");
    let config = SamplerConfig {
        lib_path: Some(missing.clone()),
        devices: vec![DeviceSelector::Index(0)],
        interval: None,
        clock: Arc::new(ManualClock::new()),
    };
    let err = Sampler::start(config).await.err().unwrap();
    assert!(
        matches!(&err, TelemetryError::LibraryNotFound { path, .. } if path == "/nonexistent/nvidia/libnvidia-ml.so.1"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with("NVML not found at /nonexistent/nvidia/libnvidia-ml.so.1: "),
        "{msg}"
    );
    assert!(msg.contains("Install the NVIDIA driver"), "{msg}");
    assert!(matches!(
        probe_gpus(Some(&missing)),
        Err(TelemetryError::LibraryNotFound { .. })
    ));
}

#[tokio::test]
async fn a_missing_symbol_is_named() {
    let nvml = install(
        standin_lib_without_power(),
        &script(&[device(UUID0, "GPU", &[BASE], "")]),
    );
    let config = SamplerConfig {
        lib_path: Some(nvml.lib.clone()),
        devices: vec![DeviceSelector::Index(0)],
        interval: None,
        clock: Arc::new(ManualClock::new()),
    };
    let err = Sampler::start(config).await.err().unwrap();
    assert!(
        matches!(&err, TelemetryError::SymbolMissing { symbol, .. } if symbol == "nvmlDeviceGetPowerUsage"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("lacks the symbol nvmlDeviceGetPowerUsage"),
        "{msg}"
    );
    // The fingerprint does not need power readings.
    assert_eq!(probe_gpus(Some(&nvml.lib)).unwrap().len(), 1);
}

#[tokio::test]
async fn misuse_and_missing_devices_are_errors_not_panics() {
    let nvml = standin(&script(&[device(UUID0, "GPU", &[BASE], "")]));
    let (sampler, _clock) = manual_sampler(&nvml, &[0]).await;
    assert_eq!(
        sampler.end_run().await.err(),
        Some(TelemetryError::NoActiveRun)
    );
    assert_eq!(
        sampler.sample_now().await.err(),
        Some(TelemetryError::NoActiveRun)
    );
    sampler.start_run(tag(0)).await.unwrap();
    assert_eq!(
        sampler.start_run(tag(1)).await.err(),
        Some(TelemetryError::RunActive(tag(0)))
    );
    assert_eq!(sampler.end_run().await.unwrap().tag, tag(0));

    for selector in [
        DeviceSelector::Index(3),
        DeviceSelector::Uuid("GPU-nope".into()),
    ] {
        let config = SamplerConfig {
            lib_path: Some(nvml.lib.clone()),
            devices: vec![selector.clone()],
            interval: None,
            clock: Arc::new(ManualClock::new()),
        };
        let err = Sampler::start(config).await.err().unwrap();
        assert!(
            matches!(&err, TelemetryError::DeviceNotFound { selector: s, .. } if *s == selector.to_string()),
            "{err:?}"
        );
    }

    // A script the stand-in cannot read: NVML fails to initialise.
    let broken = standin("device GPU-x GPU\nreading gpu=1\n");
    let err = probe_gpus(Some(&broken.lib)).err().unwrap();
    assert!(matches!(err, TelemetryError::Init { .. }), "{err:?}");
}
