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
