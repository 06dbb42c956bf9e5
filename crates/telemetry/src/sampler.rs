//! The sampler: a std thread that owns an [`Nvml`] (a `Device` borrows it, and NVML calls block),
//! driven by commands from async code.
//!
//! ```no_run
//! # async fn f() -> Result<(), harness_telemetry::TelemetryError> {
//! use harness_telemetry::{DeviceSelector, RunTag, Sampler, SamplerConfig};
//! let sampler = Sampler::start(SamplerConfig::new(vec![DeviceSelector::Index(0)])).await?;
//! let tag = RunTag { variant: "patched".into(), round: 0, run: 0 };
//! sampler.start_run(tag).await?;
//! // ... the bench runs ...
//! let report = sampler.end_run().await?;
//! for device in &report.devices {
//!     println!("{}: {:?} J, throttled: {}", device.name, device.energy_j, device.throttled);
//! }
//! let mut jsonl = Vec::new();
//! report.write_jsonl(&mut jsonl).ok();
//! # Ok(()) }
//! ```

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use futures_channel::oneshot;
use nvml_wrapper::enum_wrappers::device::{Clock as NvmlClock, TemperatureSensor};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::{
    DEFAULT_INTERVAL, DEFAULT_NVML_LIB, DeviceSelector, GpuInfo, GpuSample, RunReport, RunTag,
    TelemetryError, nvml_lib_path, summarize_device,
};

/// Where sample timestamps come from. The sampler schedules its rounds by real time either way;
/// the clock only stamps them, so a test can give exact times.
pub trait Clock: Send + Sync + 'static {
    /// Time since some fixed origin.
    fn now(&self) -> Duration;
}

/// Real time (`Instant`) since the clock was made.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    pub fn new() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to (for tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set(&self, now: Duration) {
        let nanos = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.store(nanos, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

/// How to sample.
#[derive(Clone)]
pub struct SamplerConfig {
    /// The NVML library; `None` loads [`DEFAULT_NVML_LIB`].
    pub lib_path: Option<PathBuf>,
    /// The GPUs to sample, in the order summaries come back.
    pub devices: Vec<DeviceSelector>,
    /// Time between samples while a run is active; `None` samples only at the run's start and end
    /// and on [`Sampler::sample_now`].
    pub interval: Option<Duration>,
    /// Stamps the samples.
    pub clock: Arc<dyn Clock>,
}

impl SamplerConfig {
    /// Samples `devices` at 10 Hz with real time, from the library that
    /// [`HARNESS_NVML_LIB`](super::NVML_LIB_ENV) names, or the default one.
    pub fn new(devices: Vec<DeviceSelector>) -> Self {
        SamplerConfig {
            lib_path: nvml_lib_path(None),
            devices,
            interval: Some(DEFAULT_INTERVAL),
            clock: Arc::new(MonotonicClock::new()),
        }
    }
}

type Reply<T> = oneshot::Sender<Result<T, TelemetryError>>;

enum Command {
    Start(RunTag, Reply<()>),
    SampleNow(Reply<()>),
    End(Reply<RunReport>),
}

/// Samples a set of GPUs while runs are marked active. One run at a time; dropping the sampler
/// stops its thread (which then shuts NVML down).
pub struct Sampler {
    commands: mpsc::Sender<Command>,
    gpus: Vec<GpuInfo>,
}

impl Sampler {
    /// Loads NVML on a new thread, finds the devices and checks that the library has every
    /// function the sampler calls. Fails with a [`TelemetryError`] saying what is missing.
    pub async fn start(config: SamplerConfig) -> Result<Sampler, TelemetryError> {
        let (commands, receiver) = mpsc::channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("gpu-telemetry".into())
            .spawn(move || sampler_thread(config, ready_tx, receiver))
            .map_err(|e| TelemetryError::Spawn(e.to_string()))?;
        let gpus = ready_rx
            .await
            .map_err(|_| TelemetryError::SamplerStopped)??;
        Ok(Sampler { commands, gpus })
    }

    /// The sampled GPUs, in selection order.
    pub fn gpus(&self) -> &[GpuInfo] {
        &self.gpus
    }

    async fn ask<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T, TelemetryError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(command(tx))
            .map_err(|_| TelemetryError::SamplerStopped)?;
        rx.await.map_err(|_| TelemetryError::SamplerStopped)?
    }

    /// Marks a run as started: takes a first sample (`t = 0`) before returning, then samples every
    /// interval until [`end_run`](Self::end_run).
    pub async fn start_run(&self, tag: RunTag) -> Result<(), TelemetryError> {
        self.ask(|reply| Command::Start(tag, reply)).await
    }

    /// Takes a sample of the active run now.
    pub async fn sample_now(&self) -> Result<(), TelemetryError> {
        self.ask(Command::SampleNow).await
    }

    /// Marks the active run as ended: takes a last sample (`t` = the run's duration) and returns
    /// every sample and the per-device summaries.
    pub async fn end_run(&self) -> Result<RunReport, TelemetryError> {
        self.ask(Command::End).await
    }
}

