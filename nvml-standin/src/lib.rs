//! A stand-in for NVIDIA's NVML library (`libnvidia-ml.so.1`), so that the harness's GPU telemetry
//! is tested through the real `nvml-wrapper` code path on machines without a GPU.
//!
//! It exports, with the C ABI, the NVML functions the telemetry sampler calls. Its values come from
//! a script, read by `nvmlInit_v2` from the file named by `HARNESS_NVML_STANDIN_SCRIPT` or, when that
//! is unset, from `nvml-standin.script` in the directory that holds this library (found with
//! `dladdr`). The second way lets each test copy the library into its own temporary directory, next
//! to its own script, and load it there: a copy is a separate file, so `dlopen` gives each test its
//! own instance and its own state, without touching the process environment.
//!
//! # Script
//!
//! One directive a line; `#` starts a comment.
//!
//! ```text
//! driver 550.54.15                 # nvmlSystemGetDriverVersion
//! nvml 12.550.54.15                # nvmlSystemGetNVMLVersion
//! device GPU-0000-aaaa NVIDIA H100 80GB HBM3   # a device: UUID, then the name (rest of the line)
//! reading gpu=50 mem=20 used=1000 total=4000 power_mw=100000 sm=1980 memclk=2619 temp=40 throttle=0
//! reading ...                      # readings of the device above, in order
//! lost_after 2                     # the device above is lost after serving 2 readings
//! unsupported nvmlDeviceGetPowerUsage   # that function returns NOT_SUPPORTED for the device above
//! ```
//!
//! Every key of a `reading` is required except `energy_mj`; `throttle` is the raw reason bitmask
//! (decimal, or hex with `0x`). `energy_mj` is the driver's total-energy counter
//! (`nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver loaded); a device none
//! of whose readings has it answers that function with `NVML_ERROR_NOT_SUPPORTED`, as a GPU
//! older than Volta does.
//!
//! # How readings advance
//!
//! Each reading function keeps its own counter per device (clock info one per clock type): its
//! k-th call returns the field of the k-th reading, and once the readings run out, of the last one.
//! A sampler that queries every field once per sample therefore sees reading k in sample k, whatever
//! the order of its calls and however long it waits between samples.
//!
//! With `lost_after N`, the first call that would serve reading N (counting from 0) returns
//! `NVML_ERROR_GPU_IS_LOST`, and from then on every call about that device does.
//!
//! A script that does not parse makes `nvmlInit_v2` print the reason to stderr and return
//! `NVML_ERROR_UNKNOWN`.

//!
//! # Safety
//!
//! Every exported function is `unsafe` to call for the reason NVML's are: pointer arguments must be
//! null (answered with `NVML_ERROR_INVALID_ARGUMENT`) or valid for their type, buffers valid for
//! their stated length, strings NUL-terminated.

#![allow(non_snake_case)]
// The crate documentation's "Safety" section covers every exported function.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

type NvmlReturn = c_uint;
type NvmlDevice = *mut c_void;

const SUCCESS: NvmlReturn = 0;
const ERROR_UNINITIALIZED: NvmlReturn = 1;
const ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
const ERROR_NOT_SUPPORTED: NvmlReturn = 3;
const ERROR_NOT_FOUND: NvmlReturn = 6;
const ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
const ERROR_GPU_IS_LOST: NvmlReturn = 15;
const ERROR_ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
const ERROR_UNKNOWN: NvmlReturn = 999;

const CLOCK_SM: c_uint = 1;
const CLOCK_MEM: c_uint = 2;
const TEMPERATURE_GPU: c_uint = 0;

/// The environment variable that names the script (overrides the file next to the library).
pub const SCRIPT_ENV: &str = "HARNESS_NVML_STANDIN_SCRIPT";
/// The script's file name when it lies next to the library.
pub const SCRIPT_FILE: &str = "nvml-standin.script";

#[derive(Clone, Debug, Default)]
struct Reading {
    gpu: u32,
    mem: u32,
    used: u64,
    total: u64,
    power_mw: u32,
    sm: u32,
    memclk: u32,
    temp: u32,
    throttle: u64,
    energy_mj: Option<u64>,
}

/// The reading functions, each with its own counter.
#[derive(Clone, Copy)]
enum Field {
    Utilization = 0,
    Memory = 1,
    Power = 2,
    SmClock = 3,
    MemClock = 4,
    Temperature = 5,
    Throttle = 6,
    Energy = 7,
}
const FIELDS: usize = 8;

