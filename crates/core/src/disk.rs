//! Free disk, checked before a run starts its containers: what the run may write (its
//! containers on Docker's data root, its results folder) against the free space there.
//! Figures in, a verdict out; the caller measures the free space and decides what a
//! verdict does (`--disk-check`).

use std::path::PathBuf;

/// `--disk-check`: what a run does when its containers may not fit on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiskCheck {
    /// Refuse to start, naming the figures (the default).
    #[default]
    On,
    /// Say so as a warning and start anyway.
    Off,
}

/// What one install writes to its container's disk, as far as the run knows before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallWrites {
    /// The task has no install: its containers write only the harness's files and the patch.
    None,
    /// What base's install of this task wrote in the last run on this machine.
    Measured(u64),
    /// Not measured yet: each install waits for room for its whole `resources.disk` as it
    /// starts (the run's disk gate), so only the installs in flight are counted, at that.
    Unmeasured,
}

/// Where an install's writes are kept: the task image and what decides them (the install
/// commands and the limit), so that a task with another install, under the same image,
/// has a record of its own.
pub fn install_key(image: &str, install: &[String], disk_bytes: i64) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for c in install {
        h.update(c.as_bytes());
        h.update([0]);
    }
    h.update(disk_bytes.to_le_bytes());
    format!("{image} {}", &hex::encode(h.finalize())[..16])
}

/// An install's forecast from a measurement: a quarter more and `INSTALL_GROWTH`, at most
/// the limit.
pub fn install_allowance(measured: u64, limit: u64) -> u64 {
    measured
        .saturating_add(measured / 4)
        .saturating_add(INSTALL_GROWTH)
        .min(limit)
}

/// Growth allowed on a measured install, beyond a quarter more: a patch may build a little
/// more than base did; the guard's limit stops one that builds much more.
pub const INSTALL_GROWTH: u64 = 64 << 20;

/// One task's containers as the run may hold them at the same time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDisk {
    pub task: String,
    /// Base, human and each sample the run evaluates: every variant gets containers of
    /// its own, all made before any is removed.
    pub variants: u64,
    /// The most containers a variant may have (replicas, grown to their maximum).
    pub containers_per_variant: u64,
    /// What every container writes besides its install (measured: the harness's files, the
    /// guard's configuration, the task's largest patch twice, as uploaded and applied).
    pub fixed_bytes: u64,
    pub install: InstallWrites,
    /// `resources.disk`: the most one install may write (the guard stops it there).
    pub disk_bytes: u64,
}

impl TaskDisk {
    pub fn containers(&self) -> u64 {
        self.variants.saturating_mul(self.containers_per_variant)
    }

    /// An install's forecast: what was measured, a quarter more and `INSTALL_GROWTH`, at
    /// most the limit; nothing when unmeasured (the gate holds room for it as it runs).
    pub fn install_bytes(&self) -> u64 {
        match self.install {
            InstallWrites::Measured(b) => install_allowance(b, self.disk_bytes),
            InstallWrites::None | InstallWrites::Unmeasured => 0,
        }
    }

    /// What one container may hold when every container is made.
    pub fn per_container(&self) -> u64 {
        self.fixed_bytes.saturating_add(self.install_bytes())
    }

    /// Every container of the task, each with its forecast.
    pub fn bytes(&self) -> u64 {
        self.containers().saturating_mul(self.per_container())
    }

    /// Room an install in flight may need beyond its forecast: up to its limit.
    pub fn install_headroom(&self) -> u64 {
        match self.install {
            InstallWrites::None => 0,
            _ => self.disk_bytes.saturating_sub(self.install_bytes()),
        }
    }

    /// The forecast with the headroom of one install in flight: what decides which tasks
    /// need most.
    fn worst(&self) -> u64 {
        self.bytes().saturating_add(self.install_headroom())
    }
}

/// What a run may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskNeed {
    /// The tasks whose containers may exist at the same time in the worst case: the
    /// `tasks_at_once` that need most, most first.
    pub counted: Vec<TaskDisk>,
    pub tasks_at_once: usize,
    /// Containers that may exist at once, and what they may hold (Docker's data root):
    /// their forecasts and room for one install in flight beyond its forecast.
    pub containers: u64,
    pub container_bytes: u64,
    /// What the run's results folder may receive (every task's, not only those at once:
    /// results stay).
    pub results_bytes: u64,
}

