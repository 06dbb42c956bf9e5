//! GPU telemetry through NVML (`nvml-wrapper`): while a bench run is marked active, a [`Sampler`]
//! reads each of its GPUs several times a second (utilisation, memory, power, SM and memory clocks,
//! temperature, throttle reasons) and, when the run ends, gives back every sample and a
//! per-device summary ([`RunTelemetry`]: mean and max of each field, energy, whether clocks were
//! throttled for thermal or power reasons).
//!
//! The data types and the summarising functions here are plain and pure; [`sampler`] owns NVML.
//! Tests run against `nvml-standin`, a scripted stand-in for `libnvidia-ml.so.1` in this workspace.
//!
//! # Samples and summaries
//!
//! * A sample's `t` is seconds since the run's start, taken when its round of queries began. The
//!   sampler takes a round when a run starts (`t = 0`), every interval while it is active, and
//!   when it ends (`t` = the run's duration).
//! * Means are plain means over the samples (they are evenly spaced apart from the first and the
//!   last); maxima are over the samples.
//! * Energy ([`energy_joules`]): the trapezoid rule over the samples' power and timestamps, with the
//!   first reading held back to the run's start and the last held on to the run's end. For a device
//!   lost during the run the integral stops at its last sample (nothing is assumed after the loss)
//!   and the run's telemetry is marked incomplete.
//! * A field NVML cannot read on a device (e.g. `Not supported`) is `null` in that sample and left
//!   out of the summary, with a note; a lost device (`NVML_ERROR_GPU_IS_LOST`) stops being sampled
//!   and every run from then on is marked incomplete for it. Other devices go on.

pub mod sampler;

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use sampler::{
    Clock, ManualClock, MonotonicClock, Sampler, SamplerConfig, list_gpus, probe_gpus,
};

/// Environment variable naming the NVML library to load (a path, or a name `dlopen` resolves).
pub const NVML_LIB_ENV: &str = "HARNESS_NVML_LIB";
/// What is loaded when neither the configuration nor [`NVML_LIB_ENV`] names a library.
pub const DEFAULT_NVML_LIB: &str = "libnvidia-ml.so.1";
/// Default time between samples while a run is active (10 Hz).
pub const DEFAULT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// The library to load: `explicit` when given, else [`NVML_LIB_ENV`] when set and non-empty,
/// else `None` (meaning [`DEFAULT_NVML_LIB`]).
pub fn nvml_lib_path(explicit: Option<&Path>) -> Option<PathBuf> {
    explicit.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(NVML_LIB_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// Which bench run a sample belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTag {
    pub variant: String,
    pub round: u32,
    pub run: u32,
}

impl fmt::Display for RunTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} round {} run {}", self.variant, self.round, self.run)
    }
}

/// A GPU to sample: by NVML index or by UUID (`GPU-…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceSelector {
    Index(u32),
    Uuid(String),
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelector::Index(i) => write!(f, "index {i}"),
            DeviceSelector::Uuid(u) => write!(f, "UUID {u}"),
        }
    }
}

impl FromStr for DeviceSelector {
    type Err = std::convert::Infallible;

    /// A number is an index; anything else is a UUID.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Ok(match s.parse() {
            Ok(i) => DeviceSelector::Index(i),
            Err(_) => DeviceSelector::Uuid(s.to_string()),
        })
    }
}

/// One GPU as the machine fingerprint records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// NVML's index of the device.
    pub index: u32,
    pub name: String,
    pub uuid: String,
    /// `nvmlSystemGetDriverVersion`.
    pub driver_version: String,
    /// `nvmlSystemGetNVMLVersion`, when the library has it.
    pub nvml_version: Option<String>,
}

/// Throttle reason bits (`nvmlClocksThrottleReason*`) and their names.
pub const THROTTLE_REASONS: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The reasons that mean clocks were cut for heat or power: SW power cap, HW slowdown, SW thermal,
/// HW thermal, HW power brake.
pub const THROTTLE_THERMAL_OR_POWER: u64 = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

/// Names of the known reasons set in `bits`, in bit order.
pub fn throttle_reason_names(bits: u64) -> Vec<String> {
    THROTTLE_REASONS
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| name.to_string())
        .collect()
}

/// Whether `bits` hold a thermal or power reason ([`THROTTLE_THERMAL_OR_POWER`]).
pub fn is_thermal_or_power_throttle(bits: u64) -> bool {
    bits & THROTTLE_THERMAL_OR_POWER != 0
}

