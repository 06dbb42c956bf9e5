//! The stand-in NVML library (`nvml-standin` in this workspace), built once per test process
//! into its own target directory under `CARGO_TARGET_TMPDIR` (a separate build lock, so the
//! outer `cargo test` cannot deadlock with it), and private copies of it beside a script.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Builds the stand-in (with `features`) into `CARGO_TARGET_TMPDIR/<dir>`; the library's path.
pub fn build_standin(dir: &str, features: &[&str]) -> Result<PathBuf, String> {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "-p", "nvml-standin", "--manifest-path"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    let output = cmd.output().map_err(|e| format!("running cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo build -p nvml-standin failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let lib = target.join("debug").join("libnvml_standin.so");
    if !lib.is_file() {
        return Err(format!("{} was not built", lib.display()));
    }
    Ok(lib)
}

pub fn standin_lib() -> &'static Path {
    static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match LIB.get_or_init(|| build_standin("nvml-standin", &[])) {
        Ok(path) => path,
        Err(e) => panic!("{e}"),
    }
}

/// The stand-in built without `nvmlDeviceGetPowerUsage`.
pub fn standin_lib_without_power() -> &'static Path {
    static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match LIB.get_or_init(|| build_standin("nvml-standin-no-power", &["no-power"])) {
        Ok(path) => path,
        Err(e) => panic!("{e}"),
    }
}

/// A private copy of `lib` with `script` beside it; the directory must outlive the sampler.
pub struct Nvml {
    pub dir: tempfile::TempDir,
    pub lib: PathBuf,
}

pub fn install(lib: &Path, script: &str) -> Nvml {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("libnvidia-ml.so.1");
    std::fs::copy(lib, &copy).unwrap();
    std::fs::write(dir.path().join("nvml-standin.script"), script).unwrap();
    Nvml { dir, lib: copy }
}

pub fn standin(script: &str) -> Nvml {
    install(standin_lib(), script)
}

/// One scripted reading (NVML units: milliwatts, MHz, °C, bytes).
#[derive(Clone, Copy)]
pub struct R {
    pub gpu: u32,
    pub mem: u32,
    pub used: u64,
    pub total: u64,
    pub power_mw: u32,
    pub sm: u32,
    pub memclk: u32,
    pub temp: u32,
    pub throttle: u64,
    /// The driver's energy counter, millijoules.
    pub energy_mj: u64,
}

pub const BASE: R = R {
    gpu: 0,
    mem: 0,
    used: 0,
    total: 80 << 30,
    power_mw: 0,
    sm: 0,
    memclk: 0,
    temp: 0,
    throttle: 0,
    energy_mj: 0,
};

impl R {
    pub fn line(&self) -> String {
        format!(
            "reading gpu={} mem={} used={} total={} power_mw={} sm={} memclk={} temp={} \
             throttle={:#x} energy_mj={}\n",
            self.gpu,
            self.mem,
            self.used,
            self.total,
            self.power_mw,
            self.sm,
            self.memclk,
            self.temp,
            self.throttle,
            self.energy_mj
        )
    }

    pub fn power(power_mw: u32) -> R {
        R { power_mw, ..BASE }
    }

    pub fn throttle(throttle: u64) -> R {
        R { throttle, ..BASE }
    }
}

pub fn device(uuid: &str, name: &str, readings: &[R], extra: &str) -> String {
    let mut s = format!("device {uuid} {name}\n");
    for r in readings {
        s.push_str(&r.line());
    }
    s.push_str(extra);
    s
}

pub fn script(devices: &[String]) -> String {
    format!("driver 550.54.15\nnvml 12.550.54.15\n{}", devices.concat())
}

pub const UUID0: &str = "GPU-00000000-1111-2222-3333-444444444444";
pub const UUID1: &str = "GPU-55555555-6666-7777-8888-999999999999";