/// Every NVML function the sampler calls, with what it is for.
const SAMPLER_SYMBOLS: &[(&str, &str)] = &[
    ("nvmlShutdown", "closing NVML"),
    ("nvmlSystemGetDriverVersion", "the driver version"),
    ("nvmlDeviceGetCount_v2", "counting devices"),
    ("nvmlDeviceGetHandleByIndex_v2", "opening devices"),
    ("nvmlDeviceGetName", "device names"),
    ("nvmlDeviceGetUUID", "device UUIDs"),
    ("nvmlDeviceGetUtilizationRates", "utilisation"),
    ("nvmlDeviceGetMemoryInfo_v2", "memory use"),
    ("nvmlDeviceGetPowerUsage", "power and energy"),
    ("nvmlDeviceGetClockInfo", "SM and memory clocks"),
    ("nvmlDeviceGetTemperature", "temperature"),
    (
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "throttle reasons",
    ),
];

/// What [`probe_gpus`] calls.
const PROBE_SYMBOLS: &[(&str, &str)] = &[
    ("nvmlShutdown", "closing NVML"),
    ("nvmlSystemGetDriverVersion", "the driver version"),
    ("nvmlDeviceGetCount_v2", "counting devices"),
    ("nvmlDeviceGetHandleByIndex_v2", "opening devices"),
    ("nvmlDeviceGetName", "device names"),
    ("nvmlDeviceGetUUID", "device UUIDs"),
];

/// The load error of symbol `name`, if the library lacks it.
fn symbol_error(nvml: &Nvml, name: &str) -> Option<String> {
    let lib = nvml.lib();
    macro_rules! check {
        ($($symbol:ident),*) => {
            match name {
                $(stringify!($symbol) => lib.$symbol.as_ref().err().map(|e| e.to_string()),)*
                _ => Some(format!("{name} is not among the checked symbols")),
            }
        };
    }
    check!(
        nvmlShutdown,
        nvmlSystemGetDriverVersion,
        nvmlDeviceGetCount_v2,
        nvmlDeviceGetHandleByIndex_v2,
        nvmlDeviceGetName,
        nvmlDeviceGetUUID,
        nvmlDeviceGetUtilizationRates,
        nvmlDeviceGetMemoryInfo_v2,
        nvmlDeviceGetPowerUsage,
        nvmlDeviceGetClockInfo,
        nvmlDeviceGetTemperature,
        nvmlDeviceGetCurrentClocksThrottleReasons
    )
}

