//! The main job: a validated plan in, a finished run folder and its summary out.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::dataset::Dataset;
use crate::docker::Engine;
use crate::docker::image::{ensure_base_images, ensure_task_image, image_tag, local_image_id};
use crate::eval::{
    EvalContext, SampleInput, TaskInput, evaluate_task, report_broken_task, result_key,
};
use crate::events::{Event, Events, emit, spawn_reporter};
use crate::fingerprint::Fingerprint;
use crate::gpu::{GpuPool, GpuSupport};
use crate::plan::RunPlan;
use crate::predictions::{LoadOptions, Prediction};
use crate::report::{self, Summary};
use crate::results::{InputFile, RunDir, RunInfo, write_json};
use crate::source::{Material, materialize};
use crate::task::Task;

/// What a finished (or interrupted) run left.
pub struct RunOutcome {
    pub run_dir: RunDir,
    pub summary: Summary,
    pub report_files: Vec<std::path::PathBuf>,
    /// Samples evaluated by this invocation.
    pub evaluated: usize,
    /// Samples whose saved result was reused.
    pub reused: usize,
    /// Task images built by this invocation.
    pub images_built: usize,
    /// The signal that stopped the run, if one did.
    pub interrupted: Option<&'static str>,
}

/// Runs `opt-at-k`; progress goes to stderr through the reporter.
pub async fn opt_at_k(plan: &RunPlan) -> Result<RunOutcome> {
    let (tx, rx) = mpsc::unbounded_channel();
    let reporter = spawn_reporter(plan.verbosity, rx);
    let result = run(plan, &tx).await;
    drop(tx);
    let _ = reporter.await;
    result
}

fn sha256_file(path: &std::path::Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// Everything a sample's result depends on besides task, image and patch.
fn measurement_settings(plan: &RunPlan, task: &Task) -> BTreeMap<&'static str, String> {
    let mut s = BTreeMap::new();
    s.insert("protocol", "interleaved-rotating-adaptive-v2".to_string());
    s.insert("criterion", plan.rule.criterion.as_str().to_string());
    s.insert("seed", plan.rule.seed.to_string());
    s.insert("estimator", plan.rule.estimator.describe());
    s.insert(
        "budget",
        format!(
            "{:?}|{:?}|{:?}|{}|{:?}|{:?}",
            plan.budget.min_rounds,
            plan.budget.max_rounds,
            plan.budget.max_seconds,
            task.measure_max_seconds,
            plan.budget.replicas,
            task.replicas
        ),
    );
    s.insert("min_speedup", plan.rule.thresholds.min_speedup.to_string());
    s.insert("opt_thresh", plan.rule.thresholds.opt_thresh.to_string());
    s.insert("timeout_scale", plan.budget.timeout_scale.to_string());
    s.insert(
        "install",
        format!("{:?}|{:?}", task.install, task.install_timeout),
    );
    s.insert(
        "test",
        format!("{}|{:?}", task.test_command, task.test_timeout),
    );
    s.insert("resources", format!("{:?}", task.resources));
    s.insert("protected", format!("{:?}", task.protected));
    let benches: Vec<String> = task
        .benches
        .iter()
        .map(|b| {
            format!(
                "{}|{}|{}|{}|{:?}|{}|{:?}",
                b.name,
                b.command,
                b.warmups,
                b.runs,
                b.timeout,
                b.metric.describe(),
                b.better
            )
        })
        .collect();
    s.insert("benches", benches.join(";"));
    s
}

struct TaskWork<'a> {
    task: &'a Task,
    material: Result<Material, String>,
    image: String,
    samples: Vec<SampleInput>,
}

/// Warnings about the input: shown as they come and kept for run.json.
struct Warnings<'a> {
    events: &'a Events,
    all: Vec<String>,
}

impl Warnings<'_> {
    fn push(&mut self, w: String) {
        emit(self.events, Event::Warn(w.clone()));
        self.all.push(w);
    }
}