/// One reading of one GPU. A field NVML could not read is `None` (`null` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// Seconds since the run's start.
    pub t: f64,
    pub device_index: u32,
    pub uuid: String,
    /// Percent of time a kernel ran, over NVML's last sample period.
    pub gpu_util: Option<u32>,
    /// Percent of time device memory was read or written.
    pub mem_util: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    /// Watts (NVML reports milliwatts).
    pub power_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    /// The raw throttle reason bitmask (known bits only).
    pub throttle_bits: Option<u64>,
    /// Names of the reasons in `throttle_bits` ([`THROTTLE_REASONS`]).
    pub throttle_reasons: Vec<String>,
    /// A thermal or power reason was set ([`THROTTLE_THERMAL_OR_POWER`]).
    pub throttled_thermal_or_power: bool,
    /// The driver's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`: millijoules
    /// since the driver loaded; Volta and later), `None` where the device has none.
    #[serde(default)]
    pub energy_counter_mj: Option<u64>,
}

impl GpuSample {
    /// A sample whose fields are all unread.
    pub fn empty(t: f64, device_index: u32, uuid: &str) -> Self {
        GpuSample {
            t,
            device_index,
            uuid: uuid.to_string(),
            gpu_util: None,
            mem_util: None,
            mem_used_bytes: None,
            mem_total_bytes: None,
            power_w: None,
            sm_clock_mhz: None,
            mem_clock_mhz: None,
            temperature_c: None,
            throttle_bits: None,
            throttle_reasons: Vec::new(),
            throttled_thermal_or_power: false,
            energy_counter_mj: None,
        }
    }

    /// Sets the throttle fields from a bitmask.
    pub fn set_throttle(&mut self, bits: u64) {
        self.throttle_bits = Some(bits);
        self.throttle_reasons = throttle_reason_names(bits);
        self.throttled_thermal_or_power = is_thermal_or_power_throttle(bits);
    }
}

/// One line of `telemetry.jsonl`: a sample with its run's tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetryLine {
    #[serde(flatten)]
    pub tag: RunTag,
    #[serde(flatten)]
    pub sample: GpuSample,
}

/// `sample` as one line of `telemetry.jsonl` (no trailing newline).
pub fn telemetry_line(tag: &RunTag, sample: &GpuSample) -> String {
    let line = TelemetryLine {
        tag: tag.clone(),
        sample: sample.clone(),
    };
    // Plain strings, integers and finite floats: serialising cannot fail; an empty object is
    // what a failure would leave rather than a panic.
    serde_json::to_string(&line).unwrap_or_else(|_| "{}".to_string())
}

/// Mean and maximum of one field over a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub mean: f64,
    pub max: f64,
}

/// Mean and max of `values`; `None` when there are none.
pub fn stat(values: impl IntoIterator<Item = f64>) -> Option<Stat> {
    let mut n = 0usize;
    let mut sum = 0.0;
    let mut max = f64::NEG_INFINITY;
    for v in values {
        n += 1;
        sum += v;
        max = max.max(v);
    }
    (n > 0).then(|| Stat {
        mean: sum / n as f64,
        max,
    })
}

/// Energy in joules from `(t seconds, power watts)` points over a run that ends at `end_s`
/// (and starts at 0): the trapezoid rule between points, the first point's power held from 0 to
/// its `t`, the last point's held from its `t` to `end_s`. Points are sorted by `t` first; `None`
/// without points.
///
/// Example: 100 W, 200 W, 300 W at 0, 0.1, 0.2 s over a 0.2 s run:
/// (100+200)/2·0.1 + (200+300)/2·0.1 = 15 + 25 = 40 J.
pub fn energy_joules(points: &[(f64, f64)], end_s: f64) -> Option<f64> {
    let mut points = points.to_vec();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (first, last) = (points.first()?, points.last()?);
    let mut energy = first.1 * first.0.max(0.0);
    for pair in points.windows(2) {
        let ((t0, p0), (t1, p1)) = (pair[0], pair[1]);
        energy += (p0 + p1) / 2.0 * (t1 - t0);
    }
    energy += last.1 * (end_s - last.0).max(0.0);
    Some(energy)
}

/// Joules by the driver's energy counter between the first and the last sample (in time order)
/// that read it (`None` with fewer than two readings, or a counter that went backwards: a
/// driver reload).
/// The counter moves in the driver's own steps, so over a run shorter than a few of them it
/// says little.
pub fn counter_energy_joules(samples: &[&GpuSample]) -> Option<f64> {
    let mut readings = samples.iter().filter_map(|s| s.energy_counter_mj);
    let first = readings.next()?;
    let last = readings.next_back()?;
    let delta = last.checked_sub(first)?;
    // Millijoules fit f64 exactly up to 2^53 (about 9 TJ).
    Some(delta as f64 / 1000.0)
}

