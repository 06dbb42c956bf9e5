//! The machine a run measured on, so results from different machines are never mixed
//! silently.

use serde::{Deserialize, Serialize};

use crate::docker::Engine;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub cpu_model: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub kernel: String,
    pub docker_version: String,
    pub harness_version: String,
    pub harness_commit: String,
    pub gpus: Vec<String>,
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

impl Fingerprint {
    /// A short hash identifying the fingerprint, stored with every sample result.
    pub fn id(&self) -> String {
        use sha2::{Digest, Sha256};
        let text = serde_json::to_string(self).unwrap_or_default();
        hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string()
    }

    pub async fn collect(engine: &Engine) -> Fingerprint {
        let docker_version = engine
            .api
            .version()
            .await
            .ok()
            .and_then(|v| v.version)
            .unwrap_or_else(|| "unknown".into());
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
            gpus: Vec::new(),
        }
    }
}