/// The run, stage by stage: the input (nothing is started when it is wrong), the machine,
/// what there is to do (and what is saved already), run.json, the tasks, the reports.
async fn run(plan: &RunPlan, events: &Events) -> Result<RunOutcome> {
    let mut warnings = Warnings {
        events,
        all: Vec::new(),
    };
    let dataset = Dataset::load(&plan.dataset)?;
    let (selected, select_warnings) = dataset.select(&plan.instance_ids)?;
    for w in select_warnings {
        warnings.push(w);
    }
    let chosen = read_predictions(plan, &dataset, &selected, &mut warnings)?;
    let (tasks, partition) = match plan.partition {
        None => (selected, None),
        Some(p) => {
            let part = crate::partition::select(
                &selected,
                |id| chosen.get(id).map_or(0, BTreeMap::len),
                p,
            );
            emit(
                events,
                Event::Info(format!(
                    "partition {p}: {} of the {} selected task(s)",
                    part.len(),
                    selected.len()
                )),
            );
            let info = crate::partition::PartitionInfo {
                index: p.index,
                count: p.count,
                selected_instance_ids: selected.iter().map(|t| t.id.clone()).collect(),
                selection_digest: crate::partition::selection_digest(&selected)?,
                task_digests: Vec::new(),
            };
            (part, Some(info))
        }
    };
    let machine = Machine::prepare(plan, &tasks, events).await?;
    let run_dir = open_run_dir(plan)?;
    let planned = plan_work(plan, &tasks, &chosen, &machine, &run_dir, &mut warnings).await?;
    emit(
        events,
        Event::Planned {
            tasks: tasks.len(),
            samples: planned.total_samples,
            cached: planned.reused,
            images: planned.work.len(),
        },
    );
    for e in &planned.saved_done {
        emit(events, e.clone());
    }
    let mut info = run_info(plan, &tasks, &machine, &planned, warnings.all, partition)?;
    write_json(&run_dir.run_json(), &info)?;

    let (interrupted, images_built) =
        execute(plan, &machine, &run_dir, &planned.work, events).await;
    let retried = machine.engine.transient_retries();
    if retried > 0 {
        emit(
            events,
            Event::Info(format!(
                "docker: {retried} call(s) retried after transient engine failures"
            )),
        );
    }
    info.finished_at = Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    info.interrupted = interrupted.map(str::to_string);
    write_json(&run_dir.run_json(), &info)?;
    let summary = report::summarise(&run_dir)?;
    let report_files = report::write_all(&run_dir, &summary)?;
    let evaluated = planned.work.iter().map(|w| w.samples.len()).sum();
    Ok(RunOutcome {
        run_dir,
        summary,
        report_files,
        evaluated: if interrupted.is_some() { 0 } else { evaluated },
        reused: planned.reused,
        images_built,
        interrupted,
    })
}

