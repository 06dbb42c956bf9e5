//! The machine fingerprint of a run, with the Docker engine's own version.

use crate::docker::Engine;
use harness_core::fingerprint::{Fingerprint, nvidia_driver_version, nvidia_gpu_model};

/// The commit this build is from (`-dirty` when the tree had changes), recorded by build.rs.
pub const HARNESS_COMMIT: &str = env!("HARNESS_GIT_COMMIT");
/// What `harness --version` prints: the version and the commit.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("HARNESS_GIT_COMMIT"),
    ")"
);

/// This host's fingerprint (see `harness_core::fingerprint`) and the engine's version.
pub async fn collect(engine: &Engine) -> Fingerprint {
    of_host(engine.server_version().await)
}

/// This host's fingerprint, with the Docker engine's version as the engine gave it.
pub fn of_host(docker_version: String) -> Fingerprint {
    let (gpus, gpu_driver) = nvidia_gpus(std::path::Path::new("/proc/driver/nvidia"));
    Fingerprint {
        cpu_model: cpu_model(),
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        memory_bytes: memory_bytes(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        docker_version,
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        harness_commit: HARNESS_COMMIT.to_string(),
        gpus,
        gpu_driver,
        gpu_uuids: Vec::new(),
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// GPU models (in bus order) and the driver version, read from the NVIDIA kernel driver's
/// files: no NVML needed, and nothing at all on a machine without the driver.
fn nvidia_gpus(root: &std::path::Path) -> (Vec<String>, Option<String>) {
    let mut buses: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("gpus"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    buses.sort();
    let models = buses
        .iter()
        .filter_map(|b| std::fs::read_to_string(b.join("information")).ok())
        .filter_map(|text| nvidia_gpu_model(&text))
        .collect();
    let driver = std::fs::read_to_string(root.join("version"))
        .ok()
        .and_then(|v| nvidia_driver_version(&v));
    (models, driver)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_driver_files() {
        let version = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\nGCC version:  gcc version 12.2.0\n";
        // A driver folder laid out as the kernel module lays it out, GPUs in bus order.
        let root = tempfile::tempdir().unwrap();
        for (bus, model) in [
            ("0000:c1:00.0", "NVIDIA L4"),
            ("0000:41:00.0", "NVIDIA A100"),
        ] {
            let d = root.path().join("gpus").join(bus);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("information"), format!("Model: \t {model}\n")).unwrap();
        }
        std::fs::write(root.path().join("version"), version).unwrap();
        let (models, driver) = nvidia_gpus(root.path());
        assert_eq!(models, vec!["NVIDIA A100", "NVIDIA L4"]);
        assert_eq!(driver.as_deref(), Some("535.129.03"));
        // No driver: nothing, and no error.
        let none = tempfile::tempdir().unwrap();
        assert_eq!(nvidia_gpus(none.path()), (Vec::new(), None));
    }
}
