//! Docker's disk as a run's installs write it. A test and a timed run write into a layer
//! held in memory; the install is the one phase whose writes land on Docker's data root and
//! grow with the code, up to the task's `resources.disk` (the guard stops it there). So an
//! install starts only when the data root has room for all it may write beside the
//! installs already in flight; one that must wait waits for them, and one that cannot fit
//! even alone fails its variant as the infrastructure's (`error`), before it writes. What
//! installs wrote is recorded per task image for the next run's forecast
//! (`core::disk::InstallWrites::Measured`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use harness_core::disk::human;

/// How a refusal starts: what tells a reference starved of room from its own failure.
pub const NO_ROOM: &str = "not enough free disk to install";

/// How often a waiting install looks at the free space again when no install ends (another
/// process, or a task's containers removed, may free some).
const RECHECK: Duration = Duration::from_secs(5);

/// Free and total bytes of the file system holding `path` (or its nearest existing parent),
/// and that parent.
pub fn disk_space(path: &Path) -> std::io::Result<(u64, u64, PathBuf)> {
    use std::os::unix::ffi::OsStrExt;
    let mut p = path.to_path_buf();
    while !p.exists() {
        if !p.pop() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{}: no such folder", path.display()),
            ));
        }
    }
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a valid NUL-terminated path and `st` a zeroed statvfs the call fills.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = if st.f_frsize > 0 {
        st.f_frsize
    } else {
        st.f_bsize
    };
    Ok((
        st.f_bavail as u64 * frsize as u64,
        st.f_blocks as u64 * frsize as u64,
        p,
    ))
}

#[derive(Default)]
struct Held {
    /// Bytes the installs in flight may still write.
    reserved: u64,
    in_flight: usize,
}

/// The run's gate on Docker's disk (one per run, shared by its tasks).
pub struct DiskGate {
    /// Docker's data root as this host sees it; None: not measurable from here (a remote
    /// engine), or the check is off: every install starts at once.
    root: Option<PathBuf>,
    /// Where measured installs are kept (the harness's cache), if anywhere.
    record: Option<PathBuf>,
    held: Mutex<Held>,
    record_lock: Mutex<()>,
    released: tokio::sync::Notify,
}

/// Room held for one install while it runs; given back when dropped.
pub struct Admission<'a> {
    gate: &'a DiskGate,
    bytes: u64,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if let Ok(mut held) = self.gate.held.lock() {
            held.reserved = held.reserved.saturating_sub(self.bytes);
            held.in_flight = held.in_flight.saturating_sub(1);
        }
        self.gate.released.notify_waiters();
    }
}

impl DiskGate {
    pub fn new(root: Option<PathBuf>, record: Option<PathBuf>) -> Self {
        DiskGate {
            root,
            record,
            held: Mutex::new(Held::default()),
            record_lock: Mutex::new(()),
            released: tokio::sync::Notify::new(),
        }
    }

    /// Waits until Docker's data root has room for `bytes` beside what the installs in
    /// flight may still write; `Err` (saying both figures) when it has not even with none
    /// in flight.
    pub async fn admit(&self, bytes: u64) -> Result<Admission<'_>, String> {
        let Some(root) = &self.root else {
            return Ok(self.hold(0));
        };
        loop {
            // Made before the look, so a release between the look and the wait is not missed.
            let released = self.released.notified();
            {
                let mut held = self
                    .held
                    .lock()
                    .map_err(|_| "the disk gate's lock was poisoned".to_string())?;
                let (free, _, _) = disk_space(root).map_err(|e| {
                    format!("cannot read the free space of Docker's data root {root:?}: {e}")
                })?;
                if free >= held.reserved.saturating_add(bytes) {
                    held.reserved = held.reserved.saturating_add(bytes);
                    held.in_flight += 1;
                    drop(held);
                    return Ok(Admission { gate: self, bytes });
                }
                if held.in_flight == 0 {
                    return Err(format!(
                        "{NO_ROOM}: an install may write up to {} \
                         (resources.disk) and {} is free on Docker's data root {}; free \
                         space (`harness images gc`, `docker system prune`) or lower the \
                         task's resources.disk, then run again (finished samples are kept)",
                        human(bytes),
                        human(free),
                        root.display()
                    ));
                }
            }
            tokio::select! {
                _ = released => {}
                _ = tokio::time::sleep(RECHECK) => {}
            }
        }
    }

    fn hold(&self, bytes: u64) -> Admission<'_> {
        if let Ok(mut held) = self.held.lock() {
            held.reserved = held.reserved.saturating_add(bytes);
            held.in_flight += 1;
        }
        Admission { gate: self, bytes }
    }

    /// Keeps what base's install wrote under `key` (`core::disk::install_key`): the latest
    /// figure, so one run's outlier does not hold every later forecast (best effort).
    pub fn record(&self, key: &str, bytes: u64) {
        let Some(path) = &self.record else { return };
        let Ok(_one_writer) = self.record_lock.lock() else {
            return;
        };
        let mut all = recorded(path);
        if all.get(key) == Some(&bytes) {
            return;
        }
        all.insert(key.to_string(), bytes);
        let Ok(text) = serde_json::to_vec_pretty(&all) else {
            return;
        };
        let Some(dir) = path.parent() else { return };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) {
            use std::io::Write;
            if tmp.write_all(&text).is_ok() {
                let _ = tmp.persist(path);
            }
        }
    }
}

/// What base's installs wrote, by `install_key`, as recorded (empty when missing or unreadable).
pub fn recorded(path: &Path) -> BTreeMap<String, u64> {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_install_starts_only_with_room_for_all_it_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let (free, _, _) = disk_space(dir.path()).unwrap();
        let gate = std::sync::Arc::new(DiskGate::new(Some(dir.path().into()), None));
        // More than is free, with nothing in flight: refused, naming both figures.
        let err = gate.admit(free + (1 << 40)).await.err().unwrap();
        assert!(err.contains("not enough free disk to install"), "{err}");
        assert!(err.contains("resources.disk"), "{err}");
        // Two that fit only one at a time: the second waits for the first.
        let half = free / 2 + (1 << 20);
        let first = gate.admit(half).await.unwrap();
        let g = gate.clone();
        let second = tokio::spawn(async move { g.admit(half).await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!second.is_finished(), "the second install waits");
        drop(first);
        tokio::time::timeout(Duration::from_secs(2), second)
            .await
            .expect("admitted once the first ended")
            .unwrap()
            .unwrap();
        // No root (a remote engine, or the check off): no wait.
        let open = DiskGate::new(None, None);
        assert!(open.admit(u64::MAX).await.is_ok());
    }

    #[test]
    fn the_latest_figure_of_a_key_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache/install-writes.json");
        let gate = DiskGate::new(None, Some(path.clone()));
        gate.record("img:a", 100);
        gate.record("img:a", 40);
        gate.record("img:b", 7);
        let all = recorded(&path);
        assert_eq!(all.get("img:a"), Some(&40));
        assert_eq!(all.get("img:b"), Some(&7));
        std::fs::write(&path, "not json").unwrap();
        assert!(recorded(&path).is_empty());
    }
}
