//! How one task is evaluated (docs/src/evaluation.md): a container per variant (base, human,
//! each sample), patch by the cascade, install, test, then interleaved measurement of every
//! correct variant; containers removed on every path.

mod checks;
pub mod contract;
pub mod figures;
pub mod guarded;
pub mod measure;
mod prepare;
mod results;
mod variant;
pub mod witness;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::docker::Engine;
use crate::events::{Events, emit};
use crate::source::Material;
use harness_core::events::Event;
use harness_core::records::SampleReport;
use harness_core::rule::DecisionRule;
use harness_core::status::Status;
use harness_core::task::Task;
use harness_store::predictions::Prediction;
use measure::{BenchLog, Budget};
pub use results::report_broken_task;
pub use variant::static_check;
use variant::{Role, Variant};

pub const LOG_LIMIT: usize = 1024 * 1024;

/// What every task evaluation of a run shares.
#[derive(Clone)]
pub struct EvalContext {
    pub engine: Engine,
    /// The run folder's writer: every result and log goes through it, never through a link.
    pub store: harness_store::confined::Confined,
    pub run_id: String,
    pub model: String,
    pub rule: DecisionRule,
    /// Command-line overrides of the tasks' round and time budgets.
    pub budget: Budget,
    /// Exclusive core sets; a task holds one from its image build to its last bench.
    pub slots: Arc<crate::cpu_slots::SlotPool>,
    pub fingerprint_id: String,
    pub events: Events,
    /// Whole GPUs for GPU tasks; a task holds its devices like its cores.
    pub gpus: Arc<crate::gpu::GpuPool>,
    pub gpu_options: crate::gpu::GpuOptions,
    /// Timed rounds hold it shared, an image build alone: no image of this run is built
    /// while a round is timed. Built beside the benches on cores of its own, a build still
    /// shares the cache and memory bus: the first run of the examples measured dedupe-list
    /// 19% faster than the next three (validation/2026-11-26-compare-builds.*).
    pub timing_gate: Arc<tokio::sync::RwLock<()>>,
    /// Room on Docker's disk for each install while it runs (`disk_gate`).
    pub disk_gate: Arc<crate::disk_gate::DiskGate>,
}

/// A sample to evaluate and where its results go.
#[derive(Debug, Clone)]
pub struct SampleInput {
    pub index: usize,
    pub prediction: Prediction,
    pub dir: PathBuf,
    pub result_key: String,
}

pub struct TaskInput<'a> {
    pub task: &'a Task,
    pub material: &'a Material,
    /// The image of base's and the samples' containers.
    pub image: String,
    /// The image of the human's containers (for a prebuilt image, the one whose git
    /// repository still holds the human's commit).
    pub human_image: String,
    pub samples: Vec<SampleInput>,
    /// Where base and human logs go.
    pub reference_dir: PathBuf,
    /// The cores every container of the task is pinned to.
    pub cpuset: Option<String>,
    /// The GPUs (device ids) every container of the task gets; empty for a CPU task.
    pub gpu_ids: Vec<String>,
}

/// Evaluates the samples of one task and writes each one's folder. Returns their reports.
pub async fn evaluate_task(ctx: &EvalContext, input: TaskInput<'_>) -> Vec<SampleReport> {
    let task = input.task;
    let mut variants = variant::variants_of(task, input.material, &input.samples);
    let guard_config = crate::docker::image::guard_config(task, input.material);
    // Simulated counts do not depend on what else runs: its containers use every core.
    let simulated = ctx.rule.criterion.figure() == harness_core::criterion::Figure::SimulatedCycles;
    let prep = prepare::Prep {
        ctx,
        task,
        image: &input.image,
        human_image: &input.human_image,
        cpuset: if simulated {
            None
        } else {
            input.cpuset.clone()
        },
        gpu_ids: &input.gpu_ids,
        guard_config: &guard_config,
    };
    prepare_all(&prep, &mut variants).await;
    let mut base_failure = reference_failure(&variants, "");
    let mut measured = None;
    if base_failure.is_none() {
        measured = measure_variants(&prep, &input, &mut variants).await;
        base_failure = reference_failure(&variants, " while measuring");
    }
    for v in &variants {
        for sb in v.sandbox.iter().chain(&v.replicas) {
            if let Err(e) = sb.remove().await {
                emit(&ctx.events, Event::Warn(format!("{}: {e:#}", task.id)));
            }
        }
    }
    results::write_reference_logs(&ctx.store, &input.reference_dir, &variants[..2]);
    sample_reports(ctx, &input, &variants, base_failure, measured.as_ref())
}

