//! GPUs: which devices the harness may hand out, whether this host can serve GPU tasks at
//! all (NVML answers, the engine has the NVIDIA runtime), and a pool that gives each GPU
//! task whole devices by id, one task per device at a time.

use std::path::PathBuf;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::docker::Engine;
use harness_telemetry::GpuInfo;

/// What the command line says about GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuOptions {
    /// `--gpus 0,2`: the device indices the harness may use (None: every device NVML lists).
    pub allowed: Option<Vec<u32>>,
    /// `--skip-gpu`: GPU tasks are `skipped` (reported apart) instead of `error` when this
    /// host cannot run them.
    pub skip: bool,
    /// `--nvml-lib`: the NVML library to load (None: the system's `libnvidia-ml.so.1`).
    pub nvml_lib: Option<PathBuf>,
    /// Telemetry samples per second while a bench run is timed.
    pub telemetry_hz: f64,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            allowed: None,
            skip: false,
            nvml_lib: None,
            telemetry_hz: DEFAULT_TELEMETRY_HZ,
        }
    }
}

pub const DEFAULT_TELEMETRY_HZ: f64 = 10.0;

/// Whether GPU tasks can run here, decided once per run before any image is made.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuSupport {
    /// The devices the harness may hand out, as NVML describes them.
    Ready { devices: Vec<GpuInfo> },
    /// Why not, said so a user knows what to fix.
    Unavailable { reason: String },
}

/// What a real GPU host needs, appended to every "cannot" message.
const NEEDS: &str = "GPU tasks need an NVIDIA driver on the host (NVML, libnvidia-ml.so.1) and the \
    NVIDIA Container Toolkit registered with Docker (`nvidia-ctk runtime configure --runtime=docker`, \
    then restart Docker)";

/// Checks NVML, `--gpus` and the engine's runtimes, in that order, and says which devices
/// GPU tasks may use. Called only when the selected tasks include a GPU task.
pub async fn check(engine: &Engine, opts: &GpuOptions) -> GpuSupport {
    let found = match harness_telemetry::list_gpus(opts.nvml_lib.clone()).await {
        Ok(found) => found,
        Err(e) => {
            return GpuSupport::Unavailable {
                reason: format!("NVML does not answer on this host: {e}. {NEEDS}"),
            };
        }
    };
    let devices = match select_devices(&found, opts.allowed.as_deref()) {
        Ok(d) => d,
        Err(reason) => return GpuSupport::Unavailable { reason },
    };
    match engine.runtimes().await {
        Ok(runtimes) if runtimes.iter().any(|r| r == "nvidia") => GpuSupport::Ready { devices },
        Ok(runtimes) => GpuSupport::Unavailable {
            reason: format!(
                "the Docker engine has no NVIDIA runtime (its runtimes: {}), so a container cannot \
                 be given a GPU. {NEEDS}",
                if runtimes.is_empty() {
                    "none listed".to_string()
                } else {
                    runtimes.join(", ")
                }
            ),
        },
        Err(e) => GpuSupport::Unavailable {
            reason: format!("cannot ask the Docker engine for its runtimes: {e:#}"),
        },
    }
}