/// What one device did during one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTelemetry {
    pub device_index: u32,
    pub uuid: String,
    pub name: String,
    /// Number of samples of this device in the run.
    pub samples: usize,
    /// The run's length in seconds.
    pub duration_s: f64,
    pub gpu_util: Option<Stat>,
    pub mem_util: Option<Stat>,
    pub mem_used_bytes: Option<Stat>,
    pub power_w: Option<Stat>,
    pub sm_clock_mhz: Option<Stat>,
    pub mem_clock_mhz: Option<Stat>,
    pub temperature_c: Option<Stat>,
    /// [`energy_joules`] over the samples' power; `None` without power readings.
    pub energy_j: Option<f64>,
    /// The driver's energy counter over the run ([`counter_energy_joules`]): the check on
    /// `energy_j`, which integrates NVML's power readings (on many GPUs an average over the
    /// last second, not an instant value). `None` without two counter readings.
    #[serde(default)]
    pub energy_counter_j: Option<f64>,
    /// Some sample had a thermal or power throttle reason.
    pub throttled: bool,
    /// Every reason seen in the run, in bit order.
    pub throttle_reasons: Vec<String>,
    /// Why this device's telemetry for the run is incomplete (the device was lost), if it is.
    pub incomplete: Option<String>,
    /// Fields that could not be read, with NVML's reason, once each.
    pub notes: Vec<String>,
}

impl RunTelemetry {
    /// The run's energy as reports take it: the driver's counter where the device has one,
    /// else the integral of the power readings. On an H100 (driver 580, `validation/
    /// 2026-11-26-gpu-h100.md`) the power reading is an average over about the last second,
    /// so its integral over a run follows the second before: a step from 72 W to 700 W read
    /// 136 W for the first half second. The counter steps every 100 ms: a short run's figure
    /// is coarse but not biased towards what ran before.
    pub fn run_energy_j(&self) -> Option<f64> {
        self.energy_counter_j.or(self.energy_j)
    }
}

/// Summarises one device's samples of one run. `incomplete` is the reason the telemetry stops
/// early (the device was lost): the energy integral then ends at the last sample instead of at
/// `duration_s`.
pub fn summarize_device(
    gpu: &GpuInfo,
    samples: &[&GpuSample],
    duration_s: f64,
    incomplete: Option<String>,
    notes: Vec<String>,
) -> RunTelemetry {
    fn field<T: Copy + Into<f64>>(
        samples: &[&GpuSample],
        get: impl Fn(&GpuSample) -> Option<T>,
    ) -> Option<Stat> {
        stat(samples.iter().filter_map(|s| get(s)).map(Into::into))
    }
    let power: Vec<(f64, f64)> = samples
        .iter()
        .filter_map(|s| s.power_w.map(|p| (s.t, p)))
        .collect();
    let end = match (&incomplete, samples.last()) {
        (Some(_), Some(last)) => last.t,
        _ => duration_s,
    };
    let bits = samples
        .iter()
        .filter_map(|s| s.throttle_bits)
        .fold(0, |a, b| a | b);
    RunTelemetry {
        device_index: gpu.index,
        uuid: gpu.uuid.clone(),
        name: gpu.name.clone(),
        samples: samples.len(),
        duration_s,
        gpu_util: field(samples, |s| s.gpu_util),
        mem_util: field(samples, |s| s.mem_util),
        // Byte counts fit f64 exactly up to 2^53 (8 PiB).
        mem_used_bytes: stat(
            samples
                .iter()
                .filter_map(|s| s.mem_used_bytes)
                .map(|b| b as f64),
        ),
        power_w: field(samples, |s| s.power_w),
        sm_clock_mhz: field(samples, |s| s.sm_clock_mhz),
        mem_clock_mhz: field(samples, |s| s.mem_clock_mhz),
        temperature_c: field(samples, |s| s.temperature_c),
        energy_j: energy_joules(&power, end),
        energy_counter_j: counter_energy_joules(samples),
        throttled: samples.iter().any(|s| s.throttled_thermal_or_power),
        throttle_reasons: throttle_reason_names(bits),
        incomplete,
        notes,
    }
}

/// Everything the sampler recorded for one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub tag: RunTag,
    /// Seconds from the run's start to its end.
    pub duration_s: f64,
    /// One summary per sampled device, in the order the devices were selected.
    pub devices: Vec<RunTelemetry>,
    /// Every sample, in time order (devices in selection order within a round).
    pub samples: Vec<GpuSample>,
}