/// Phase 1, all variants at once on the task's cores: containers, patch, install, test;
/// then what is decided over them all, then the replicas of every variant still in (when
/// base and human are). Containers of variants that are out already, or take another's
/// timings, are removed: measurement does not need them.
async fn prepare_all(prep: &prepare::Prep<'_>, variants: &mut [Variant]) {
    let first = variants
        .iter_mut()
        .filter(|v| v.failure.is_none())
        .map(|v| prepare::prepare(prep, v, 0));
    futures::future::join_all(first).await;
    checks::check_protection(variants);
    checks::check_test_witness(variants);
    checks::share_identical_trees(variants);
    let replicas = measure::replicas(prep.task, &prep.ctx.rule, &prep.ctx.budget);
    if replicas > 1 && variants[..2].iter().all(|v| v.failure.is_none()) {
        let more = variants
            .iter_mut()
            .filter(|v| v.failure.is_none() && v.shared_with.is_none())
            .map(|v| async move {
                for r in 1..replicas {
                    if v.failure.is_some() {
                        break;
                    }
                    prepare::prepare(prep, v, r).await;
                }
            });
        futures::future::join_all(more).await;
        checks::check_protection(variants);
    }
    for v in variants
        .iter()
        .filter(|v| v.failure.is_some() || v.shared_with.is_some())
    {
        for sb in v.sandbox.iter().chain(&v.replicas) {
            let _ = sb.remove().await;
        }
    }
}

/// Base and human must both be correct, or the task itself is broken (base_failed); when
/// the infrastructure failed them, nobody's outcome is known (error, retried on resume).
fn reference_failure(variants: &[Variant], when: &str) -> Option<(Status, String)> {
    variants[..2].iter().find_map(|v| {
        v.failure.as_ref().map(|(s, d)| {
            let status = if *s == Status::Error {
                Status::Error
            } else {
                Status::BaseFailed
            };
            (status, format!("{} {s}{when}: {d}", v.label))
        })
    })
}

/// Phase 2, on the same cores, nothing else of the task running: the variants still in
/// measured together; their dropouts recorded on them. None when no sample needs it.
async fn measure_variants(
    prep: &prepare::Prep<'_>,
    input: &TaskInput<'_>,
    variants: &mut [Variant],
) -> Option<(BenchLog, f64)> {
    let (ctx, task) = (prep.ctx, input.task);
    let shared: BTreeMap<String, String> = variants
        .iter()
        .filter(|v| v.failure.is_none())
        .filter_map(|v| v.shared_with.clone().map(|s| (v.label.clone(), s)))
        .collect();
    if !variants
        .iter()
        .any(|v| v.failure.is_none() && v.shared_with.is_none() && v.label.starts_with('s'))
        && shared.is_empty()
    {
        return None;
    }
    emit(
        &ctx.events,
        Event::Phase {
            instance: task.id.clone(),
            variant: "all".into(),
            phase: "measure",
        },
    );
    let schedule = measure::schedule(task, &ctx.rule, &ctx.budget, input.cpuset.clone());
    let sampler = match gpu_sampler(ctx, &input.gpu_ids).await {
        Ok(s) => s,
        Err(why) => {
            // The check before the run found NVML answering; if it stops, the GPU task is
            // measured with no telemetry at all rather than half of it.
            emit(
                &ctx.events,
                Event::Warn(format!("{}: GPU telemetry: {why}", task.id)),
            );
            None
        }
    };
    let mut progress = None;
    let outcome = loop {
        let participants = participants(variants);
        let measured = measure::measure(
            measure::MeasureInput {
                task,
                variants: &participants,
                shared: &shared,
                rule: &ctx.rule,
                schedule: schedule.clone(),
                timeout_scale: ctx.budget.timeout_scale,
                events: &ctx.events,
                telemetry: sampler.as_ref(),
                timing_gate: &ctx.timing_gate,
            },
            progress.take(),
        )
        .await;
        drop(participants);
        match measured {
            measure::Measured::Done(outcome) => break outcome,
            measure::Measured::MoreContainers {
                progress: p,
                labels,
            } => {
                add_containers(prep, variants, &labels).await;
                progress = Some(p);
            }
        }
    };
    drop(sampler);
    let seconds = outcome.log.seconds;
    for (label, d) in &outcome.dropouts {
        if let Some(v) = variants.iter_mut().find(|v| &v.label == label) {
            if d.status == Status::PatchRejected {
                v.reject(d.detail.clone());
            } else {
                v.fail(d.status, d.detail.clone());
            }
        }
    }
    let mut log = outcome.log;
    log.shared_code_only = variants
        .iter()
        .filter(|v| v.shared_code_only && v.failure.is_none())
        .map(|v| v.label.clone())
        .collect();
    Some((log, seconds))
}