/// Loads and initialises NVML from `lib_path` (or the default library) and checks that it has
/// `symbols`.
fn open_nvml(lib_path: Option<&PathBuf>, symbols: &[(&str, &str)]) -> Result<Nvml, TelemetryError> {
    let shown = lib_path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| DEFAULT_NVML_LIB.to_string());
    let mut builder = Nvml::builder();
    if let Some(path) = lib_path {
        builder.lib_path(path.as_os_str());
    } else {
        builder.lib_path(OsStr::new(DEFAULT_NVML_LIB));
    }
    let nvml = match builder.init() {
        Ok(nvml) => nvml,
        Err(NvmlError::LibloadingError(e)) => {
            return Err(TelemetryError::LibraryNotFound {
                path: shown,
                detail: e.to_string(),
            });
        }
        Err(NvmlError::FailedToLoadSymbol(detail)) => {
            return Err(TelemetryError::SymbolMissing {
                path: shown,
                symbol: "nvmlInit_v2".into(),
                detail,
            });
        }
        Err(e) => {
            return Err(TelemetryError::Init {
                path: shown,
                detail: e.to_string(),
            });
        }
    };
    if let Some(detail) = symbol_error(&nvml, "nvmlShutdown") {
        // `Drop for Nvml` would panic calling the missing function: leak it instead.
        std::mem::forget(nvml);
        return Err(TelemetryError::SymbolMissing {
            path: shown,
            symbol: "nvmlShutdown".into(),
            detail,
        });
    }
    for (symbol, what) in symbols {
        if let Some(detail) = symbol_error(&nvml, symbol) {
            return Err(TelemetryError::SymbolMissing {
                path: shown,
                symbol: symbol.to_string(),
                detail: format!("for {what}: {detail}"),
            });
        }
    }
    Ok(nvml)
}

fn query(what: impl Into<String>) -> impl FnOnce(NvmlError) -> TelemetryError {
    let what = what.into();
    move |e| TelemetryError::Query {
        what,
        detail: e.to_string(),
    }
}

/// Name and UUID of device `index`.
fn describe(nvml: &Nvml, index: u32) -> Result<(Device<'_>, String, String), TelemetryError> {
    let device = nvml
        .device_by_index(index)
        .map_err(|e| TelemetryError::DeviceNotFound {
            selector: DeviceSelector::Index(index).to_string(),
            detail: e.to_string(),
        })?;
    let name = device
        .name()
        .map_err(query(format!("name of GPU {index}")))?;
    let uuid = device
        .uuid()
        .map_err(query(format!("UUID of GPU {index}")))?;
    Ok((device, name, uuid))
}

fn versions(nvml: &Nvml) -> Result<(String, Option<String>), TelemetryError> {
    let driver = nvml.sys_driver_version().map_err(query("driver version"))?;
    let nvml_version = if nvml.lib().nvmlSystemGetNVMLVersion.is_ok() {
        nvml.sys_nvml_version().ok()
    } else {
        None
    };
    Ok((driver, nvml_version))
}

/// [`probe_gpus`] off the async threads (NVML's calls block).
pub async fn list_gpus(lib_path: Option<PathBuf>) -> Result<Vec<GpuInfo>, TelemetryError> {
    let (tx, rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("nvml-probe".into())
        .spawn(move || {
            let _ = tx.send(probe_gpus(lib_path.as_deref()));
        })
        .map_err(|e| TelemetryError::Spawn(e.to_string()))?;
    rx.await.map_err(|_| {
        TelemetryError::Spawn("the NVML probe thread ended without an answer".into())
    })?
}

/// Every GPU NVML sees, for the machine fingerprint. Blocks while NVML loads.
pub fn probe_gpus(lib_path: Option<&std::path::Path>) -> Result<Vec<GpuInfo>, TelemetryError> {
    let lib_path = lib_path.map(PathBuf::from);
    let nvml = open_nvml(lib_path.as_ref(), PROBE_SYMBOLS)?;
    let (driver_version, nvml_version) = versions(&nvml)?;
    let count = nvml.device_count().map_err(query("device count"))?;
    let mut gpus = Vec::new();
    for index in 0..count {
        let (_, name, uuid) = describe(&nvml, index)?;
        gpus.push(GpuInfo {
            index,
            name,
            uuid,
            driver_version: driver_version.clone(),
            nvml_version: nvml_version.clone(),
        });
    }
    Ok(gpus)
}

/// A sampled device.
struct Tracked<'n> {
    info: GpuInfo,
    device: Device<'n>,
    /// Why the device stopped answering, once it has.
    lost: Option<String>,
}

