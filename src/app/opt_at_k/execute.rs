//! The machine a run uses, and the tasks run on it: images built ahead on cores of their own, tasks evaluated on exclusive slots.

//! The main job: a validated plan in, a finished run folder and its summary out.

use std::sync::Arc;

use anyhow::Result;
use futures::StreamExt;

use crate::app::export;
use crate::app::plan::RunPlan;
use crate::core::events::Event;
use crate::core::fingerprint::Fingerprint;
use crate::core::task::Task;
use crate::sandbox::docker::Engine;
use crate::sandbox::docker::image::{TaskImage, ensure_base_images};
use crate::sandbox::docker::task_images::ensure_task_image;
use crate::sandbox::eval::{EvalContext, TaskInput, evaluate_task, report_broken_task};
use crate::sandbox::events::{Events, emit};
use crate::sandbox::gpu::{GpuPool, GpuSupport};
use crate::store::run_folder::RunDir;

use super::signals::interrupt_signal;
use super::work::TaskWork;

/// The engine and what the run knows of the machine.
pub(super) struct Machine {
    pub(super) engine: Engine,
    pub(super) fingerprint: Fingerprint,
    pub(super) fingerprint_id: String,
    pub(super) cpu_plan: crate::core::cpu_plan::CpuPlan,
    /// Whether GPU tasks can run here; None when the run has none.
    pub(super) gpu: Option<GpuSupport>,
}

impl Machine {
    /// Connects, removes what a killed run left, makes the base image when missing, takes
    /// the fingerprint and splits the cores into exclusive bench slots.
    pub(super) async fn prepare(
        plan: &RunPlan,
        tasks: &[&Task],
        events: &Events,
    ) -> Result<Machine> {
        if plan.rule.criterion.figure() == crate::core::criterion::Figure::SimulatedCycles {
            let gpu: Vec<&str> = tasks
                .iter()
                .filter(|t| t.resources.gpus > 0)
                .map(|t| t.id.as_str())
                .collect();
            if !gpu.is_empty() {
                anyhow::bail!(
                    "--criterion simulated does not apply to GPU tasks (the CPU simulator does not see what a GPU does): {}; leave them out with --instance-ids, or use strict",
                    gpu.join(", ")
                );
            }
        }
        let engine = Engine::connect().await?;
        engine.report_retries_to(events.clone());
        crate::sandbox::host_check::require(&engine).await?;
        let orphans = engine.remove_orphans().await?;
        if orphans > 0 {
            emit(
                events,
                Event::Info(format!(
                    "removed {orphans} container(s) left behind by an earlier, killed run"
                )),
            );
        }
        let gpu_tasks = tasks.iter().filter(|t| t.resources.gpus > 0).count();
        let gpu = if gpu_tasks == 0 {
            None
        } else {
            let support = crate::sandbox::gpu::check(&engine, &plan.gpu).await;
            if let GpuSupport::Unavailable { reason } = &support {
                emit(
                    events,
                    Event::Warn(format!(
                        "{gpu_tasks} GPU task(s) cannot run on this host and will be {}: {reason}",
                        if plan.gpu.skip { "skipped" } else { "`error`" }
                    )),
                );
            }
            Some(support)
        };
        let gpu_devices = match &gpu {
            Some(GpuSupport::Ready { devices }) => devices.clone(),
            _ => Vec::new(),
        };
        // Tasks that cannot run here need no base image.
        let runnable: Vec<&Task> = tasks
            .iter()
            .copied()
            .filter(|t| t.resources.gpus == 0 || !gpu_devices.is_empty())
            .collect();
        ensure_base_images(&engine, &runnable, events).await?;
        let fingerprint = crate::sandbox::fingerprint::collect(&engine)
            .await
            .with_nvml(&gpu_devices);
        let fingerprint_id = fingerprint.id();
        let machine_cores = engine.host_cpus().await.unwrap_or(fingerprint.cores);
        let width = tasks
            .iter()
            .map(|t| crate::core::cpu_plan::width_for(t.resources.cpus))
            .max()
            .unwrap_or(1);
        let cpu_plan = crate::core::cpu_plan::plan_slots(machine_cores, plan.jobs, width);
        emit(
            events,
            Event::Debug(format!(
                "bench slots (exclusive cores): {}; reserved for the harness and daemon: {:?}",
                cpu_plan.slots.join(" "),
                cpu_plan.reserved
            )),
        );
        Ok(Machine {
            engine,
            fingerprint,
            fingerprint_id,
            cpu_plan,
            gpu,
        })
    }
}

