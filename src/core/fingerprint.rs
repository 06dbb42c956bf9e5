//! The machine a run measured on, so results from different machines are never mixed
//! silently.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub cpu_model: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub kernel: String,
    pub docker_version: String,
    pub harness_version: String,
    pub harness_commit: String,
    /// GPU models, one per device, from the NVIDIA kernel driver (empty without one).
    pub gpus: Vec<String>,
    /// The NVIDIA kernel driver's version, when it is loaded.
    #[serde(default)]
    pub gpu_driver: Option<String>,
    /// The UUIDs of the GPUs the run may use, from NVML (absent on a machine without).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_uuids: Vec<String>,
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

/// `Model:` of one `/proc/driver/nvidia/gpus/<bus>/information` file.
pub fn nvidia_gpu_model(information: &str) -> Option<String> {
    information
        .lines()
        .find_map(|l| l.strip_prefix("Model:"))
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
}

/// The driver version in `/proc/driver/nvidia/version`
/// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 ...").
pub fn nvidia_driver_version(version_file: &str) -> Option<String> {
    let line = version_file
        .lines()
        .find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.chars().next().is_some_and(|c| c.is_ascii_digit())
                && w.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .map(str::to_string)
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

impl Fingerprint {
    /// A short hash identifying the fingerprint, stored with every sample result.
    pub fn id(&self) -> String {
        use sha2::{Digest, Sha256};
        let text = serde_json::to_string(self).unwrap_or_default();
        hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string()
    }

    /// This host's fingerprint, with the Docker engine's version as the engine gave it
    /// (see `sandbox::fingerprint::collect`).
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
            harness_commit: env!("HARNESS_GIT_COMMIT").to_string(),
            gpus,
            gpu_driver,
            gpu_uuids: Vec::new(),
        }
    }

    /// What NVML says of the GPUs the run may use: their models, UUIDs and the driver,
    /// over what the kernel driver's files said.
    pub fn with_nvml(mut self, devices: &[crate::telemetry::GpuInfo]) -> Fingerprint {
        if !devices.is_empty() {
            self.gpus = devices.iter().map(|d| d.name.clone()).collect();
            self.gpu_uuids = devices.iter().map(|d| d.uuid.clone()).collect();
            self.gpu_driver = Some(devices[0].driver_version.clone());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_driver_files() {
        let info = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 42\nGPU UUID: \t GPU-1234\n";
        assert_eq!(
            nvidia_gpu_model(info).as_deref(),
            Some("NVIDIA H100 80GB HBM3")
        );
        assert_eq!(nvidia_gpu_model("IRQ: 1\n"), None);
        let version = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(
            nvidia_driver_version(version).as_deref(),
            Some("535.129.03")
        );
        assert_eq!(nvidia_driver_version("GCC version: 12.2.0\n"), None);

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