/// What a run may write: its containers exist while their task is evaluated (made at its
/// start, all removed at its end), and at most `tasks_at_once` tasks are evaluated at the
/// same time, so the forecast is the `tasks_at_once` tasks whose containers may hold most,
/// each with every variant grown to its most containers, each container holding what it
/// writes besides its install and its install's measured writes; plus the largest room
/// one install in flight may take beyond its forecast (its limit: the gate lets an install
/// start only with room for all of it, so installs beyond the free space wait, one at a
/// time at worst).
pub fn need(mut tasks: Vec<TaskDisk>, tasks_at_once: usize, results_bytes: u64) -> DiskNeed {
    tasks.sort_by(|a, b| b.worst().cmp(&a.worst()).then(a.task.cmp(&b.task)));
    tasks.truncate(tasks_at_once.max(1));
    let headroom = tasks
        .iter()
        .map(TaskDisk::install_headroom)
        .max()
        .unwrap_or(0);
    DiskNeed {
        containers: tasks
            .iter()
            .fold(0u64, |n, t| n.saturating_add(t.containers())),
        container_bytes: tasks
            .iter()
            .fold(headroom, |n, t| n.saturating_add(t.bytes())),
        counted: tasks,
        tasks_at_once: tasks_at_once.max(1),
        results_bytes,
    }
}

/// Free space of the file system holding a folder, as measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeSpace {
    pub path: PathBuf,
    pub free: u64,
    /// The file system's device: two folders with the same one share their free space.
    pub device: u64,
}

/// Bytes in GiB (one decimal), MiB under a GiB.
pub fn human(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    }
}

/// How the container figure was reached, one task a line (the largest few).
fn breakdown(need: &DiskNeed) -> String {
    let mut lines: Vec<String> = need
        .counted
        .iter()
        .take(3)
        .map(|t| {
            let install = match t.install {
                InstallWrites::None => "no install".to_string(),
                InstallWrites::Measured(b) => format!(
                    "install measured {} (+25% +{})",
                    human(b),
                    human(INSTALL_GROWTH)
                ),
                InstallWrites::Unmeasured => "install not measured yet".to_string(),
            };
            let mut line = format!(
                "  {}: {} variant(s) x up to {} container(s) x {} ({install}) = {}",
                t.task,
                t.variants,
                t.containers_per_variant,
                human(t.per_container()),
                human(t.bytes())
            );
            if t.install_headroom() > 0 {
                line.push_str(&format!(
                    "; an install in flight may write up to resources.disk {}",
                    human(t.disk_bytes)
                ));
            }
            line
        })
        .collect();
    if need.counted.len() > 3 {
        lines.push(format!("  and {} more task(s)", need.counted.len() - 3));
    }
    lines.join("\n")
}

