//! The pool of exclusive CPU slots of a [`CpuPlan`]: one task holds a slot at a time, locked
//! host-wide through a file so two harness processes never pin work to the same cores.

use std::sync::{Arc, Mutex};

use harness_core::cpu_plan::CpuPlan;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots, handed out one task at a time.
pub struct SlotPool {
    free: Arc<Mutex<Vec<String>>>,
    permits: Arc<Semaphore>,
    lock_dir: std::path::PathBuf,
}

/// A slot held by one task; returned to the pool on drop.
pub struct Slot {
    pub cpuset: String,
    free: Arc<Mutex<Vec<String>>>,
    _permit: OwnedSemaphorePermit,
    /// Held open with an exclusive lock: other harness processes on this host wait for it.
    _host_lock: Option<std::fs::File>,
}

/// An exclusive lock on a file named for the cpuset, so two harness processes on one host
/// (parallel CI jobs, tests) never pin work to the same cores at once. Blocks until free.
fn lock_cores_on_host(dir: &std::path::Path, cpuset: &str) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    let path = dir.join(format!("harness-cores-{}.lock", cpuset.replace(',', "_")));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    (rc == 0).then_some(file)
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut free) = self.free.lock() {
            free.push(self.cpuset.clone());
        }
    }
}

impl SlotPool {
    /// Slots of `plan`, locked host-wide through files in the temp folder.
    pub fn new(plan: &CpuPlan) -> SlotPool {
        SlotPool::with_lock_dir(plan, std::env::temp_dir())
    }

    pub fn with_lock_dir(plan: &CpuPlan, lock_dir: std::path::PathBuf) -> SlotPool {
        let mut free = plan.slots.clone();
        free.reverse();
        SlotPool {
            permits: Arc::new(Semaphore::new(free.len())),
            free: Arc::new(Mutex::new(free)),
            lock_dir,
        }
    }

    pub async fn acquire(&self) -> Slot {
        let permit = match self.permits.clone().acquire_owned().await {
            Ok(p) => p,
            // The semaphore is never closed.
            Err(_) => unreachable!("slot semaphore closed"),
        };
        let cpuset = self
            .free
            .lock()
            .ok()
            .and_then(|mut f| f.pop())
            .unwrap_or_else(|| "0".into());
        // The slot exists before the wait for the host lock, so a cancelled wait still
        // gives the cores back to the pool.
        let mut slot = Slot {
            cpuset: cpuset.clone(),
            free: self.free.clone(),
            _permit: permit,
            _host_lock: None,
        };
        let dir = self.lock_dir.clone();
        slot._host_lock = tokio::task::spawn_blocking(move || lock_cores_on_host(&dir, &cpuset))
            .await
            .ok()
            .flatten();
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::cpu_plan::plan_slots;

    #[tokio::test]
    async fn pool_hands_out_distinct_slots() {
        let locks = tempfile::tempdir().unwrap();
        let pool = SlotPool::with_lock_dir(&plan_slots(8, 3, 2), locks.path().to_path_buf());
        let a = pool.acquire().await;
        let b = pool.acquire().await;
        let c = pool.acquire().await;
        let mut got = vec![a.cpuset.clone(), b.cpuset.clone(), c.cpuset.clone()];
        got.sort();
        assert_eq!(got, vec!["1-2", "3-4", "5-6"]);
        // A fourth waits until one is returned (the host lock of "3-4" is this process's
        // own, released with the slot).
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(50), pool.acquire()).await;
        assert!(waiting.is_err());
        drop(b);
        let d = tokio::time::timeout(std::time::Duration::from_millis(500), pool.acquire())
            .await
            .unwrap();
        assert_eq!(d.cpuset, "3-4");
    }

    #[tokio::test]
    async fn another_pool_on_the_host_waits_for_the_cores() {
        let locks = tempfile::tempdir().unwrap();
        let plan = plan_slots(2, 1, 1);
        let one = SlotPool::with_lock_dir(&plan, locks.path().to_path_buf());
        let other = SlotPool::with_lock_dir(&plan, locks.path().to_path_buf());
        let held = one.acquire().await;
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(200), other.acquire()).await;
        assert!(waiting.is_err(), "core 1 is held by the first pool");
        drop(held);
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), other.acquire()).await;
        assert_eq!(got.unwrap().cpuset, "1");
    }
}
