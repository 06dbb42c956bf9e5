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

impl Fingerprint {
    /// A short hash identifying the fingerprint, stored with every sample result.
    pub fn id(&self) -> String {
        use sha2::{Digest, Sha256};
        let text = serde_json::to_string(self).unwrap_or_default();
        hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string()
    }

    /// What NVML says of the GPUs the run may use: their models, UUIDs and the driver,
    /// over what the kernel driver's files said.
    pub fn with_nvml(mut self, devices: &[harness_telemetry::GpuInfo]) -> Fingerprint {
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
    }
}