impl RunReport {
    /// The samples as `telemetry.jsonl` lines (no trailing newlines).
    pub fn jsonl_lines(&self) -> Vec<String> {
        self.samples
            .iter()
            .map(|s| telemetry_line(&self.tag, s))
            .collect()
    }

    /// Appends the samples to `out` as `telemetry.jsonl` lines.
    pub fn write_jsonl(&self, out: &mut impl Write) -> std::io::Result<()> {
        for line in self.jsonl_lines() {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }

    /// The summary of the device with NVML index `index`.
    pub fn device(&self, index: u32) -> Option<&RunTelemetry> {
        self.devices.iter().find(|d| d.device_index == index)
    }
}

/// Why telemetry could not start or answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "NVML not found at {path}: {detail}. Install the NVIDIA driver (it provides \
         libnvidia-ml.so.1), or set {NVML_LIB_ENV} to the library's path"
    )]
    LibraryNotFound { path: String, detail: String },
    #[error(
        "the NVML library at {path} lacks the symbol {symbol}, which GPU telemetry needs \
         ({detail}); is the NVIDIA driver too old?"
    )]
    SymbolMissing {
        path: String,
        symbol: String,
        detail: String,
    },
    #[error("NVML at {path} failed to initialise: {detail}")]
    Init { path: String, detail: String },
    #[error("GPU {selector} not found: {detail}")]
    DeviceNotFound { selector: String, detail: String },
    #[error("NVML {what}: {detail}")]
    Query { what: String, detail: String },
    #[error("a telemetry run is already active ({0}); end it first")]
    RunActive(RunTag),
    #[error("no telemetry run is active")]
    NoActiveRun,
    #[error("the GPU telemetry sampler has stopped")]
    SamplerStopped,
    #[error("could not start the GPU telemetry thread: {0}")]
    Spawn(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn energy_is_the_trapezoid_over_the_run() {
        // (100+200)/2*0.1 + (200+300)/2*0.1 = 15 + 25 = 40 J.
        let e = energy_joules(&[(0.0, 100.0), (0.1, 200.0), (0.2, 300.0)], 0.2).unwrap();
        assert!(close(e, 40.0), "{e}");
        // Unsorted input gives the same.
        let e = energy_joules(&[(0.2, 300.0), (0.0, 100.0), (0.1, 200.0)], 0.2).unwrap();
        assert!(close(e, 40.0), "{e}");
    }

    #[test]
    fn energy_holds_the_first_and_last_readings_to_the_run_edges() {
        // 50 W held 0..0.1 (5 J), trapezoid 50..150 over 0.1..0.3 (20 J), 150 W held 0.3..0.5
        // (30 J): 55 J.
        let e = energy_joules(&[(0.1, 50.0), (0.3, 150.0)], 0.5).unwrap();
        assert!(close(e, 55.0), "{e}");
        // One reading: held over the whole run.
        let e = energy_joules(&[(0.25, 80.0)], 2.0).unwrap();
        assert!(close(e, 160.0), "{e}");
        assert_eq!(energy_joules(&[], 1.0), None);
    }

    #[test]
    fn the_counter_energy_is_last_minus_first() {
        let mut a = sample(0.0, None, 0, 0);
        let mut b = sample(0.1, None, 0, 0);
        let mut c = sample(0.2, None, 0, 0);
        a.energy_counter_mj = Some(10_000);
        c.energy_counter_mj = Some(12_500);
        assert_eq!(counter_energy_joules(&[&a, &b, &c]), Some(2.5));
        // One reading, or none: no figure.
        assert_eq!(counter_energy_joules(&[&a, &b]), None);
        // A counter that went backwards (a driver reload): no figure rather than a wrong one.
        b.energy_counter_mj = Some(9_000);
        assert_eq!(counter_energy_joules(&[&a, &b]), None);
    }

    #[test]
    fn stats_are_mean_and_max() {
        let s = stat([1.0, 5.0, 3.0]).unwrap();
        assert_eq!((s.mean, s.max), (3.0, 5.0));
        assert_eq!(stat(std::iter::empty()), None);
    }

    #[test]
    fn throttle_bits_name_and_classify() {
        assert_eq!(
            throttle_reason_names(0x1 | 0x4 | 0x40),
            ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
        );
        for bit in [0x4, 0x8, 0x20, 0x40, 0x80] {
            assert!(is_thermal_or_power_throttle(bit), "{bit:#x}");
        }
        for bit in [0x0, 0x1, 0x2, 0x10, 0x100] {
            assert!(!is_thermal_or_power_throttle(bit), "{bit:#x}");
        }
    }

    fn sample(t: f64, power: Option<f64>, gpu_util: u32, throttle: u64) -> GpuSample {
        let mut s = GpuSample::empty(t, 0, "GPU-x");
        s.power_w = power;
        s.gpu_util = Some(gpu_util);
        s.mem_used_bytes = Some(1 << 30);
        s.set_throttle(throttle);
        s
    }

    fn gpu() -> GpuInfo {
        GpuInfo {
            index: 0,
            name: "Test GPU".into(),
            uuid: "GPU-x".into(),
            driver_version: "1.0".into(),
            nvml_version: None,
        }
    }

    #[test]
    fn summary_of_a_complete_run() {
        let samples = [
            sample(0.0, Some(100.0), 10, 0),
            sample(0.1, Some(200.0), 20, 0x1),
            sample(0.2, Some(300.0), 60, 0x20),
        ];
        let refs: Vec<&GpuSample> = samples.iter().collect();
        let r = summarize_device(&gpu(), &refs, 0.2, None, vec![]);
        assert_eq!(r.samples, 3);
        assert!(close(r.energy_j.unwrap(), 40.0));
        assert_eq!(
            r.gpu_util,
            Some(Stat {
                mean: 30.0,
                max: 60.0
            })
        );
        assert_eq!(r.power_w.unwrap().max, 300.0);
        assert_eq!(r.mem_used_bytes.unwrap().mean, (1u64 << 30) as f64);
        assert_eq!(r.temperature_c, None);
        assert!(r.throttled);
        assert_eq!(r.throttle_reasons, ["gpu_idle", "sw_thermal_slowdown"]);
        assert_eq!(r.incomplete, None);
    }

    #[test]
    fn a_lost_device_integrates_only_to_its_last_sample() {
        let samples = [
            sample(0.0, Some(100.0), 0, 0x1),
            sample(0.1, Some(100.0), 0, 0),
        ];
        let refs: Vec<&GpuSample> = samples.iter().collect();
        let r = summarize_device(&gpu(), &refs, 1.0, Some("lost".into()), vec![]);
        // 100 W over 0..0.1 only, not to the run's end at 1 s.
        assert!(close(r.energy_j.unwrap(), 10.0));
        assert!(!r.throttled, "GPU idle alone is not throttling");
        assert_eq!(r.incomplete.as_deref(), Some("lost"));
    }

    #[test]
    fn samples_without_power_are_skipped_by_the_integral() {
        let samples = [
            sample(0.0, Some(100.0), 0, 0),
            sample(0.1, None, 0, 0),
            sample(0.2, Some(100.0), 0, 0),
        ];
        let refs: Vec<&GpuSample> = samples.iter().collect();
        let r = summarize_device(&gpu(), &refs, 0.4, None, vec![]);
        assert!(close(r.energy_j.unwrap(), 40.0));
        let none: Vec<&GpuSample> = vec![];
        assert_eq!(
            summarize_device(&gpu(), &none, 1.0, None, vec![]).energy_j,
            None
        );
    }

    #[test]
    fn a_jsonl_line_carries_the_tag_and_every_field() {
        let tag = RunTag {
            variant: "patched".into(),
            round: 3,
            run: 1,
        };
        let mut s = sample(0.5, Some(250.5), 42, 0x4);
        s.temperature_c = Some(71);
        let line = telemetry_line(&tag, &s);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["variant"], "patched");
        assert_eq!(v["round"], 3);
        assert_eq!(v["run"], 1);
        assert_eq!(v["t"], 0.5);
        assert_eq!(v["power_w"], 250.5);
        assert_eq!(v["gpu_util"], 42);
        assert_eq!(v["temperature_c"], 71);
        assert_eq!(v["sm_clock_mhz"], serde_json::Value::Null);
        assert_eq!(v["throttle_bits"], 4);
        assert_eq!(v["throttle_reasons"], serde_json::json!(["sw_power_cap"]));
        assert_eq!(v["throttled_thermal_or_power"], true);
        let back: TelemetryLine = serde_json::from_str(&line).unwrap();
        assert_eq!((back.tag, back.sample), (tag, s));
    }

    #[test]
    fn selectors_parse() {
        assert_eq!("2".parse(), Ok(DeviceSelector::Index(2)));
        assert_eq!(
            "GPU-ab12".parse(),
            Ok(DeviceSelector::Uuid("GPU-ab12".into()))
        );
    }
}