/// The variants measured on their own, with all their containers.
fn participants(variants: &[Variant]) -> Vec<measure::Participant<'_>> {
    variants
        .iter()
        .filter(|v| v.failure.is_none() && v.shared_with.is_none())
        .filter_map(|v| {
            v.sandbox.as_ref().map(|s| measure::Participant {
                label: v.label.clone(),
                sandboxes: std::iter::once(s).chain(&v.replicas).collect(),
                manifest: v.manifest.clone().unwrap_or_default(),
            })
        })
        .collect()
}

/// More containers for the variants named, each prepared like the first (patch, install,
/// test, protection checked); a variant whose new container fails is out as it would have
/// been at the start.
async fn add_containers(prep: &prepare::Prep<'_>, variants: &mut [Variant], labels: &[String]) {
    let max = measure::max_replicas(prep.task, &prep.ctx.rule, &prep.ctx.budget);
    emit(
        &prep.ctx.events,
        Event::Debug(format!(
            "{}: {} still undecided after two runs in each container: adding containers",
            prep.task.id,
            labels
                .iter()
                .filter(|l| l.starts_with('s'))
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )),
    );
    let more = variants
        .iter_mut()
        .filter(|v| v.failure.is_none() && labels.contains(&v.label))
        .map(|v| async move {
            for _ in 0..measure::GROW_STEP {
                let next = v.replicas.len() + 1;
                if v.failure.is_some() || next >= max {
                    break;
                }
                prepare::prepare(prep, v, next).await;
            }
        });
    futures::future::join_all(more).await;
    checks::check_protection(variants);
}

/// Every sample's status, report and folder.
fn sample_reports(
    ctx: &EvalContext,
    input: &TaskInput<'_>,
    variants: &[Variant],
    base_failure: Option<(Status, String)>,
    measured: Option<&(BenchLog, f64)>,
) -> Vec<SampleReport> {
    let mut reports = Vec::new();
    let spent_the_disk = checks::disk_spenders(
        input.task.resources.disk_bytes.max(0) as u64,
        variants,
        base_failure.as_ref(),
    );
    for v in &variants[2..] {
        let Role::Sample(i) = v.role else { continue };
        let s = &input.samples[i];
        let (status, detail) = match (&v.failure, &base_failure) {
            (_, Some(_)) if spent_the_disk.contains_key(&v.label) => {
                (Status::BuildFailed, spent_the_disk[&v.label].clone())
            }
            // A model outcome decided before anything ran (empty, rejected, not a diff)
            // stands even when the task is broken; anything else is not the model's fault then.
            (Some((st @ (Status::EmptyPatch | Status::PatchRejected), d)), _) => (*st, d.clone()),
            (Some((Status::PatchFailed, d)), _) if d.starts_with("not a diff") => {
                (Status::PatchFailed, d.clone())
            }
            (_, Some((st, why))) => (*st, why.clone()),
            (Some((st, d)), None) => (*st, d.clone()),
            (None, None) => (Status::Passed, String::new()),
        };
        let measured_log = measured.map(|(l, secs)| (l, *secs));
        let report = results::sample_report(
            ctx,
            input.task,
            &input.image,
            s,
            v,
            status,
            detail,
            measured_log,
        );
        results::finish_sample(
            ctx,
            input.task,
            s,
            v,
            measured.map(|(l, _)| l),
            report,
            &mut reports,
        );
    }
    reports
}

/// The NVML sampler of a GPU task's devices (None for a CPU task).
async fn gpu_sampler(
    ctx: &EvalContext,
    gpu_ids: &[String],
) -> Result<Option<harness_telemetry::Sampler>, String> {
    if gpu_ids.is_empty() {
        return Ok(None);
    }
    let devices = gpu_ids
        .iter()
        .map(|id| {
            id.parse::<harness_telemetry::DeviceSelector>()
                .map_err(|e| format!("device {id}: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut config = harness_telemetry::SamplerConfig::new(devices);
    if let Some(lib) = &ctx.gpu_options.nvml_lib {
        config.lib_path = Some(lib.clone());
    }
    config.interval = Some(Duration::from_secs_f64(1.0 / ctx.gpu_options.telemetry_hz));
    harness_telemetry::Sampler::start(config)
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The identity of a sample's result: same key on a rerun = nothing to redo.
pub fn result_key(
    task_digest: &str,
    image: &str,
    patch_sha256: &str,
    settings: &BTreeMap<&str, String>,
) -> String {
    let mut h = Sha256::new();
    h.update(task_digest.as_bytes());
    h.update([0]);
    h.update(image.as_bytes());
    h.update([0]);
    // The raw digest, as when the patch text itself was hashed here: saved keys stay valid.
    match hex::decode(patch_sha256) {
        Ok(digest) => h.update(digest),
        Err(_) => h.update(patch_sha256.as_bytes()),
    }
    for (k, v) in settings {
        h.update(k.as_bytes());
        h.update(b"=");
        h.update(v.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}