/// Finds the selected devices (each once, in selection order).
fn resolve<'n>(
    nvml: &'n Nvml,
    selectors: &[DeviceSelector],
) -> Result<Vec<Tracked<'n>>, TelemetryError> {
    let (driver_version, nvml_version) = versions(nvml)?;
    let mut indices: Vec<u32> = Vec::new();
    for selector in selectors {
        let index = match selector {
            DeviceSelector::Index(i) => *i,
            DeviceSelector::Uuid(wanted) => {
                let count = nvml.device_count().map_err(query("device count"))?;
                let found = (0..count).find(|&i| {
                    nvml.device_by_index(i)
                        .and_then(|d| d.uuid())
                        .is_ok_and(|u| &u == wanted)
                });
                found.ok_or_else(|| TelemetryError::DeviceNotFound {
                    selector: selector.to_string(),
                    detail: format!("none of the {count} devices has this UUID"),
                })?
            }
        };
        if !indices.contains(&index) {
            indices.push(index);
        }
    }
    let mut tracked = Vec::new();
    for index in indices {
        let (device, name, uuid) = describe(nvml, index)?;
        tracked.push(Tracked {
            info: GpuInfo {
                index,
                name,
                uuid,
                driver_version: driver_version.clone(),
                nvml_version: nvml_version.clone(),
            },
            device,
            lost: None,
        });
    }
    Ok(tracked)
}

/// One field's reading: `Err` when the device is lost; a failure of any other kind leaves the
/// field `None` and adds a note.
fn read<T>(
    result: Result<T, NvmlError>,
    field: &str,
    function: &str,
    notes: &mut Vec<String>,
) -> Result<Option<T>, String> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::GpuLost) => Err(format!(
            "{function} returned NVML_ERROR_GPU_IS_LOST (the GPU fell off the bus or stopped \
             answering)"
        )),
        Err(e) => {
            notes.push(format!("{field} unavailable ({function}): {e}"));
            Ok(None)
        }
    }
}

/// Reads every field of `device`. `Err` (with the reason) when the device is lost.
fn sample_device(
    tracked: &Tracked<'_>,
    t: f64,
    notes: &mut Vec<String>,
) -> Result<GpuSample, String> {
    let d = &tracked.device;
    let mut s = GpuSample::empty(t, tracked.info.index, &tracked.info.uuid);
    if let Some(u) = read(
        d.utilization_rates(),
        "gpu_util/mem_util",
        "nvmlDeviceGetUtilizationRates",
        notes,
    )? {
        s.gpu_util = Some(u.gpu);
        s.mem_util = Some(u.memory);
    }
    if let Some(m) = read(
        d.memory_info(),
        "mem_used_bytes",
        "nvmlDeviceGetMemoryInfo_v2",
        notes,
    )? {
        s.mem_used_bytes = Some(m.used);
        s.mem_total_bytes = Some(m.total);
    }
    s.power_w = read(d.power_usage(), "power_w", "nvmlDeviceGetPowerUsage", notes)?
        .map(|mw| f64::from(mw) / 1000.0);
    s.sm_clock_mhz = read(
        d.clock_info(NvmlClock::SM),
        "sm_clock_mhz",
        "nvmlDeviceGetClockInfo(SM)",
        notes,
    )?;
    s.mem_clock_mhz = read(
        d.clock_info(NvmlClock::Memory),
        "mem_clock_mhz",
        "nvmlDeviceGetClockInfo(MEM)",
        notes,
    )?;
    s.temperature_c = read(
        d.temperature(TemperatureSensor::Gpu),
        "temperature_c",
        "nvmlDeviceGetTemperature",
        notes,
    )?;
    s.energy_counter_mj = read(
        d.total_energy_consumption(),
        "energy_counter_mj",
        "nvmlDeviceGetTotalEnergyConsumption",
        notes,
    )?;
    if let Some(reasons) = read(
        d.current_throttle_reasons(),
        "throttle_reasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        notes,
    )? {
        s.set_throttle(reasons.bits());
    }
    Ok(s)
}

/// The run being sampled.
struct ActiveRun {
    tag: RunTag,
    start: Duration,
    samples: Vec<GpuSample>,
    /// Per tracked device: why its telemetry for this run is incomplete.
    incomplete: Vec<Option<String>>,
    /// Per tracked device: fields that could not be read (each note once).
    notes: Vec<Vec<String>>,
    /// When the next periodic round is due.
    next_due: Instant,
}

