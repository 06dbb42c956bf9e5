//! `harness gpu probe`: runs a command on this host (no container) with the GPU sampler around
//! it, and says what a timed GPU run would record of it: per device power, energy (integrated
//! from NVML's power readings, and by the driver's energy counter where it has one), SM and
//! memory clocks, utilisation, memory, temperature and throttle reasons. A user's first look at
//! a GPU machine, and the way to check the telemetry on real hardware where no Docker engine is.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::core::text::for_terminal;
use crate::telemetry::{
    DeviceSelector, GpuInfo, GpuSample, RunTag, RunTelemetry, Sampler, SamplerConfig, Stat,
    list_gpus, nvml_lib_path,
};

pub struct ProbeOptions {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Time between samples.
    pub interval: Duration,
    /// The GPUs to sample (None: every GPU NVML lists).
    pub gpus: Option<Vec<DeviceSelector>>,
    pub nvml_lib: Option<PathBuf>,
    /// Where the JSON report goes.
    pub out: PathBuf,
    /// Print the JSON report on stdout instead of the text.
    pub json: bool,
    /// `-q`: no "wrote" line.
    pub quiet: bool,
}

/// One device over the command's run: what a timed run records, and how the two energies agree.
#[derive(Debug, Serialize)]
pub struct ProbeDevice {
    #[serde(flatten)]
    pub telemetry: RunTelemetry,
    /// `(energy_j - energy_counter_j) / energy_counter_j`, in percent, where both exist and the
    /// counter moved.
    pub energy_difference_pct: Option<f64>,
}

/// What `gpu probe` writes: `--out`'s JSON.
#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub harness_version: String,
    pub command: Vec<String>,
    /// RFC 3339, UTC, when the first sample was taken.
    pub started_at: String,
    /// The command's exit status; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended the command, if one did.
    pub signal: Option<i32>,
    /// Seconds from the first sample (just before the command started) to the last (just
    /// after it ended).
    pub wall_s: f64,
    pub interval_ms: u64,
    pub gpus: Vec<GpuInfo>,
    pub devices: Vec<ProbeDevice>,
    /// Every sample, in time order.
    pub samples: Vec<GpuSample>,
}

impl ProbeReport {
    /// The exit code `gpu probe` ends with: the command's, or 128 + the signal that ended it.
    pub fn exit_code(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => 1,
        }
    }
}

/// `harness gpu probe`. Exits with the command's exit code (128 + N for signal N), after
/// writing the report whatever it was.
pub async fn command(opts: ProbeOptions) -> Result<i32> {
    let Some((program, args)) = opts.command.split_first() else {
        bail!("gpu probe: no command to run (usage: harness gpu probe -- COMMAND [ARG...])");
    };
    if opts.interval.is_zero() {
        bail!("gpu probe: --interval-ms must be at least 1");
    }
    let lib = nvml_lib_path(opts.nvml_lib.as_deref());
    let devices = match opts.gpus.clone() {
        Some(selected) if !selected.is_empty() => selected,
        _ => every_gpu(lib.clone()).await?,
    };
    let config = SamplerConfig {
        lib_path: lib,
        devices,
        interval: Some(opts.interval),
        ..SamplerConfig::new(Vec::new())
    };
    let sampler = Sampler::start(config).await?;
    let tag = RunTag {
        variant: "probe".into(),
        round: 0,
        run: 0,
    };
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    sampler.start_run(tag).await?;
    let status = tokio::process::Command::new(program)
        .args(args)
        .kill_on_drop(true)
        .status()
        .await;
    let telemetry = sampler.end_run().await?;
    let status = status.with_context(|| format!("gpu probe: cannot run {program:?}"))?;
    let report = ProbeReport {
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        command: opts.command.clone(),
        started_at,
        exit_code: status.code(),
        signal: std::os::unix::process::ExitStatusExt::signal(&status),
        wall_s: telemetry.duration_s,
        interval_ms: u64::try_from(opts.interval.as_millis()).unwrap_or(u64::MAX),
        gpus: sampler.gpus().to_vec(),
        devices: telemetry
            .devices
            .into_iter()
            .map(|telemetry| ProbeDevice {
                energy_difference_pct: energy_difference_pct(&telemetry),
                telemetry,
            })
            .collect(),
        samples: telemetry.samples,
    };
    let json = serde_json::to_string_pretty(&report).context("gpu probe: the report as JSON")?;
    crate::store::run_folder::write_atomic(&opts.out, format!("{json}\n").as_bytes())
        .with_context(|| format!("gpu probe: writing {}", opts.out.display()))?;
    if opts.json {
        crate::outln!("{json}");
    } else {
        crate::out!("{}", render_text(&report));
        if !opts.quiet {
            crate::outln!("wrote {}", for_terminal(&opts.out.display().to_string()));
        }
    }
    Ok(report.exit_code())
}