/// The predictions, the first K samples of each selected instance.
fn read_predictions(
    plan: &RunPlan,
    dataset: &Dataset,
    tasks: &[&Task],
    warnings: &mut Warnings,
) -> Result<BTreeMap<String, BTreeMap<usize, Prediction>>> {
    let predictions = crate::predictions::load(
        &plan.predictions,
        &LoadOptions {
            model: plan.model.clone(),
            max_patch_bytes: crate::patch::MAX_PATCH_BYTES,
        },
    )?;
    for w in &predictions.warnings {
        warnings.push(w.clone());
    }
    for (id, preds) in &predictions.by_instance {
        if !dataset.tasks.contains_key(id)
            && !dataset.invalid.contains_key(id)
            && let Some(first) = preds.values().next()
        {
            warnings.push(format!(
                "{}: unknown instance id {id:?} (not in dataset {}); its {} prediction(s) are ignored",
                first.origin,
                plan.dataset.display(),
                preds.len()
            ));
        }
    }
    if predictions.total() == 0 {
        bail!(
            "no usable prediction in {}",
            plan.predictions
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut chosen = BTreeMap::new();
    for task in tasks {
        let mut preds = predictions
            .by_instance
            .get(&task.id)
            .cloned()
            .unwrap_or_default();
        let beyond = preds.split_off(&plan.k);
        if !beyond.is_empty() {
            emit(
                warnings.events,
                Event::Debug(format!(
                    "{}: {} sample(s) with an index of {} or more not used",
                    task.id,
                    beyond.len(),
                    plan.k
                )),
            );
        }
        chosen.insert(task.id.clone(), preds);
    }
    Ok(chosen)
}

/// The engine and what the run knows of the machine.
struct Machine {
    engine: Engine,
    fingerprint: Fingerprint,
    fingerprint_id: String,
    cpu_plan: crate::cpuset::CpuPlan,
    /// Whether GPU tasks can run here; None when the run has none.
    gpu: Option<GpuSupport>,
}

impl Machine {
    /// Connects, removes what a killed run left, makes the base image when missing, takes
    /// the fingerprint and splits the cores into exclusive bench slots.
    async fn prepare(plan: &RunPlan, tasks: &[&Task], events: &Events) -> Result<Machine> {
        let engine = Engine::connect().await?;
        engine.report_retries_to(events.clone());
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
            let support = crate::gpu::check(&engine, &plan.gpu).await;
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
        let say = |m: String| emit(events, Event::Info(m));
        ensure_base_images(&engine, &runnable, &say).await?;
        let fingerprint = Fingerprint::collect(&engine).await.with_nvml(&gpu_devices);
        let fingerprint_id = fingerprint.id();
        let machine_cores = engine.host_cpus().await.unwrap_or(fingerprint.cores);
        let width = tasks
            .iter()
            .map(|t| crate::cpuset::width_for(t.resources.cpus))
            .max()
            .unwrap_or(1);
        let cpu_plan = crate::cpuset::plan_slots(machine_cores, plan.jobs, width);
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

/// The run folder, refusing one that holds another model's run.
fn open_run_dir(plan: &RunPlan) -> Result<RunDir> {
    let run_dir = RunDir::new(&plan.results_root, &plan.run_id);
    if let Ok(previous) = run_dir.load_run_info()
        && previous.model != plan.model
    {
        bail!(
            "{}: this run folder holds model {:?}'s results, not {:?}'s; pick another --run-id",
            run_dir.root.display(),
            previous.model,
            plan.model
        );
    }
    if let Ok(previous) = run_dir.load_run_info() {
        let part = |p: Option<(usize, usize)>| match p {
            Some((i, n)) => format!("partition {i}/{n}"),
            None => "the whole selection".to_string(),
        };
        let before = previous.partition.as_ref().map(|p| (p.index, p.count));
        let now = plan.partition.map(|p| (p.index, p.count));
        if before != now {
            bail!(
                "{}: this run folder holds {} of its run, not {}; pick another --run-id",
                run_dir.root.display(),
                part(before),
                part(now)
            );
        }
    }
    std::fs::create_dir_all(&run_dir.root)
        .with_context(|| format!("{}: cannot create", run_dir.root.display()))?;
    Ok(run_dir)
}

/// What there is to do.
struct Planned<'a> {
    work: Vec<TaskWork<'a>>,
    total_samples: usize,
    reused: usize,
    /// Saved samples, announced to progress once the total is known.
    saved_done: Vec<Event>,
    expected: BTreeMap<String, Vec<crate::results::ExpectedSample>>,
    digests: Vec<String>,
}

/// Materialises every task, keys every sample, and reuses what is saved for the same task,
/// image, patch and settings on this machine.
async fn plan_work<'a>(
    plan: &RunPlan,
    tasks: &[&'a Task],
    chosen: &BTreeMap<String, BTreeMap<usize, Prediction>>,
    machine: &Machine,
    run_dir: &RunDir,
    warnings: &mut Warnings<'_>,
) -> Result<Planned<'a>> {
    let cache_dir = plan.results_root.join(".cache");
    let fingerprint_id = &machine.fingerprint_id;
    let mut planned = Planned {
        work: Vec::new(),
        total_samples: 0,
        reused: 0,
        saved_done: Vec::new(),
        expected: BTreeMap::new(),
        digests: Vec::new(),
    };
    let mut other_machine = 0usize;
    for &task in tasks {
        let material = materialize(task, &cache_dir).map_err(|e| format!("{e:#}"));
        let (digest, image) = match &material {
            Ok(m) => {
                let base_id = local_image_id(&machine.engine, &task.base_image)
                    .await?
                    .unwrap_or_else(|| task.base_image.clone());
                (m.digest.clone(), image_tag(task, m, &base_id))
            }
            Err(e) => {
                warnings.push(format!("task {}: {e}", task.id));
                (String::from("unreadable"), String::from("none"))
            }
        };
        planned.digests.push(format!("{}={digest}", task.id));
        let settings = measurement_settings(plan, task);
        let mut samples = Vec::new();
        for (&index, pred) in &chosen[&task.id] {
            planned.total_samples += 1;
            let key = result_key(&digest, &image, &pred.patch_sha256(), &settings);
            planned.expected.entry(task.id.clone()).or_default().push(
                crate::results::ExpectedSample {
                    sample: index,
                    patch_sha256: pred.patch_sha256(),
                    result_key: key.clone(),
                },
            );
            let saved = run_dir.load_sample(&plan.model, &task.id, index);
            // A result measured on another machine (or by another harness build) is never
            // mixed in: the sample is measured again here.
            if let Some(s) = &saved
                && s.result_key == key
                && &s.fingerprint_id != fingerprint_id
            {
                other_machine += 1;
            }
            if let Some(saved) = saved
                && saved.result_key == key
                && &saved.fingerprint_id == fingerprint_id
                && !saved.status.retried_on_resume()
            {
                planned.reused += 1;
                planned.saved_done.push(Event::SampleDone {
                    instance: task.id.clone(),
                    sample: index,
                    status: saved.status,
                    opt_commit: saved.opt_commit,
                    speedup: saved.opt_stats.as_ref().map(|s| s.gm_speedup_patch_base),
                    cached: true,
                });
                continue;
            }
            samples.push(SampleInput {
                index,
                prediction: pred.clone(),
                dir: run_dir.sample_dir(&plan.model, &task.id, index),
                result_key: key,
            });
        }
        if !samples.is_empty() {
            planned.work.push(TaskWork {
                task,
                material,
                image,
                samples,
            });
        }
    }
    if other_machine > 0 {
        warnings.push(format!(
            "{other_machine} saved sample(s) in {} were measured on another machine or harness build \
             (fingerprint differs from {fingerprint_id}); measuring them again here rather than mixing",
            run_dir.root.display()
        ));
    }
    Ok(planned)
}

/// run.json as the run starts.
fn run_info(
    plan: &RunPlan,
    tasks: &[&Task],
    machine: &Machine,
    planned: &Planned,
    warnings: Vec<String>,
    partition: Option<crate::partition::PartitionInfo>,
) -> Result<RunInfo> {
    Ok(RunInfo {
        schema_version: crate::results::SCHEMA_VERSION,
        run_id: plan.run_id.clone(),
        model: plan.model.clone(),
        k: plan.k,
        command: plan.command.clone(),
        dataset: plan.dataset.display().to_string(),
        dataset_digest: hex::encode(Sha256::digest(planned.digests.join("\n").as_bytes())),
        instance_ids: tasks.iter().map(|t| t.id.clone()).collect(),
        predictions: plan
            .predictions
            .iter()
            .map(|p| {
                Ok(InputFile {
                    path: p.display().to_string(),
                    sha256: sha256_file(p)?,
                })
            })
            .collect::<Result<_>>()?,
        criterion: plan.rule.criterion.as_str().to_string(),
        thresholds: plan.rule.thresholds,
        decision_rule: plan.rule,
        min_rounds: plan.budget.min_rounds,
        max_rounds: plan.budget.max_rounds,
        max_measure_seconds: plan.budget.max_seconds,
        timeout_scale: plan.budget.timeout_scale,
        jobs: plan.jobs,
        cpu_plan: machine.cpu_plan.clone(),
        fingerprint: machine.fingerprint.clone(),
        fingerprint_id: machine.fingerprint_id.clone(),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        finished_at: None,
        warnings,
        samples: Some(planned.expected.clone()),
        interrupted: None,
        regradings: Vec::new(),
        replicas: plan.budget.replicas,
        partition: partition.map(|p| crate::partition::PartitionInfo {
            task_digests: planned.digests.clone(),
            ..p
        }),
        merged_from: Vec::new(),
    })
}

/// Runs the tasks, `--jobs` at a time, until they are done or a signal stops the run; no
/// container of this process outlives it. Images are built one at a time, in task order,
/// on the cores no bench slot holds, so the next tasks' images are ready while earlier
/// tasks are measured. Returns the signal, if one came, and how many images were built.
async fn execute(
    plan: &RunPlan,
    machine: &Machine,
    run_dir: &RunDir,
    work: &[TaskWork<'_>],
    events: &Events,
) -> (Option<&'static str>, usize) {
    let ctx = EvalContext {
        engine: machine.engine.clone(),
        run_id: plan.run_id.clone(),
        model: plan.model.clone(),
        rule: plan.rule,
        budget: plan.budget,
        slots: Arc::new(crate::cpuset::SlotPool::new(&machine.cpu_plan)),
        fingerprint_id: machine.fingerprint_id.clone(),
        events: events.clone(),
        gpus: Arc::new(GpuPool::new(&match &machine.gpu {
            Some(GpuSupport::Ready { devices }) => devices.iter().map(|d| d.index).collect(),
            _ => Vec::new(),
        })),
        gpu_options: plan.gpu.clone(),
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
        async move { run_task(ctx, run_dir, w, built).await }
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

/// The first SIGINT or SIGTERM the process got, once [`watch_signals`] has started
/// listening. Sticky, so a signal that arrives while no run is executing (between the
/// entries of a batch, or while a run is still planning) is not lost.
static SIGNALS: std::sync::OnceLock<tokio::sync::watch::Receiver<Option<&'static str>>> =
    std::sync::OnceLock::new();

/// Starts listening for SIGINT (Ctrl-C) and SIGTERM (a CI runner cancelling) for the rest
/// of the process; from then on they no longer end it: the run (or batch) stops itself.
pub fn watch_signals() -> tokio::sync::watch::Receiver<Option<&'static str>> {
    SIGNALS
        .get_or_init(|| {
            let (tx, rx) = tokio::sync::watch::channel(None);
            tokio::spawn(async move {
                let sig = wait_for_signal().await;
                let _ = tx.send(Some(sig));
                // Kept open so receivers wait on the value rather than on a closed channel.
                std::future::pending::<()>().await;
            });
            rx
        })
        .clone()
}

/// The signal that stopped the process's work, if one came since [`watch_signals`].
pub fn interrupted() -> Option<&'static str> {
    SIGNALS.get().and_then(|rx| *rx.borrow())
}

/// Resolves when the process has got SIGINT or SIGTERM, naming it: both stop the run the
/// same way.
async fn interrupt_signal() -> &'static str {
    let mut rx = watch_signals();
    loop {
        if let Some(sig) = *rx.borrow_and_update() {
            return sig;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn wait_for_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        _ => {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

/// Why a task gets no image: the status its samples take and the reason.
type NoImage = (crate::results::Status, String);

/// Builds (or finds) the task's image; a task that cannot run here gets none.
async fn build_image(
    ctx: &EvalContext,
    machine: &Machine,
    run_dir: &RunDir,
    w: &TaskWork<'_>,
    images_built: &std::sync::atomic::AtomicUsize,
) -> Result<String, NoImage> {
    let task = w.task;
    if task.resources.gpus > 0
        && let Some(GpuSupport::Unavailable { reason }) = &machine.gpu
    {
        let status = if ctx.gpu_options.skip {
            crate::results::Status::Skipped
        } else {
            crate::results::Status::Error
        };
        let why = format!(
            "the task needs {} GPU(s) and this host cannot give them: {reason}",
            task.resources.gpus
        );
        return Err((status, why));
    }
    let material = w.material.as_ref().map_err(|e| {
        (
            crate::results::Status::BaseFailed,
            format!("the task's source cannot be read: {e}"),
        )
    })?;
    let log_path = run_dir
        .root
        .join("images")
        .join(format!("{}.build.log", task.id));
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
    let built =
        ensure_task_image(&ctx.engine, task, material, &log_path, false, Some(&cpuset)).await;
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
            Ok(img.tag)
        }
        Err(e) => {
            emit(&ctx.events, Event::Warn(format!("{e:#}")));
            let status = match e.downcast_ref::<crate::docker::image::BuildFailed>() {
                Some(b) if b.task_fault => crate::results::Status::BaseFailed,
                _ => crate::results::Status::Error,
            };
            Err((status, format!("{e:#}")))
        }
    }
}

/// Waits for the task's image, then evaluates it on a slot of its own.
async fn run_task(
    ctx: &EvalContext,
    run_dir: &RunDir,
    w: &TaskWork<'_>,
    built: tokio::sync::oneshot::Receiver<Result<String, NoImage>>,
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
                    crate::results::Status::Error,
                    &why,
                );
                return;
            }
        }
    } else {
        None
    };
    evaluate_task(
        ctx,
        TaskInput {
            task,
            material,
            image,
            samples: w.samples.clone(),
            reference_dir: run_dir
                .model_dir(&ctx.model)
                .join(&task.id)
                .join("reference"),
            cpuset: Some(slot.cpuset.clone()),
            gpu_ids: gpus.as_ref().map(|g| g.device_ids()).unwrap_or_default(),
        },
    )
    .await;
    drop(gpus);
    drop(slot);
}
