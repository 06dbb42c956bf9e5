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

/// One task's containers as the run may hold them at the same time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDisk {
    pub task: String,
    /// Base, human and each sample the run evaluates: every variant gets containers of
    /// its own, all made before any is removed.
    pub variants: u64,
    /// The most containers a variant may have (replicas, grown to their maximum).
    pub containers_per_variant: u64,
    /// `resources.disk`: how much one container's tree and home may grow.
    pub disk_bytes: u64,
}

impl TaskDisk {
    pub fn containers(&self) -> u64 {
        self.variants.saturating_mul(self.containers_per_variant)
    }

    pub fn bytes(&self) -> u64 {
        self.containers().saturating_mul(self.disk_bytes)
    }
}

/// The most a run may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskNeed {
    /// The tasks whose containers may exist at the same time in the worst case: the
    /// `tasks_at_once` that need most, most first.
    pub counted: Vec<TaskDisk>,
    pub tasks_at_once: usize,
    /// Containers that may exist at once, and what they may hold (Docker's data root).
    pub containers: u64,
    pub container_bytes: u64,
    /// What the run's results folder may receive (every task's, not only those at once:
    /// results stay).
    pub results_bytes: u64,
}

/// What a run may write: its containers exist while their task is evaluated (made at its
/// start, all removed at its end), and at most `tasks_at_once` tasks are evaluated at the
/// same time, so the worst case is the `tasks_at_once` tasks whose containers may hold
/// most, each with every variant grown to its most containers, each container filled to
/// its `resources.disk`.
pub fn need(mut tasks: Vec<TaskDisk>, tasks_at_once: usize, results_bytes: u64) -> DiskNeed {
    tasks.sort_by(|a, b| b.bytes().cmp(&a.bytes()).then(a.task.cmp(&b.task)));
    tasks.truncate(tasks_at_once.max(1));
    DiskNeed {
        containers: tasks
            .iter()
            .fold(0u64, |n, t| n.saturating_add(t.containers())),
        container_bytes: tasks.iter().fold(0u64, |n, t| n.saturating_add(t.bytes())),
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
            format!(
                "  {}: {} variant(s) x up to {} container(s) x resources.disk {} = {}",
                t.task,
                t.variants,
                t.containers_per_variant,
                human(t.disk_bytes),
                human(t.bytes())
            )
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

    fn task(id: &str, variants: u64, per: u64, disk: u64) -> TaskDisk {
        TaskDisk {
            task: id.into(),
            variants,
            containers_per_variant: per,
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
    fn the_tasks_that_need_most_are_counted_as_many_as_run_at_once() {
        let tasks = vec![
            task("small", 3, 1, GIB),
            task("big", 3, 11, 4 * GIB),
            task("mid", 7, 5, GIB / 4),
        ];
        let n = need(tasks.clone(), 1, 0);
        assert_eq!(n.counted.len(), 1);
        assert_eq!(n.counted[0].task, "big");
        assert_eq!((n.containers, n.container_bytes), (33, 132 * GIB));
        let n = need(tasks.clone(), 2, 5);
        assert_eq!(
            n.counted
                .iter()
                .map(|t| t.task.as_str())
                .collect::<Vec<_>>(),
            ["big", "mid"]
        );
        assert_eq!(n.containers, 33 + 35);
        assert_eq!(n.container_bytes, 132 * GIB + 35 * GIB / 4);
        assert_eq!(n.results_bytes, 5);
        // More slots than tasks: all of them; zero is taken as one.
        assert_eq!(need(tasks.clone(), 8, 0).counted.len(), 3);
        assert_eq!(need(tasks, 0, 0).counted.len(), 1);
        // No overflow on absurd figures.
        let huge = need(vec![task("x", u64::MAX, 2, u64::MAX)], 1, 0);
        assert_eq!(huge.container_bytes, u64::MAX);
    }

    #[test]
    fn a_run_that_does_not_fit_is_refused_naming_both_figures() {
        let n = need(vec![task("real-task", 3, 11, 4 * GIB)], 1, 10 << 20);
        let docker = fs("/var/lib/docker", 78 * GIB, 1);
        let err = judge(&n, Some(&docker), &fs("results", 78 * GIB, 2)).unwrap_err();
        assert!(err.contains("132.0 GiB on Docker's data root"), "{err}");
        assert!(
            err.contains("/var/lib/docker") && err.contains("78.0 GiB is free"),
            "{err}"
        );
        assert!(
            err.contains(
                "real-task: 3 variant(s) x up to 11 container(s) x resources.disk 4.0 GiB"
            ),
            "{err}"
        );
        // Enough room: fits.
        let big = fs("/var/lib/docker", 200 * GIB, 1);
        assert_eq!(judge(&n, Some(&big), &fs("results", GIB, 2)), Ok(()));
        // On one file system the results add up: 132 GiB + 10 MiB in 132 GiB is short.
        let exact = fs("/", 132 * GIB, 7);
        let err = judge(&n, Some(&exact), &fs("/results", 132 * GIB, 7)).unwrap_err();
        assert!(err.contains("holds the results folder too"), "{err}");
        assert!(err.contains("10.0 MiB"), "{err}");
        // The results folder alone, on its own file system or with Docker's root unknown.
        let err = judge(&n, Some(&big), &fs("/small", 1 << 20, 3)).unwrap_err();
        assert!(err.contains("in the results folder (/small)"), "{err}");
        assert!(judge(&n, None, &fs("/small", 1 << 20, 3)).is_err());
        assert_eq!(judge(&n, None, &fs("/results", GIB, 3)), Ok(()));
    }
}