/// Runs the tasks, `--jobs` at a time, until they are done or a signal stops the run; no
/// container of this process outlives it. Images are built one at a time, in task order,
/// on the cores no bench slot holds, so the next tasks' images are ready while earlier
/// tasks are installed and tested; never while a round is timed (`timing_gate`). Returns the signal, if one came, and how many images were built.
pub(super) async fn execute(
    plan: &RunPlan,
    machine: &Machine,
    run_dir: &RunDir,
    work: &[TaskWork<'_>],
    disk_gate: crate::sandbox::disk_gate::DiskGate,
    events: &Events,
) -> (Option<&'static str>, usize) {
    let ctx = EvalContext {
        engine: machine.engine.clone(),
        store: run_dir.store(),
        run_id: plan.run_id.clone(),
        model: plan.model.clone(),
        rule: plan.rule,
        budget: plan.budget,
        slots: Arc::new(crate::sandbox::cpu_slots::SlotPool::new(&machine.cpu_plan)),
        fingerprint_id: machine.fingerprint_id.clone(),
        events: events.clone(),
        gpus: Arc::new(GpuPool::new(&match &machine.gpu {
            Some(GpuSupport::Ready { devices }) => devices.iter().map(|d| d.index).collect(),
            _ => Vec::new(),
        })),
        gpu_options: plan.gpu.clone(),
        timing_gate: Arc::new(tokio::sync::RwLock::new(())),
        disk_gate: Arc::new(disk_gate),
    };
    let images_built = std::sync::atomic::AtomicUsize::new(0);
    let mut built_tx = Vec::with_capacity(work.len());
    let mut built_rx = Vec::with_capacity(work.len());
    for _ in work {
        let (tx, rx) = tokio::sync::oneshot::channel();
        built_tx.push(tx);
        built_rx.push(rx);
    }
    let builds = async {
        for (w, tx) in work.iter().zip(built_tx) {
            let built = build_image(&ctx, machine, run_dir, w, &images_built).await;
            // A task that is gone (the run is stopping) needs no image.
            let _ = tx.send(built);
        }
    };
    let evaluations = futures::stream::iter(work.iter().zip(built_rx).map(|(w, built)| {
        let ctx = &ctx;
        async move { run_task(ctx, run_dir, w, built, plan.instance_timeout).await }
    }))
    .buffer_unordered(plan.jobs)
    .collect::<Vec<()>>();
    let interrupted = tokio::select! {
        _ = futures::future::join(builds, evaluations) => None,
        sig = interrupt_signal() => Some(sig),
    };
    if interrupted.is_some() {
        emit(
            events,
            Event::Warn(
                "interrupted: removing this run's containers; finished samples are kept".into(),
            ),
        );
    }
    machine.engine.remove_live_containers().await;
    (
        interrupted,
        images_built.load(std::sync::atomic::Ordering::SeqCst),
    )
}

/// The samples with no report written since `started` (those a stopped evaluation did not
/// save).
fn unsaved_since(
    samples: &[crate::sandbox::eval::SampleInput],
    started: std::time::SystemTime,
) -> Vec<crate::sandbox::eval::SampleInput> {
    samples
        .iter()
        .filter(|s| {
            std::fs::metadata(s.dir.join("report.json"))
                .and_then(|m| m.modified())
                .map_or(true, |t| t < started)
        })
        .cloned()
        .collect()
}

/// Why a task gets no image: the status its samples take and the reason.
pub(super) type NoImage = (crate::core::status::Status, String);

/// Builds (or finds) the task's image; a task that cannot run here gets none.
pub(super) async fn build_image(
    ctx: &EvalContext,
    machine: &Machine,
    run_dir: &RunDir,
    w: &TaskWork<'_>,
    images_built: &std::sync::atomic::AtomicUsize,
) -> Result<TaskImage, NoImage> {
    let task = w.task;
    if task.resources.gpus > 0
        && let Some(GpuSupport::Unavailable { reason }) = &machine.gpu
    {
        let status = if ctx.gpu_options.skip {
            crate::core::status::Status::Skipped
        } else {
            crate::core::status::Status::Error
        };
        let why = format!(
            "the task needs {} GPU(s) and this host cannot give them: {reason}",
            task.resources.gpus
        );
        return Err((status, why));
    }
    let material = w.material.as_ref().map_err(|e| {
        (
            crate::core::status::Status::BaseFailed,
            format!("the task's source cannot be read: {e}"),
        )
    })?;
    let log_path = super::work::build_log(run_dir, &task.id);
    emit(
        &ctx.events,
        Event::Phase {
            instance: task.id.clone(),
            variant: "image".into(),
            phase: "build",
        },
    );
    // Without cores of its own, a build takes a bench slot like a task.
    let (slot, cpuset) = match &machine.cpu_plan.build {
        Some(cores) => (None, cores.clone()),
        None => {
            let slot = ctx.slots.acquire().await;
            let cores = slot.cpuset.clone();
            (Some(slot), cores)
        }
    };
    // Alone: no round of another task is timed while this image is looked up or built.
    let alone = ctx.timing_gate.write().await;
    let built =
        ensure_task_image(&ctx.engine, task, material, &log_path, false, Some(&cpuset)).await;
    drop(alone);
    drop(slot);
    match built {
        Ok(img) => {
            if !img.cached {
                images_built.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            emit(
                &ctx.events,
                Event::ImageReady {
                    instance: task.id.clone(),
                    tag: img.tag.clone(),
                    cached: img.cached,
                    seconds: img.build_seconds,
                },
            );
            Ok(img)
        }
        Err(e) => {
            emit(&ctx.events, Event::Warn(format!("{e:#}")));
            let status = match e.downcast_ref::<crate::sandbox::docker::image::BuildFailed>() {
                Some(b) if b.task_fault => crate::core::status::Status::BaseFailed,
                _ => crate::core::status::Status::Error,
            };
            Err((status, format!("{e:#}")))
        }
    }
}

/// Rewrites every report from what the run folder holds now.
pub(super) fn refresh_reports(run_dir: &RunDir, events: &Events) {
    if let Err(e) =
        crate::store::run_folder::summarise(run_dir).and_then(|s| export::write_all(run_dir, &s))
    {
        emit(
            events,
            Event::Warn(format!("cannot write the interim reports: {e:#}")),
        );
    }
}

/// Waits for the task's image, then evaluates it on a slot of its own.
pub(super) async fn run_task(
    ctx: &EvalContext,
    run_dir: &RunDir,
    w: &TaskWork<'_>,
    built: tokio::sync::oneshot::Receiver<Result<TaskImage, NoImage>>,
    wall_limit: Option<std::time::Duration>,
) {
    let task = w.task;
    let image = match built.await {
        Ok(Ok(image)) => image,
        Ok(Err((status, why))) => {
            report_broken_task(ctx, task, &w.image, &w.samples, status, &why);
            return;
        }
        // The builder stopped (the run is being interrupted).
        Err(_) => return,
    };
    let Ok(material) = &w.material else {
        return;
    };
    // The task owns its cores from its first container to its last bench: nothing else
    // of this harness runs on them meanwhile.
    let slot = ctx.slots.acquire().await;
    let gpus = if task.resources.gpus > 0 {
        match ctx.gpus.acquire(task.resources.gpus as usize).await {
            Ok(lease) => Some(lease),
            Err(why) => {
                report_broken_task(
                    ctx,
                    task,
                    &w.image,
                    &w.samples,
                    crate::core::status::Status::Error,
                    &why,
                );
                return;
            }
        }
    } else {
        None
    };
    let started = std::time::SystemTime::now();
    let evaluation = evaluate_task(
        ctx,
        TaskInput {
            task,
            material,
            image: image.sample_tag.clone(),
            human_image: image.tag,
            samples: w.samples.clone(),
            reference_dir: super::work::reference_dir(run_dir, &ctx.model, &task.id),
            cpuset: Some(slot.cpuset.clone()),
            gpu_ids: gpus.as_ref().map(|g| g.device_ids()).unwrap_or_default(),
        },
    );
    match wall_limit {
        None => {
            evaluation.await;
        }
        Some(limit) => {
            if tokio::time::timeout(limit, evaluation).await.is_err() {
                // The evaluation is dropped: its containers go with their sandboxes.
                let unsaved = unsaved_since(&w.samples, started);
                report_broken_task(
                    ctx,
                    task,
                    &image.sample_tag,
                    &unsaved,
                    // The run's budget per instance, not any one variant's outcome (a slow
                    // sample, base or another task's image build may have spent it): not the
                    // model's, retried when the command is repeated.
                    crate::core::status::Status::Error,
                    &format!(
                        "the instance's evaluation took longer than --timeout {} s (the \
                         run's wall limit per instance); repeat the command to run it again, \
                         or give a longer --timeout",
                        limit.as_secs()
                    ),
                );
            }
        }
    }
    drop(gpus);
    drop(slot);
    refresh_reports(run_dir, &ctx.events);
}