#[derive(Debug, Default)]
struct Device {
    uuid: String,
    name: String,
    readings: Vec<Reading>,
    lost_after: Option<usize>,
    unsupported: Vec<String>,
    counters: [usize; FIELDS],
    lost: bool,
}

#[derive(Debug, Default)]
struct State {
    driver: String,
    nvml: String,
    devices: Vec<Device>,
    /// `nvmlInit_v2` calls not yet matched by `nvmlShutdown`.
    inits: usize,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn parse_number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
    let parsed = if let Some(hex) = value.strip_prefix("0x") {
        u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|v| v.to_string().parse().ok())
    } else {
        value.parse().ok()
    };
    parsed.ok_or_else(|| format!("{key}={value}: not a number in range"))
}

fn parse_reading(rest: &str) -> Result<Reading, String> {
    let mut reading = Reading::default();
    let mut seen = Vec::new();
    for pair in rest.split_whitespace() {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?}: expected key=value"))?;
        match key {
            "gpu" => reading.gpu = parse_number(key, value)?,
            "mem" => reading.mem = parse_number(key, value)?,
            "used" => reading.used = parse_number(key, value)?,
            "total" => reading.total = parse_number(key, value)?,
            "power_mw" => reading.power_mw = parse_number(key, value)?,
            "sm" => reading.sm = parse_number(key, value)?,
            "memclk" => reading.memclk = parse_number(key, value)?,
            "temp" => reading.temp = parse_number(key, value)?,
            "throttle" => reading.throttle = parse_number(key, value)?,
            "energy_mj" => reading.energy_mj = Some(parse_number(key, value)?),
            other => return Err(format!("unknown reading key {other:?}")),
        }
        seen.push(key);
    }
    let required = [
        "gpu", "mem", "used", "total", "power_mw", "sm", "memclk", "temp", "throttle",
    ];
    for key in required {
        if !seen.contains(&key) {
            return Err(format!("reading lacks {key}="));
        }
    }
    if reading.used > reading.total {
        return Err(format!(
            "reading has used={} above total={}",
            reading.used, reading.total
        ));
    }
    Ok(reading)
}

fn last_device<'s>(state: &'s mut State, word: &str) -> Result<&'s mut Device, String> {
    state
        .devices
        .last_mut()
        .ok_or_else(|| format!("{word} before any device"))
}

fn parse_script(text: &str) -> Result<State, String> {
    let mut state = State::default();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        let at = |e: String| format!("line {}: {e}", number + 1);
        match word {
            "driver" => state.driver = rest.to_string(),
            "nvml" => state.nvml = rest.to_string(),
            "device" => {
                let (uuid, name) = rest
                    .split_once(char::is_whitespace)
                    .ok_or_else(|| at("device needs a UUID and a name".to_string()))?;
                state.devices.push(Device {
                    uuid: uuid.to_string(),
                    name: name.trim().to_string(),
                    ..Device::default()
                });
            }
            "reading" => {
                let reading = parse_reading(rest).map_err(at)?;
                last_device(&mut state, word)
                    .map_err(at)?
                    .readings
                    .push(reading);
            }
            "lost_after" => {
                let n = parse_number("lost_after", rest).map_err(at)?;
                last_device(&mut state, word).map_err(at)?.lost_after = Some(n);
            }
            "unsupported" => {
                let function = rest.to_string();
                last_device(&mut state, word)
                    .map_err(at)?
                    .unsupported
                    .push(function);
            }
            other => return Err(at(format!("unknown directive {other:?}"))),
        }
    }
    Ok(state)
}

#[repr(C)]
struct DlInfo {
    dli_fname: *const c_char,
    dli_fbase: *mut c_void,
    dli_sname: *const c_char,
    dli_saddr: *mut c_void,
}

unsafe extern "C" {
    fn dladdr(addr: *const c_void, info: *mut DlInfo) -> c_int;
}