/// The devices `--gpus` allows among those NVML lists (all of them without `--gpus`).
/// A device's NVML index is also the id its device request names.
pub fn select_devices(all: &[GpuInfo], allowed: Option<&[u32]>) -> Result<Vec<GpuInfo>, String> {
    if all.is_empty() {
        return Err(format!("NVML answers but lists no GPU. {NEEDS}"));
    }
    let Some(allowed) = allowed else {
        return Ok(all.to_vec());
    };
    let listed = || {
        all.iter()
            .map(|d| format!("{} ({})", d.index, d.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut chosen = Vec::new();
    for &id in allowed {
        match all.iter().find(|d| d.index == id) {
            Some(d) => {
                if !chosen.iter().any(|c: &GpuInfo| c.index == id) {
                    chosen.push(d.clone());
                }
            }
            None => {
                return Err(format!(
                    "--gpus names device {id}, which NVML does not list (devices: {})",
                    listed()
                ));
            }
        }
    }
    Ok(chosen)
}

/// Whole devices for GPU tasks: a task takes all the devices it needs at once (so two
/// tasks never wait on each other's half) and holds them until its last bench.
pub struct GpuPool {
    free: Mutex<Vec<u32>>,
    total: usize,
    changed: Notify,
}

/// Devices held by one task; given back when dropped.
pub struct GpuLease<'a> {
    pool: &'a GpuPool,
    pub ids: Vec<u32>,
}

impl GpuPool {
    pub fn new(indices: &[u32]) -> GpuPool {
        GpuPool {
            free: Mutex::new(indices.to_vec()),
            total: indices.len(),
            changed: Notify::new(),
        }
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// Waits until `n` devices are free together and takes them (lowest indices first).
    /// Err when the pool can never hold `n`.
    pub async fn acquire(&self, n: usize) -> Result<GpuLease<'_>, String> {
        if n > self.total {
            return Err(format!(
                "the task needs {n} GPU(s); the harness may use {} on this host",
                self.total
            ));
        }
        loop {
            let notified = self.changed.notified();
            if let Some(ids) = self.try_take(n) {
                return Ok(GpuLease { pool: self, ids });
            }
            notified.await;
        }
    }

    fn try_take(&self, n: usize) -> Option<Vec<u32>> {
        let mut free = self.free.lock().ok()?;
        if free.len() < n {
            return None;
        }
        free.sort_unstable();
        Some(free.drain(..n).collect())
    }
}

impl GpuLease<'_> {
    /// The ids a device request names.
    pub fn device_ids(&self) -> Vec<String> {
        self.ids.iter().map(u32::to_string).collect()
    }
}

impl Drop for GpuLease<'_> {
    fn drop(&mut self) {
        if let Ok(mut free) = self.pool.free.lock() {
            free.extend(self.ids.drain(..));
        }
        self.pool.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(index: u32, name: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: name.into(),
            uuid: format!("GPU-{name}"),
            driver_version: "550.54".into(),
            nvml_version: None,
        }
    }

    #[test]
    fn gpus_flag_selects_listed_devices_only() {
        let found = vec![info(0, "a"), info(1, "b"), info(2, "c")];
        let all = select_devices(&found, None).unwrap();
        assert_eq!(all.iter().map(|d| d.index).collect::<Vec<_>>(), [0, 1, 2]);
        let some = select_devices(&found, Some(&[2, 0, 2])).unwrap();
        assert_eq!(some.iter().map(|d| d.index).collect::<Vec<_>>(), [2, 0]);
        assert_eq!(some[0].name, "c");
        let err = select_devices(&found, Some(&[3])).unwrap_err();
        assert!(err.contains("--gpus names device 3"), "{err}");
        assert!(err.contains("0 (a), 1 (b), 2 (c)"), "{err}");
        assert!(
            select_devices(&[], None)
                .unwrap_err()
                .contains("lists no GPU")
        );
    }

    #[tokio::test]
    async fn one_task_per_device_and_whole_sets() {
        let pool = std::sync::Arc::new(GpuPool::new(&[0, 2]));
        assert!(
            pool.acquire(3)
                .await
                .err()
                .is_some_and(|e| e.contains("needs 3 GPU(s)"))
        );
        let a = pool.acquire(1).await.unwrap();
        assert_eq!(a.device_ids(), ["0"]);
        // Two devices at once must wait for the first lease: never half a set.
        let p2 = pool.clone();
        let waiter = tokio::spawn(async move { p2.acquire(2).await.map(|l| l.device_ids()) });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        let b = pool.acquire(1).await.unwrap();
        assert_eq!(b.device_ids(), ["2"]);
        drop(a);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "only one device is free");
        drop(b);
        let both = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(both, ["0", "2"]);
    }
}