/// Every GPU NVML lists, by index; an error when it lists none.
async fn every_gpu(lib: Option<PathBuf>) -> Result<Vec<DeviceSelector>> {
    let gpus = list_gpus(lib).await?;
    if gpus.is_empty() {
        bail!("gpu probe: NVML answers but lists no GPU");
    }
    Ok(gpus
        .iter()
        .map(|g| DeviceSelector::Index(g.index))
        .collect())
}

fn energy_difference_pct(t: &RunTelemetry) -> Option<f64> {
    let (integral, counter) = (t.energy_j?, t.energy_counter_j?);
    (counter > 0.0).then(|| (integral - counter) / counter * 100.0)
}

fn stat_line(name: &str, stat: Option<Stat>, unit: &str, scale: f64) -> String {
    match stat {
        Some(s) => format!(
            "  {name:<12} mean {:>9.1} {unit:<4} max {:>9.1} {unit}\n",
            s.mean / scale,
            s.max / scale
        ),
        None => format!("  {name:<12} not read\n"),
    }
}

fn energy_line(d: &ProbeDevice) -> String {
    let t = &d.telemetry;
    let integral = t
        .energy_j
        .map_or("not read".to_string(), |j| format!("{j:.1} J integrated"));
    let counter = match (t.energy_counter_j, d.energy_difference_pct) {
        (Some(c), Some(pct)) => format!(", {c:.1} J by the driver's counter ({pct:+.1}%)"),
        (Some(c), None) => format!(", {c:.1} J by the driver's counter"),
        (None, _) => ", no driver energy counter".to_string(),
    };
    format!("  {:<12} {integral}{counter}\n", "energy")
}

/// The report as text: one block per device, then the command's status.
pub fn render_text(report: &ProbeReport) -> String {
    let mut out = String::new();
    for d in &report.devices {
        let t = &d.telemetry;
        out.push_str(&format!(
            "GPU {} {} ({}): {} samples over {:.3} s\n",
            t.device_index,
            for_terminal(&t.name),
            for_terminal(&t.uuid),
            t.samples,
            t.duration_s
        ));
        out.push_str(&stat_line("power", t.power_w, "W", 1.0));
        out.push_str(&energy_line(d));
        out.push_str(&stat_line("SM clock", t.sm_clock_mhz, "MHz", 1.0));
        out.push_str(&stat_line("mem clock", t.mem_clock_mhz, "MHz", 1.0));
        out.push_str(&stat_line("GPU util", t.gpu_util, "%", 1.0));
        out.push_str(&stat_line("mem util", t.mem_util, "%", 1.0));
        out.push_str(&stat_line(
            "mem used",
            t.mem_used_bytes,
            "GiB",
            (1u64 << 30) as f64,
        ));
        out.push_str(&stat_line("temperature", t.temperature_c, "C", 1.0));
        let reasons = if t.throttle_reasons.is_empty() {
            "none".to_string()
        } else {
            t.throttle_reasons.join(", ")
        };
        let flag = if t.throttled {
            " (thermal or power: clocks were cut)"
        } else {
            ""
        };
        out.push_str(&format!("  {:<12} {reasons}{flag}\n", "throttle"));
        if let Some(why) = &t.incomplete {
            out.push_str(&format!("  incomplete: {}\n", for_terminal(why)));
        }
        for note in &t.notes {
            out.push_str(&format!("  note: {}\n", for_terminal(note)));
        }
    }
    let ended = match (report.exit_code, report.signal) {
        (Some(code), _) => format!("exited {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "ended".to_string(),
    };
    out.push_str(&format!("command {ended} after {:.3} s\n", report.wall_s));
    out
}
