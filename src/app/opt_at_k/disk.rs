//! Free disk before the run's containers start (`--disk-check`): what they may hold
//! (`core::disk`) against the free space of Docker's data root and of the results folder.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{Result, bail};

use super::execute::Machine;
use super::work::TaskWork;
use crate::app::plan::RunPlan;
use crate::core::disk::{DiskCheck, DiskNeed, FreeSpace, InstallWrites, TaskDisk, judge, need};
use crate::core::events::Event;
use crate::sandbox::disk_gate::{DiskGate, recorded};
use crate::sandbox::events::{Events, emit};
use crate::sandbox::gpu::GpuSupport;

/// What the run's containers and results may take. Counted per task that will get
/// containers here (not one whose source cannot be read, nor a GPU task on a host that
/// cannot run it): every variant (base, human, each sample still to evaluate; a sample
/// sharing another's tree has its first container too), each with the most containers it
/// may grow to (`measure::max_replicas`: 11 under strict unless `--replicas` or the task
/// fixes the count, 1 under gso and simulated), each holding what every container writes
/// (the harness's files, the guard's configuration, the largest patch as uploaded and
/// applied) and its install's writes as measured on this machine before (`install_writes`
/// in the harness's cache, by task image and install); an install not measured yet is held to its
/// limit by the run's disk gate as it runs. Tasks at once: `--jobs`, at most one per bench
/// slot (a task holds its slot from its first container to its last). Not counted: image
/// layers and a build's own containers (the images are built, or found, before, and
/// `harness doctor` checks the root's free space for them), a container's share of the
/// image (read-only, shared), tests and timed runs (they write into memory).
///
/// The results folder keeps every task's files: per variant its logs, the install and
/// test output once and the apply output of each of its containers, each at most
/// `LOG_LIMIT` as captured, and its patch; `bench.json` and the telemetry (a few figures
/// per round) are not counted.
pub(super) fn run_need(plan: &RunPlan, machine: &Machine, work: &[TaskWork<'_>]) -> DiskNeed {
    let log_limit = crate::sandbox::eval::LOG_LIMIT as u64;
    let no_gpus = matches!(machine.gpu, Some(GpuSupport::Unavailable { .. }));
    let measured = install_record().map(|p| recorded(&p)).unwrap_or_default();
    let harness_files: u64 = crate::sandbox::assets::ASSETS
        .iter()
        .map(|a| a.bytes.len() as u64)
        .sum();
    let mut tasks = Vec::new();
    let mut results_bytes = 0u64;
    for w in work {
        let Ok(material) = &w.material else { continue };
        if w.task.resources.gpus > 0 && no_gpus {
            continue;
        }
        let per =
            crate::sandbox::eval::measure::max_replicas(w.task, &plan.rule, &plan.budget) as u64;
        let variants = 2 + w.samples.len() as u64;
        let logs = variants.saturating_mul(per.saturating_add(2).saturating_mul(log_limit));
        let patches: Vec<u64> = w
            .samples
            .iter()
            .map(|s| s.prediction.patch_text().len() as u64)
            .chain(std::iter::once(material.human_patch.len() as u64))
            .collect();
        results_bytes = results_bytes
            .saturating_add(logs)
            .saturating_add(patches.iter().sum());
        let config = crate::sandbox::docker::image::guard_config(w.task, material).len() as u64;
        let largest_patch = patches.iter().copied().max().unwrap_or(0);
        tasks.push(TaskDisk {
            task: w.task.id.clone(),
            variants,
            containers_per_variant: per,
            fixed_bytes: harness_files
                .saturating_add(config)
                .saturating_add(largest_patch.saturating_mul(2))
                .saturating_add(CONTAINER_OVERHEAD)
                .saturating_add(PER_TREE_FILE.saturating_mul(material.entries.len() as u64)),
            install: if w.task.install.is_empty() {
                InstallWrites::None
            } else {
                let key = crate::core::disk::install_key(
                    &w.image,
                    &w.task.install,
                    w.task.resources.disk_bytes,
                );
                measured
                    .get(&key)
                    .map_or(InstallWrites::Unmeasured, |&b| InstallWrites::Measured(b))
            },
            disk_bytes: w.task.resources.disk_bytes.max(0) as u64,
        });
    }
    let at_once = plan.jobs.min(machine.cpu_plan.slots.len()).max(1);
    need(tasks, at_once, results_bytes)
}

/// What a container writes beyond the harness's files and the patch: the guard's manifest
/// and state, the supervisor's records, per file of the tree and per container. Measured:
/// pair-sum's containers held 3.5 MB with 2.0 MB of the harness's files (`docker ps
/// --size` during `opt-at-k --instance-ids pair-sum`); counted at more than twice that.
const CONTAINER_OVERHEAD: u64 = 4 << 20;
const PER_TREE_FILE: u64 = 512;

/// Where installs' measured writes are kept: the harness's cache (per machine: the figure
/// is this Docker's disk).
fn install_record() -> Option<std::path::PathBuf> {
    crate::app::cache_root()
        .ok()
        .map(|d| d.join("install-writes.json"))
}

/// Free space of the file system holding `path` (or, for a folder not made yet, its
/// nearest existing parent).
fn free_space(path: &Path) -> std::io::Result<FreeSpace> {
    let (free, _total, at) = crate::app::doctor::disk_space(path)?;
    Ok(FreeSpace {
        device: std::fs::metadata(&at)?.dev(),
        path: path.to_path_buf(),
        free,
    })
}

/// Docker's data root as this host sees it, or why it cannot be measured from here.
async fn docker_root(machine: &Machine) -> std::result::Result<FreeSpace, String> {
    let (host, local) = crate::app::doctor::docker_host();
    let info = machine
        .engine
        .engine_info()
        .await
        .map_err(|e| format!("the engine did not say where it keeps its data ({e:#})"))?;
    let Some(root) = info.docker_root_dir else {
        return Err("the engine did not say where it keeps its data".into());
    };
    if !local {
        return Err(format!(
            "the engine is remote ({host}): its data root {root} is on its own host"
        ));
    }
    // The folder must be there itself: a parent's file system would be another's figure
    // (an engine in a VM or another mount namespace names a path this host lacks).
    if std::fs::symlink_metadata(&root).is_err() {
        return Err(format!(
            "the engine's data root {root} is not on this host (an engine in a VM or \
             another mount namespace)"
        ));
    }
    free_space(Path::new(&root)).map_err(|e| format!("cannot read {root}'s free space: {e}"))
}

/// Checks the run fits before any container starts: refuses it when it may not
/// (`--disk-check on`), warns instead with `--disk-check off`. Docker's data root that
/// cannot be measured from here is said once, as a warning, and only the results folder
/// is checked. Returns the run's disk gate: on Docker's data root when it was measured and
/// the check is on, open otherwise.
pub(super) async fn check(
    plan: &RunPlan,
    machine: &Machine,
    work: &[TaskWork<'_>],
    events: &Events,
) -> Result<DiskGate> {
    if work.is_empty() {
        return Ok(DiskGate::new(None, None));
    }
    let need = run_need(plan, machine, work);
    let docker = match docker_root(machine).await {
        Ok(fs) => Some(fs),
        Err(why) => {
            emit(
                events,
                Event::Warn(format!(
                    "free disk for the run's containers not checked: {why}; they may hold \
                     about {} there (check with `df` on the engine's host)",
                    crate::core::disk::human(need.container_bytes)
                )),
            );
            None
        }
    };
    let gate = DiskGate::new(
        docker
            .as_ref()
            .filter(|_| plan.disk_check == DiskCheck::On)
            .map(|d| d.path.clone()),
        install_record(),
    );
    let results = free_space(&plan.results_root).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot read the results folder's free space: {e}",
            plan.results_root.display()
        )
    })?;
    let Err(short) = judge(&need, docker.as_ref(), &results) else {
        return Ok(gate);
    };
    match plan.disk_check {
        DiskCheck::On => bail!(
            "{short}\nto fit: lower --jobs, fix the containers per variant with --replicas N \
             (under strict a variant may otherwise grow to {}), lower the tasks' \
             resources.disk (the most one install may write), evaluate fewer samples per \
             run (--k, --instance-ids, --partition), or free space (`harness images gc`, \
             `docker system prune`); or start anyway with --disk-check off \
             (HARNESS_DISK_CHECK=off): a container that fills the disk then fails its \
             sample, or every sample",
            crate::core::criterion::strict::MAX_REPLICAS
        ),
        DiskCheck::Off => {
            // An event is one line on the terminal.
            let line: Vec<&str> = short.lines().map(str::trim).collect();
            emit(
                events,
                Event::Warn(format!(
                    "{} (--disk-check off: starting anyway)",
                    line.join("; ")
                )),
            );
            Ok(gate)
        }
    }
}