/// The file this library was loaded from.
fn own_path() -> Option<PathBuf> {
    let mut info = DlInfo {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    let addr = nvmlInit_v2 as *const c_void;
    // SAFETY: `addr` lies in this library and `info` is a valid, writable `Dl_info`.
    let found = unsafe { dladdr(addr, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr returned a NUL-terminated path that lives as long as the library.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(name.to_string_lossy().into_owned()))
}

fn script_path() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(SCRIPT_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let own = own_path().ok_or("dladdr could not name this library's file")?;
    Ok(own.parent().unwrap_or(Path::new(".")).join(SCRIPT_FILE))
}

fn load_script() -> Result<State, String> {
    let path = script_path()?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("reading the script {}: {e}", path.display()))?;
    parse_script(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn with_state<F: FnOnce(&mut State) -> NvmlReturn>(f: F) -> NvmlReturn {
    let mut guard = match STATE.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    match guard.as_mut() {
        Some(state) if state.inits > 0 => f(state),
        _ => ERROR_UNINITIALIZED,
    }
}

fn device_index(device: NvmlDevice) -> Option<usize> {
    (device as usize).checked_sub(1)
}

/// Runs `f` on the device behind `device`, unless it is unknown or lost.
fn with_device<F: FnOnce(&mut Device) -> NvmlReturn>(device: NvmlDevice, f: F) -> NvmlReturn {
    with_state(|state| {
        let Some(dev) = device_index(device).and_then(|i| state.devices.get_mut(i)) else {
            return ERROR_INVALID_ARGUMENT;
        };
        if dev.lost {
            return ERROR_GPU_IS_LOST;
        }
        f(dev)
    })
}

/// Takes the next reading for `field` of `device` (see the module docs for how readings advance).
fn next_reading<F: FnOnce(&Reading) -> NvmlReturn>(
    device: NvmlDevice,
    function: &str,
    field: Field,
    f: F,
) -> NvmlReturn {
    with_device(device, |dev| {
        if dev.unsupported.iter().any(|u| u == function) {
            return ERROR_NOT_SUPPORTED;
        }
        let k = dev.counters[field as usize];
        if dev.lost_after.is_some_and(|n| k >= n) {
            dev.lost = true;
            return ERROR_GPU_IS_LOST;
        }
        let Some(reading) = dev.readings.get(k).or(dev.readings.last()) else {
            return ERROR_NOT_SUPPORTED;
        };
        let code = f(reading);
        dev.counters[field as usize] += 1;
        code
    })
}

/// Copies `value` and a NUL into `buf` of `length` bytes.
fn write_c_string(value: &str, buf: *mut c_char, length: c_uint) -> NvmlReturn {
    if buf.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let bytes = value.as_bytes();
    if bytes.len() + 1 > length as usize {
        return ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: the caller gave a buffer of `length` bytes, which holds the bytes and the NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    SUCCESS
}

/// Writes `value` through `out` unless it is null.
fn put<T>(out: *mut T, value: T) -> NvmlReturn {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: the caller passed a valid, writable pointer (checked non-null).
    unsafe { out.write(value) };
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInit_v2() -> NvmlReturn {
    let mut guard = match STATE.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(state) = guard.as_mut().filter(|s| s.inits > 0) {
        state.inits += 1;
        return SUCCESS;
    }
    match load_script() {
        Ok(mut state) => {
            state.inits = 1;
            *guard = Some(state);
            SUCCESS
        }
        Err(e) => {
            eprintln!("nvml-standin: {e}");
            ERROR_UNKNOWN
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlShutdown() -> NvmlReturn {
    with_state(|state| {
        state.inits -= 1;
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    let text: &'static CStr = match result {
        SUCCESS => c"Success",
        ERROR_UNINITIALIZED => c"Uninitialized",
        ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        ERROR_NOT_SUPPORTED => c"Not Supported",
        ERROR_NOT_FOUND => c"Not Found",
        ERROR_INSUFFICIENT_SIZE => c"Insufficient Size",
        ERROR_GPU_IS_LOST => c"GPU is lost",
        ERROR_ARGUMENT_VERSION_MISMATCH => c"Argument version mismatch",
        _ => c"Unknown Error",
    };
    text.as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    with_state(|state| write_c_string(&state.driver, version, length))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    with_state(|state| write_c_string(&state.nvml, version, length))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    with_state(|state| put(count, state.devices.len() as c_uint))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    with_state(|state| match state.devices.get(index as usize) {
        Some(dev) if dev.lost => ERROR_GPU_IS_LOST,
        Some(_) => put(device, (index as usize + 1) as NvmlDevice),
        None => ERROR_INVALID_ARGUMENT,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    if uuid.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: the caller passes a NUL-terminated string (checked non-null).
    let wanted = unsafe { CStr::from_ptr(uuid) }
        .to_string_lossy()
        .into_owned();
    with_state(
        |state| match state.devices.iter().position(|d| d.uuid == wanted) {
            Some(i) if state.devices[i].lost => ERROR_GPU_IS_LOST,
            Some(i) => put(device, (i + 1) as NvmlDevice),
            None => ERROR_NOT_FOUND,
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: NvmlDevice,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    with_device(device, |dev| write_c_string(&dev.name, name, length))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: NvmlDevice,
    uuid: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    with_device(device, |dev| write_c_string(&dev.uuid, uuid, length))
}

/// `nvmlUtilization_t`.
#[repr(C)]
pub struct Utilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: NvmlDevice,
    utilization: *mut Utilization,
) -> NvmlReturn {
    next_reading(
        device,
        "nvmlDeviceGetUtilizationRates",
        Field::Utilization,
        |r| {
            put(
                utilization,
                Utilization {
                    gpu: r.gpu,
                    memory: r.mem,
                },
            )
        },
    )
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
pub struct MemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `NVML_STRUCT_VERSION(Memory, 2)`.
const MEMORY_V2_VERSION: c_uint = (std::mem::size_of::<MemoryV2>() | (2 << 24)) as c_uint;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: NvmlDevice,
    memory: *mut MemoryV2,
) -> NvmlReturn {
    if memory.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: non-null pointer to the caller's struct, whose version field the caller has set.
    let version = unsafe { (*memory).version };
    if version != MEMORY_V2_VERSION {
        return ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    next_reading(device, "nvmlDeviceGetMemoryInfo_v2", Field::Memory, |r| {
        put(
            memory,
            MemoryV2 {
                version,
                total: r.total,
                reserved: 0,
                free: r.total - r.used,
                used: r.used,
            },
        )
    })
}

#[cfg(not(feature = "no-power"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: NvmlDevice,
    power: *mut c_uint,
) -> NvmlReturn {
    next_reading(device, "nvmlDeviceGetPowerUsage", Field::Power, |r| {
        put(power, r.power_mw)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: NvmlDevice,
    kind: c_uint,
    clock: *mut c_uint,
) -> NvmlReturn {
    match kind {
        CLOCK_SM => next_reading(device, "nvmlDeviceGetClockInfo", Field::SmClock, |r| {
            put(clock, r.sm)
        }),
        CLOCK_MEM => next_reading(device, "nvmlDeviceGetClockInfo", Field::MemClock, |r| {
            put(clock, r.memclk)
        }),
        _ => ERROR_NOT_SUPPORTED,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: NvmlDevice,
    sensor: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    if sensor != TEMPERATURE_GPU {
        return ERROR_INVALID_ARGUMENT;
    }
    next_reading(
        device,
        "nvmlDeviceGetTemperature",
        Field::Temperature,
        |r| put(temp, r.temp),
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: NvmlDevice,
    reasons: *mut c_ulonglong,
) -> NvmlReturn {
    next_reading(
        device,
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        Field::Throttle,
        |r| put(reasons, r.throttle),
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: NvmlDevice,
    energy: *mut c_ulonglong,
) -> NvmlReturn {
    next_reading(
        device,
        "nvmlDeviceGetTotalEnergyConsumption",
        Field::Energy,
        |r| match r.energy_mj {
            Some(mj) => put(energy, mj),
            None => ERROR_NOT_SUPPORTED,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_script() {
        let state = parse_script(
            "driver 550.1\nnvml 12.550.1\n# comment\ndevice GPU-a Some GPU  name\n\
             reading gpu=1 mem=2 used=3 total=4 power_mw=5 sm=6 memclk=7 temp=8 throttle=0x24\n\
             lost_after 1\nunsupported nvmlDeviceGetPowerUsage\n",
        )
        .unwrap();
        assert_eq!(state.driver, "550.1");
        assert_eq!(state.nvml, "12.550.1");
        let dev = &state.devices[0];
        assert_eq!(
            (dev.uuid.as_str(), dev.name.as_str()),
            ("GPU-a", "Some GPU  name")
        );
        assert_eq!(dev.readings[0].throttle, 0x24);
        assert_eq!(dev.readings[0].power_mw, 5);
        assert_eq!(dev.readings[0].energy_mj, None);
        let with_energy = parse_script(
            "device GPU-b n\nreading gpu=1 mem=2 used=3 total=4 power_mw=5 sm=6 memclk=7 temp=8 \
             throttle=0 energy_mj=123456789012\n",
        )
        .unwrap();
        assert_eq!(
            with_energy.devices[0].readings[0].energy_mj,
            Some(123456789012)
        );
        assert_eq!(dev.lost_after, Some(1));
        assert_eq!(dev.unsupported, ["nvmlDeviceGetPowerUsage"]);
    }

    #[test]
    fn rejects_bad_scripts() {
        assert!(
            parse_script("lost_after 1")
                .unwrap_err()
                .contains("before any device")
        );
        let missing = parse_script("device G n\nreading gpu=1").unwrap_err();
        assert!(missing.contains("lacks mem="), "{missing}");
        assert!(
            parse_script("frobnicate")
                .unwrap_err()
                .contains("unknown directive")
        );
    }
}