impl ActiveRun {
    /// One round: every device that still answers, stamped `t`.
    fn round(&mut self, devices: &mut [Tracked<'_>], t: f64) {
        for (i, tracked) in devices.iter_mut().enumerate() {
            if tracked.lost.is_some() {
                continue;
            }
            let mut notes = Vec::new();
            match sample_device(tracked, t, &mut notes) {
                Ok(sample) => self.samples.push(sample),
                Err(reason) => {
                    let reason = format!(
                        "GPU {} ({}) lost at t={t:.3} s: {reason}",
                        tracked.info.index, tracked.info.uuid
                    );
                    self.incomplete[i] = Some(reason.clone());
                    tracked.lost = Some(reason);
                }
            }
            for note in notes {
                if !self.notes[i].contains(&note) {
                    self.notes[i].push(note);
                }
            }
        }
    }

    fn report(self, devices: &[Tracked<'_>], duration_s: f64) -> RunReport {
        let summaries = devices
            .iter()
            .zip(self.incomplete)
            .zip(self.notes)
            .map(|((tracked, incomplete), notes)| {
                let mine: Vec<&GpuSample> = self
                    .samples
                    .iter()
                    .filter(|s| s.device_index == tracked.info.index)
                    .collect();
                summarize_device(&tracked.info, &mine, duration_s, incomplete, notes)
            })
            .collect();
        RunReport {
            tag: self.tag,
            duration_s,
            devices: summaries,
            samples: self.samples,
        }
    }
}

fn sampler_thread(
    config: SamplerConfig,
    ready: oneshot::Sender<Result<Vec<GpuInfo>, TelemetryError>>,
    commands: mpsc::Receiver<Command>,
) {
    let nvml = match open_nvml(config.lib_path.as_ref(), SAMPLER_SYMBOLS) {
        Ok(nvml) => nvml,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut devices = match resolve(&nvml, &config.devices) {
        Ok(devices) => devices,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    if ready
        .send(Ok(devices.iter().map(|d| d.info.clone()).collect()))
        .is_err()
    {
        return;
    }
    let clock = config.clock;
    let since = |start: Duration| clock.now().saturating_sub(start).as_secs_f64();
    let mut active: Option<ActiveRun> = None;
    loop {
        let due = match (&active, config.interval) {
            (Some(run), Some(_)) => Some(run.next_due),
            _ => None,
        };
        let command = match due {
            Some(due) => {
                match commands.recv_timeout(due.saturating_duration_since(Instant::now())) {
                    Ok(command) => Some(command),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            None => match commands.recv() {
                Ok(command) => Some(command),
                Err(_) => break,
            },
        };
        match command {
            None => {
                if let (Some(run), Some(interval)) = (active.as_mut(), config.interval) {
                    let t = since(run.start);
                    run.round(&mut devices, t);
                    run.next_due += interval;
                    let now = Instant::now();
                    if run.next_due < now {
                        // Fell behind (slow NVML): skip the missed rounds rather than burst.
                        run.next_due = now + interval;
                    }
                }
            }
            Some(Command::Start(tag, reply)) => {
                if let Some(run) = &active {
                    let _ = reply.send(Err(TelemetryError::RunActive(run.tag.clone())));
                    continue;
                }
                let incomplete = devices
                    .iter()
                    .map(|d| {
                        d.lost
                            .as_ref()
                            .map(|reason| format!("lost before this run: {reason}"))
                    })
                    .collect();
                let mut run = ActiveRun {
                    tag,
                    start: clock.now(),
                    samples: Vec::new(),
                    incomplete,
                    notes: vec![Vec::new(); devices.len()],
                    next_due: Instant::now() + config.interval.unwrap_or_default(),
                };
                run.round(&mut devices, 0.0);
                active = Some(run);
                let _ = reply.send(Ok(()));
            }
            Some(Command::SampleNow(reply)) => {
                let result = match active.as_mut() {
                    Some(run) => {
                        let t = since(run.start);
                        run.round(&mut devices, t);
                        Ok(())
                    }
                    None => Err(TelemetryError::NoActiveRun),
                };
                let _ = reply.send(result);
            }
            Some(Command::End(reply)) => {
                let result = match active.take() {
                    Some(mut run) => {
                        let duration = since(run.start);
                        run.round(&mut devices, duration);
                        Ok(run.report(&devices, duration))
                    }
                    None => Err(TelemetryError::NoActiveRun),
                };
                let _ = reply.send(result);
            }
        }
    }
}