/// Whether the run fits: `Err` names what may not fit, both figures and how they were
/// counted. `docker` is None when Docker's data root could not be measured (the caller
/// says so); the results folder is checked either way. Two folders on one file system
/// share its free space: their needs add up.
pub fn judge(
    need: &DiskNeed,
    docker: Option<&FreeSpace>,
    results: &FreeSpace,
) -> Result<(), String> {
    let containers = format!(
        "containers: up to {} at once ({} task(s) at a time, the most demanding counted): \
         {}\n{}",
        need.containers,
        need.tasks_at_once,
        human(need.container_bytes),
        breakdown(need)
    );
    let results_line = format!(
        "the results folder's logs and patches: {}",
        human(need.results_bytes)
    );
    let short = |on: &FreeSpace, bytes: u64, what: &str, parts: &str| {
        format!(
            "not enough free disk: this run may write {} {what} ({}), where {} is free\n{parts}",
            human(bytes),
            on.path.display(),
            human(on.free)
        )
    };
    let shared = docker.is_some_and(|d| d.device == results.device);
    if let Some(d) = docker {
        if shared {
            let total = need.container_bytes.saturating_add(need.results_bytes);
            if total > d.free {
                return Err(short(
                    d,
                    total,
                    "on Docker's data root, which holds the results folder too",
                    &format!("{containers}\n{results_line}"),
                ));
            }
        } else if need.container_bytes > d.free {
            return Err(short(
                d,
                need.container_bytes,
                "on Docker's data root",
                &containers,
            ));
        }
    }
    if !shared && need.results_bytes > results.free {
        return Err(short(
            results,
            need.results_bytes,
            "in the results folder",
            &results_line,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    const MIB: u64 = 1 << 20;

    fn task(id: &str, variants: u64, per: u64, install: InstallWrites, disk: u64) -> TaskDisk {
        TaskDisk {
            task: id.into(),
            variants,
            containers_per_variant: per,
            fixed_bytes: 4 * MIB,
            install,
            disk_bytes: disk,
        }
    }

    fn fs(path: &str, free: u64, device: u64) -> FreeSpace {
        FreeSpace {
            path: path.into(),
            free,
            device,
        }
    }

    #[test]
    fn a_forecast_counts_what_containers_write_not_their_limits() {
        // Five variants of up to 11 containers at the 4 GiB default: 220 GiB of limits, but
        // with no install each container holds the harness's files and the patch.
        let t = task("idna-remap", 5, 11, InstallWrites::None, 4 * GIB);
        assert_eq!((t.per_container(), t.bytes()), (4 * MIB, 220 * MIB));
        assert_eq!(t.install_headroom(), 0);
        // An install not measured yet: room for one install in flight at its limit.
        let t = task("gso", 5, 11, InstallWrites::Unmeasured, 4 * GIB);
        assert_eq!(need(vec![t], 1, 0).container_bytes, 220 * MIB + 4 * GIB);
        // Measured at 100 MiB: each container 125 + 64 MiB more, and the limit's rest for
        // the install in flight.
        let t = task("gso", 5, 11, InstallWrites::Measured(100 * MIB), 4 * GIB);
        assert_eq!(t.install_bytes(), 189 * MIB);
        assert_eq!(t.per_container(), 193 * MIB);
        let n = need(vec![t], 1, 0);
        assert_eq!(n.container_bytes, 55 * 193 * MIB + (4 * GIB - 189 * MIB));
        // A measurement above the limit is held to the limit.
        let t = task("big", 1, 1, InstallWrites::Measured(8 * GIB), 4 * GIB);
        assert_eq!((t.install_bytes(), t.install_headroom()), (4 * GIB, 0));
    }

    #[test]
    fn the_tasks_that_need_most_are_counted_as_many_as_run_at_once() {
        let tasks = vec![
            task("small", 3, 1, InstallWrites::None, GIB),
            task("big", 3, 11, InstallWrites::Measured(GIB), 4 * GIB),
            task("mid", 7, 5, InstallWrites::Unmeasured, GIB / 4),
        ];
        let big = tasks[1].bytes() + tasks[1].install_headroom();
        let n = need(tasks.clone(), 1, 0);
        assert_eq!(n.counted.len(), 1);
        assert_eq!(n.counted[0].task, "big");
        assert_eq!((n.containers, n.container_bytes), (33, big));
        let n = need(tasks.clone(), 2, 5);
        assert_eq!(
            n.counted
                .iter()
                .map(|t| t.task.as_str())
                .collect::<Vec<_>>(),
            ["big", "mid"]
        );
        assert_eq!(n.containers, 33 + 35);
        // One install's headroom, the largest: installs past the free space wait.
        assert_eq!(
            n.container_bytes,
            tasks[1].bytes() + tasks[2].bytes() + tasks[1].install_headroom().max(GIB / 4)
        );
        assert_eq!(n.results_bytes, 5);
        // More slots than tasks: all of them; zero is taken as one.
        assert_eq!(need(tasks.clone(), 8, 0).counted.len(), 3);
        assert_eq!(need(tasks, 0, 0).counted.len(), 1);
        // No overflow on absurd figures.
        let huge = need(
            vec![task(
                "x",
                u64::MAX,
                2,
                InstallWrites::Measured(u64::MAX),
                u64::MAX,
            )],
            1,
            0,
        );
        assert_eq!(huge.container_bytes, u64::MAX);
    }

    #[test]
    fn a_run_that_does_not_fit_is_refused_naming_both_figures() {
        let n = need(
            vec![task(
                "real-task",
                3,
                11,
                InstallWrites::Unmeasured,
                100 * GIB,
            )],
            1,
            10 << 20,
        );
        let docker = fs("/var/lib/docker", 78 * GIB, 1);
        let err = judge(&n, Some(&docker), &fs("results", 78 * GIB, 2)).unwrap_err();
        assert!(err.contains("100.1 GiB on Docker's data root"), "{err}");
        assert!(
            err.contains("/var/lib/docker") && err.contains("78.0 GiB is free"),
            "{err}"
        );
        assert!(
            err.contains(
                "real-task: 3 variant(s) x up to 11 container(s) x 4.0 MiB (install not \
                 measured yet) = 132.0 MiB; an install in flight may write up to \
                 resources.disk 100.0 GiB"
            ),
            "{err}"
        );
        // Enough room: fits.
        let big = fs("/var/lib/docker", 200 * GIB, 1);
        assert_eq!(judge(&n, Some(&big), &fs("results", GIB, 2)), Ok(()));
        // On one file system the results add up.
        let exact = fs("/", n.container_bytes, 7);
        let err = judge(&n, Some(&exact), &fs("/results", n.container_bytes, 7)).unwrap_err();
        assert!(err.contains("holds the results folder too"), "{err}");
        assert!(err.contains("10.0 MiB"), "{err}");
        // The results folder alone, on its own file system or with Docker's root unknown.
        let err = judge(&n, Some(&big), &fs("/small", 1 << 20, 3)).unwrap_err();
        assert!(err.contains("in the results folder (/small)"), "{err}");
        assert!(judge(&n, None, &fs("/small", 1 << 20, 3)).is_err());
        assert_eq!(judge(&n, None, &fs("/results", GIB, 3)), Ok(()));
    }
}
