//! How one task is evaluated (PRODUCT.md section 4): a container per variant (base, human,
//! each sample), patch by the cascade, install, test, then interleaved measurement of every
//! correct variant; containers removed on every path.

pub mod guarded;
pub mod measure;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::docker::container::{Sandbox, SandboxSpec};
use crate::docker::{Engine, LABEL_INSTANCE, LABEL_RUN, LABEL_VARIANT};
use crate::events::{Event, Events, emit};
use crate::patch::{self, PatchCheck};
use crate::predictions::{PatchBody, Prediction};
use crate::results::{PhaseSeconds, SampleReport, Status, write_atomic, write_json};
use crate::rule::DecisionRule;
use crate::source::Material;
use crate::stats::Decision;
use crate::task::Task;
use crate::verdict::judge;
use measure::{BenchLog, Budget};

const APPLY_SCRIPT: &str = include_str!("../../harness/apply_patch.sh");
const TIMER_SCRIPT: &str = include_str!("../../harness/timed_run.py");
pub const GUARD_SCRIPT: &str = include_str!("../../harness/guard.py");
/// The harness's own files in every container (root-owned; watched by the guard).
pub const HARNESS_FILES: [&str; 3] = [
    "opt/harness/apply_patch.sh",
    "opt/harness/timed_run.py",
    "opt/harness/guard.py",
];
const PATCH_PATH: &str = "/opt/harness/patch.diff";
pub(crate) const LOG_LIMIT: usize = 1024 * 1024;
const APPLY_TIMEOUT: Duration = Duration::from_secs(120);
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// What every task evaluation of a run shares.
#[derive(Clone)]
pub struct EvalContext {
    pub engine: Engine,
    pub run_id: String,
    pub model: String,
    pub rule: DecisionRule,
    /// Command-line overrides of the tasks' round and time budgets.
    pub budget: Budget,
    /// Exclusive core sets; a task holds one from its image build to its last bench.
    pub slots: Arc<crate::cpuset::SlotPool>,
    pub fingerprint_id: String,
    pub events: Events,
    /// Whole GPUs for GPU tasks; a task holds its devices like its cores.
    pub gpus: Arc<crate::gpu::GpuPool>,
    pub gpu_options: crate::gpu::GpuOptions,
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
    pub image: String,
    pub samples: Vec<SampleInput>,
    /// Where base and human logs go.
    pub reference_dir: PathBuf,
    /// The cores every container of the task is pinned to.
    pub cpuset: Option<String>,
    /// The GPUs (device ids) every container of the task gets; empty for a CPU task.
    pub gpu_ids: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Base,
    Human,
    Sample(usize),
}

/// One variant's way through the phases.
struct Variant {
    label: String,
    role: Role,
    patch: Option<String>,
    sandbox: Option<Sandbox>,
    /// More containers of the same tree, prepared up to install: the measurement rotates
    /// over all of them, so no one container's lasting offset decides the verdict.
    replicas: Vec<Sandbox>,
    /// `None` while it is still fine.
    failure: Option<(Status, String)>,
    strategy: Option<String>,
    apply_log: String,
    build_log: String,
    test_log: String,
    secs: PhaseSeconds,
    /// The watched files right after the patch (see `guarded`).
    manifest: Option<guarded::Snapshot>,
    /// What install and test changed among them, by phase.
    phase_changes: Vec<(&'static str, guarded::Snapshot)>,
    /// Digest of the tree after the patch (see `guarded::AfterApply`).
    tree: Option<String>,
    /// The same, with changed Python files counted by their syntax trees.
    code: Option<String>,
    /// The variant whose timings this one takes: its tree is byte-identical, or differs
    /// only in the comments and layout of Python files (`shared_code_only`).
    shared_with: Option<String>,
    shared_code_only: bool,
}

impl Variant {
    fn new(label: &str, role: Role, patch: Option<String>) -> Variant {
        Variant {
            label: label.to_string(),
            role,
            patch,
            sandbox: None,
            replicas: Vec::new(),
            failure: None,
            strategy: None,
            apply_log: String::new(),
            build_log: String::new(),
            test_log: String::new(),
            secs: PhaseSeconds::default(),
            manifest: None,
            phase_changes: Vec::new(),
            tree: None,
            code: None,
            shared_with: None,
            shared_code_only: false,
        }
    }

    fn fail(&mut self, status: Status, detail: String) {
        if self.failure.is_none() {
            self.failure = Some((status, detail));
        }
    }

    /// A protection breach outranks whatever else went wrong: the sample is rejected.
    fn reject(&mut self, detail: String) {
        if !matches!(self.failure, Some((Status::PatchRejected, _))) {
            self.failure = Some((Status::PatchRejected, detail));
        }
    }
}

/// The host-side check of a sample's patch, before any container: empty, too large, not a
/// diff, or reaching a protected path, `.git`, outside the tree, through a symlink, or
/// shadowing a standard-library module with a new file.
pub fn static_check(pred: &Prediction, task: &Task, material: Option<&Material>) -> PatchCheck {
    let protection =
        crate::protect::Protection::for_task(task, material.into_iter().flat_map(|m| m.paths()));
    if let PatchBody::TooLarge { bytes, .. } = &pred.body {
        return PatchCheck::Rejected(format!(
            "patch is {bytes} bytes, above the limit of {}",
            patch::MAX_PATCH_BYTES
        ));
    }
    let text = pred.patch_text();
    let symlinks = material.map(|m| m.symlinks()).unwrap_or_default();
    match patch::check_with(text, |p| protection.is_protected(p), &symlinks) {
        PatchCheck::Ok(paths) => {
            for p in &paths {
                let new = material.is_some_and(|m| !m.has_path_or_folder(p));
                if new && let Some(module) = protection.shadowed_stdlib(p) {
                    return PatchCheck::Rejected(format!(
                        "new file {p:?} would be imported instead of the standard library's `{module}` module"
                    ));
                }
            }
            PatchCheck::Ok(paths)
        }
        other => other,
    }
}

/// What goes into a sample's `patch.diff`: the patch, or for one too large to keep, what
/// it was.
fn patch_file_text(pred: &Prediction) -> String {
    match &pred.body {
        PatchBody::TooLarge { bytes, sha256 } => format!(
            "# patch of {bytes} bytes (sha256 {sha256}) not kept: above the limit of {} bytes\n",
            patch::MAX_PATCH_BYTES
        ),
        _ => pred.patch_text().to_string(),
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Records the samples of a task that cannot be evaluated at all (its image does not
/// build, its source cannot be read): not the model's fault, except for patches that are
/// empty or rejected whatever the task.
pub fn report_broken_task(
    ctx: &EvalContext,
    task: &Task,
    image: &str,
    samples: &[SampleInput],
    status: Status,
    why: &str,
) -> Vec<SampleReport> {
    let mut reports = Vec::new();
    for s in samples {
        let mut v = Variant::new(
            &format!("s{}", s.index),
            Role::Sample(0),
            Some(patch_file_text(&s.prediction)),
        );
        let (status, detail) = match static_check(&s.prediction, task, None) {
            // Not attempted at all: whatever the patch, nothing of it was looked at.
            _ if status == Status::Skipped => (status, why.to_string()),
            PatchCheck::Empty => (Status::EmptyPatch, "the patch is empty".to_string()),
            PatchCheck::Rejected(why) => (Status::PatchRejected, why),
            PatchCheck::NotADiff(why) => (Status::PatchFailed, format!("not a diff: {why}")),
            PatchCheck::Ok(_) => (status, why.to_string()),
        };
        v.apply_log = format!("{status}: {detail}\n");
        let report = sample_report(ctx, task, image, s, &v, status, detail, None);
        finish_sample(ctx, task, s, &v, None, report, &mut reports);
    }
    reports
}

#[allow(clippy::too_many_arguments)]
fn sample_report(
    ctx: &EvalContext,
    task: &Task,
    image: &str,
    s: &SampleInput,
    v: &Variant,
    status: Status,
    detail: String,
    measured: Option<(&BenchLog, f64)>,
) -> SampleReport {
    let mut secs = v.secs.clone();
    let mut judgement = None;
    let mut energy = None;
    if let Some((log, seconds)) = measured {
        secs.measure = seconds;
        if status == Status::Passed {
            judgement = Some(judge(log, &v.label, &ctx.rule));
            energy = log.energy(&v.label);
        }
    }
    let mut report = SampleReport {
        schema_version: crate::results::SCHEMA_VERSION,
        instance_id: task.id.clone(),
        model: ctx.model.clone(),
        model_name_or_path: s.prediction.model_name_or_path.clone(),
        sample: s.index,
        origin: s.prediction.origin.clone(),
        status,
        detail,
        apply_strategy: v.strategy.clone(),
        patch_sha256: s.prediction.patch_sha256(),
        image: image.to_string(),
        result_key: s.result_key.clone(),
        criterion: String::new(),
        opt_base: false,
        opt_commit: false,
        decision_base: Decision::No,
        decision_commit: Decision::No,
        inconclusive: false,
        opt_stats: None,
        intervals: None,
        bench_means: Vec::new(),
        measured_rounds: 0,
        shared_with: v.shared_with.clone(),
        energy,
        fingerprint_id: ctx.fingerprint_id.clone(),
        seconds: secs,
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        finished_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    crate::verdict::apply_to(&mut report, judgement.as_ref(), &ctx.rule);
    report
}

fn finish_sample(
    ctx: &EvalContext,
    task: &Task,
    s: &SampleInput,
    v: &Variant,
    log: Option<&BenchLog>,
    report: SampleReport,
    reports: &mut Vec<SampleReport>,
) {
    if let Err(e) = write_sample(&s.dir, v, log, &report) {
        emit(
            &ctx.events,
            Event::Warn(format!(
                "{}/{}: cannot write results: {e:#}",
                task.id, s.index
            )),
        );
    }
    emit(
        &ctx.events,
        Event::SampleDone {
            instance: task.id.clone(),
            sample: s.index,
            status: report.status,
            opt_commit: report.opt_commit,
            speedup: report.opt_stats.as_ref().map(|st| st.gm_speedup_patch_base),
            cached: false,
        },
    );
    reports.push(report);
}

/// Evaluates the samples of one task and writes each one's folder. Returns their reports.
pub async fn evaluate_task(ctx: &EvalContext, input: TaskInput<'_>) -> Vec<SampleReport> {
    let task = input.task;
    let mut variants = vec![
        Variant::new("base", Role::Base, None),
        Variant::new(
            "human",
            Role::Human,
            Some(input.material.human_patch.clone()),
        ),
    ];
    for (i, s) in input.samples.iter().enumerate() {
        let mut v = Variant::new(
            &format!("s{}", s.index),
            Role::Sample(i),
            Some(patch_file_text(&s.prediction)),
        );
        match static_check(&s.prediction, task, Some(input.material)) {
            PatchCheck::Empty => {
                v.apply_log = "empty patch: nothing to apply\n".into();
                v.fail(Status::EmptyPatch, "the patch is empty".into());
            }
            PatchCheck::Rejected(why) => {
                v.apply_log = format!("patch rejected before applying: {why}\n");
                v.fail(Status::PatchRejected, why);
            }
            PatchCheck::NotADiff(why) => {
                v.apply_log = format!("not a diff, nothing to apply: {why}\n");
                v.fail(Status::PatchFailed, format!("not a diff: {why}"));
            }
            PatchCheck::Ok(paths) => {
                v.apply_log = format!("paths touched: {}\n", paths.join(", "));
            }
        }
        variants.push(v);
    }

    // Phase 1: containers, patch, install, test — all variants at once, on the task's cores.
    let guard_config = crate::docker::image::guard_config(task, input.material);
    let futures = variants
        .iter_mut()
        .filter(|v| v.failure.is_none())
        .map(|v| {
            prepare(
                ctx,
                task,
                &input.image,
                input.cpuset.clone(),
                &input.gpu_ids,
                &guard_config,
                v,
                0,
            )
        });
    futures::future::join_all(futures).await;
    check_protection(&mut variants);
    share_identical_trees(&mut variants);
    // Replicas of every variant still in, when base and human are.
    let replicas = measure::replicas(task, &ctx.rule, &ctx.budget);
    if replicas > 1 && variants[..2].iter().all(|v| v.failure.is_none()) {
        let futures = variants
            .iter_mut()
            .filter(|v| v.failure.is_none() && v.shared_with.is_none())
            .map(|v| async {
                for r in 1..replicas {
                    if v.failure.is_some() {
                        break;
                    }
                    prepare(
                        ctx,
                        task,
                        &input.image,
                        input.cpuset.clone(),
                        &input.gpu_ids,
                        &guard_config,
                        v,
                        r,
                    )
                    .await;
                }
            });
        futures::future::join_all(futures).await;
        check_protection(&mut variants);
    }
    // Containers of variants that are out already, or take another's timings, are not
    // needed for measurement.
    for v in variants
        .iter()
        .filter(|v| v.failure.is_some() || v.shared_with.is_some())
    {
        for sb in v.sandbox.iter().chain(&v.replicas) {
            let _ = sb.remove().await;
        }
    }

    // Base and human must both be correct, or the task itself is broken (base_failed); when
    // the infrastructure failed them, nobody's outcome is known (error, retried on resume).
    let reference_failure = |variants: &[Variant], when: &str| {
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
    };

    // Phase 2: measurement, on the same cores, nothing else of the task running.
    let mut log: Option<BenchLog> = None;
    let mut measure_secs = 0.0;
    let mut base_failure = reference_failure(&variants, "");
    if base_failure.is_none() {
        let shared: BTreeMap<String, String> = variants
            .iter()
            .filter(|v| v.failure.is_none())
            .filter_map(|v| v.shared_with.clone().map(|s| (v.label.clone(), s)))
            .collect();
        let participants: Vec<measure::Participant> = variants
            .iter()
            .filter(|v| v.failure.is_none() && v.shared_with.is_none())
            .filter_map(|v| {
                v.sandbox.as_ref().map(|s| measure::Participant {
                    label: v.label.clone(),
                    sandboxes: std::iter::once(s).chain(&v.replicas).collect(),
                    manifest: v.manifest.clone().unwrap_or_default(),
                })
            })
            .collect();
        let wanted = participants.iter().any(|p| p.label.starts_with('s')) || !shared.is_empty();
        if wanted {
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
                    // The check before the run found NVML answering; if it stops, the GPU
                    // task is measured with no telemetry at all rather than half of it.
                    emit(
                        &ctx.events,
                        Event::Warn(format!("{}: GPU telemetry: {why}", task.id)),
                    );
                    None
                }
            };
            let outcome = measure::measure(
                task,
                &participants,
                &shared,
                &ctx.rule,
                schedule,
                ctx.budget.timeout_scale,
                &ctx.events,
                sampler.as_ref(),
            )
            .await;
            drop(sampler);
            measure_secs = outcome.log.seconds;
            for (label, d) in &outcome.dropouts {
                if let Some(v) = variants.iter_mut().find(|v| &v.label == label) {
                    if d.status == Status::PatchRejected {
                        v.reject(d.detail.clone());
                    } else {
                        v.fail(d.status, d.detail.clone());
                    }
                }
            }
            base_failure = reference_failure(&variants, " while measuring");
            let mut outcome_log = outcome.log;
            outcome_log.shared_code_only = variants
                .iter()
                .filter(|v| v.shared_code_only && v.failure.is_none())
                .map(|v| v.label.clone())
                .collect();
            log = Some(outcome_log);
        }
    }

    for v in &variants {
        for sb in v.sandbox.iter().chain(&v.replicas) {
            if let Err(e) = sb.remove().await {
                emit(&ctx.events, Event::Warn(format!("{}: {e:#}", task.id)));
            }
        }
    }

    write_reference_logs(&input.reference_dir, &variants[..2]);

    // Reports.
    let mut reports = Vec::new();
    for v in &variants[2..] {
        let Role::Sample(i) = v.role else { continue };
        let s = &input.samples[i];
        let (status, detail) = match (&v.failure, &base_failure) {
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
        let measured = log.as_ref().map(|l| (l, measure_secs));
        let report = sample_report(ctx, task, &input.image, s, v, status, detail, measured);
        finish_sample(ctx, task, s, v, log.as_ref(), report, &mut reports);
    }
    reports
}

/// The NVML sampler of a GPU task's devices (None for a CPU task).
async fn gpu_sampler(
    ctx: &EvalContext,
    gpu_ids: &[String],
) -> Result<Option<crate::telemetry::Sampler>, String> {
    if gpu_ids.is_empty() {
        return Ok(None);
    }
    let devices = gpu_ids
        .iter()
        .map(|id| {
            id.parse::<crate::telemetry::DeviceSelector>()
                .map_err(|e| format!("device {id}: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut config = crate::telemetry::SamplerConfig::new(devices);
    if let Some(lib) = &ctx.gpu_options.nvml_lib {
        config.lib_path = Some(lib.clone());
    }
    config.interval = Some(Duration::from_secs_f64(1.0 / ctx.gpu_options.telemetry_hz));
    crate::telemetry::Sampler::start(config)
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}

/// A sample whose tree is byte-identical to base's, human's or an earlier sample's is not
/// measured again: it takes that variant's timings (identical to human's: HM 1 exactly).
fn share_identical_trees(variants: &mut [Variant]) {
    // (label, tree, code) of every variant measured on its own.
    let mut seen: Vec<(String, String, Option<String>)> = Vec::new();
    for v in variants.iter_mut() {
        let (None, Some(tree)) = (&v.failure, &v.tree) else {
            continue;
        };
        let is_sample = matches!(v.role, Role::Sample(_));
        let identical = seen.iter().find(|(_, t, _)| t == tree);
        let same_code = v
            .code
            .as_ref()
            .and_then(|c| seen.iter().find(|(_, _, o)| o.as_ref() == Some(c)));
        match (identical, same_code) {
            (Some((label, _, _)), _) if is_sample => {
                v.apply_log.push_str(&format!(
                    "the patched tree is byte-identical to {label}'s: not measured again, {label}'s timings are this sample's\n"
                ));
                v.shared_with = Some(label.clone());
            }
            (None, Some((label, _, _))) if is_sample => {
                v.apply_log.push_str(&format!(
                    "the patched tree differs from {label}'s only in the comments and layout of Python files (their syntax trees are equal, so they run the same instructions; only line numbers differ): not measured again, {label}'s timings are this sample's\n"
                ));
                v.shared_with = Some(label.clone());
                v.shared_code_only = true;
            }
            _ => seen.push((v.label.clone(), tree.clone(), v.code.clone())),
        }
    }
}

fn write_sample(
    dir: &std::path::Path,
    v: &Variant,
    log: Option<&BenchLog>,
    report: &SampleReport,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    // The old report goes first: a run killed half-way through leaves no finished-looking sample.
    let _ = std::fs::remove_file(dir.join("report.json"));
    write_atomic(
        &dir.join("patch.diff"),
        v.patch.as_deref().unwrap_or("").as_bytes(),
    )?;
    write_atomic(&dir.join("apply.log"), v.apply_log.as_bytes())?;
    write_atomic(&dir.join("build.log"), v.build_log.as_bytes())?;
    write_atomic(&dir.join("test_output.txt"), v.test_log.as_bytes())?;
    match log.filter(|l| l.covers(&v.label)) {
        Some(log) => {
            let mut mine = log.clone();
            mine.sample_variant = Some(v.label.clone());
            write_json(&dir.join("bench.json"), &mine)?;
            if !log.telemetry_lines.is_empty() {
                let mut text = log.telemetry_lines.join("\n");
                text.push('\n');
                write_atomic(&dir.join("telemetry.jsonl"), text.as_bytes())?;
            }
        }
        None => {
            let _ = std::fs::remove_file(dir.join("bench.json"));
        }
    }
    write_json(&dir.join("report.json"), report)
}

fn write_reference_logs(dir: &std::path::Path, refs: &[Variant]) {
    for v in refs {
        let d = dir.join(&v.label);
        if std::fs::create_dir_all(&d).is_err() {
            continue;
        }
        let status = match &v.failure {
            Some((s, detail)) => format!("{s}: {detail}\n"),
            None => "ok\n".into(),
        };
        let _ = write_atomic(&d.join("status.txt"), status.as_bytes());
        let _ = write_atomic(&d.join("apply.log"), v.apply_log.as_bytes());
        let _ = write_atomic(&d.join("build.log"), v.build_log.as_bytes());
        let _ = write_atomic(&d.join("test_output.txt"), v.test_log.as_bytes());
    }
}

#[allow(clippy::too_many_arguments)]
async fn prepare(
    ctx: &EvalContext,
    task: &Task,
    image: &str,
    cpuset: Option<String>,
    gpu_ids: &[String],
    guard_config: &str,
    v: &mut Variant,
    replica: usize,
) {
    let instance = task.id.clone();
    let label = if replica == 0 {
        v.label.clone()
    } else {
        format!("{}/r{replica}", v.label)
    };
    let phase = |p: &'static str| {
        emit(
            &ctx.events,
            Event::Phase {
                instance: instance.clone(),
                variant: label.clone(),
                phase: p,
            },
        );
    };
    // What goes wrong in a replica that went right in the first container is the
    // infrastructure's (or a nondeterministic build's) doing, said as such.
    let in_replica = |what: String| {
        if replica == 0 {
            what
        } else {
            format!("replica {replica}: {what}")
        }
    };
    let scale = ctx.budget.timeout_scale;

    phase("container");
    let t = Instant::now();
    let mut labels = HashMap::new();
    labels.insert(LABEL_RUN.to_string(), ctx.run_id.clone());
    labels.insert(LABEL_INSTANCE.to_string(), task.id.clone());
    labels.insert(LABEL_VARIANT.to_string(), label.clone());
    let spec = SandboxSpec {
        image: image.to_string(),
        name_hint: format!("{}-{}", task.id, label.replace('/', "-")),
        labels,
        resources: task.resources.clone(),
        cpuset,
        gpu_ids: gpu_ids.to_vec(),
    };
    let started = tokio::time::timeout(START_TIMEOUT, Sandbox::start(&ctx.engine, &spec)).await;
    let sandbox = match started {
        Ok(Ok(sb)) => sb,
        Ok(Err(e)) => return v.fail(Status::Error, in_replica(format!("{e:#}"))),
        Err(_) => {
            return v.fail(
                Status::Error,
                in_replica("the container did not start within 120 s".into()),
            );
        }
    };
    let mut files: Vec<(&str, &[u8], u32)> = vec![
        (HARNESS_FILES[0], APPLY_SCRIPT.as_bytes(), 0o755),
        (HARNESS_FILES[1], TIMER_SCRIPT.as_bytes(), 0o755),
        (HARNESS_FILES[2], GUARD_SCRIPT.as_bytes(), 0o644),
        ("opt/harness/config.json", guard_config.as_bytes(), 0o644),
    ];
    let patch = v.patch.as_deref().map(crate::patch::normalise);
    if let Some(p) = &patch {
        files.push(("opt/harness/patch.diff", p.as_bytes(), 0o644));
    }
    let uploaded = sandbox.upload("/", &files).await;
    let sb: &Sandbox = if replica == 0 {
        v.secs.container = t.elapsed().as_secs_f64();
        v.sandbox.insert(sandbox)
    } else {
        v.replicas.push(sandbox);
        match v.replicas.last() {
            Some(s) => s,
            None => return,
        }
    };
    if let Err(e) = uploaded {
        return v.fail(Status::Error, in_replica(format!("{e:#}")));
    }

    if v.patch.is_some() {
        phase("apply");
        let t = Instant::now();
        let limit = APPLY_TIMEOUT.mul_f64(scale);
        // A sample's patch is applied by the sandbox user, who cannot write protected files
        // or anything outside the tree; the human reference (trusted, and free to change
        // tests) by root.
        let user = if v.role == Role::Human {
            crate::protect::ROOT
        } else {
            crate::protect::RUN_AS
        };
        let out = match sb
            .exec_as(
                &[
                    "sh".into(),
                    "/opt/harness/apply_patch.sh".into(),
                    PATCH_PATH.into(),
                ],
                user,
                &[],
                limit,
                LOG_LIMIT,
            )
            .await
        {
            Ok(o) => o,
            Err(e) => return v.fail(Status::Error, in_replica(format!("apply: {e:#}"))),
        };
        if replica == 0 {
            v.secs.apply = t.elapsed().as_secs_f64();
            if patch.as_deref() != v.patch.as_deref() {
                v.apply_log
                    .push_str("(the patch's last line had no newline; one was added)\n");
            }
            v.apply_log.push_str(&out.output);
            v.strategy = out
                .output
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("HARNESS_APPLY_OK "))
                .map(str::to_string);
        }
        if out.timed_out {
            return v.fail(
                Status::Timeout,
                in_replica(format!(
                    "applying the patch ran past its timeout of {:.0} s",
                    limit.as_secs_f64()
                )),
            );
        }
        if !out.success() {
            if replica > 0 || !sb.is_running().await {
                return v.fail(
                    Status::Error,
                    in_replica("the patch did not apply again, or the container stopped".into()),
                );
            }
            return v.fail(
                Status::PatchFailed,
                "no strategy of the cascade applied the patch (see apply.log)".into(),
            );
        }
    }
    match guarded::after_apply(sb).await {
        Ok(after) if replica == 0 => {
            v.manifest = Some(after.snapshot);
            v.tree = Some(after.tree);
            v.code = after.code;
        }
        Ok(after) => {
            if v.tree.as_deref() != Some(after.tree.as_str()) {
                return v.fail(
                    Status::Error,
                    in_replica("the patched tree differs from the first container's".into()),
                );
            }
        }
        Err(e) => return v.fail(Status::Error, in_replica(format!("{e:#}"))),
    }

    if !task.install.is_empty() {
        phase("install");
        let t = Instant::now();
        let limit = task.install_timeout.mul_f64(scale);
        let script = format!("set -e\n{}", task.install.join("\n"));
        let run = match guarded::run_plain(sb, &script, limit).await {
            Ok(o) => o,
            Err(e) => return v.fail(Status::Error, in_replica(format!("install: {e:#}"))),
        };
        if replica == 0 {
            v.secs.install = t.elapsed().as_secs_f64();
            v.build_log = run.output.clone();
        }
        if let Some(r) = &run.result {
            v.phase_changes.push(("install", r.changes.clone()));
        }
        if let Some(f) = guarded::judge_plain(sb, &run, "install", Status::BuildFailed, limit).await
        {
            return v.fail(f.0, in_replica(f.1));
        }
    }
    if replica > 0 {
        return;
    }

    phase("test");
    let t = Instant::now();
    let limit = task.test_timeout.mul_f64(scale);
    let run = match guarded::run_plain(sb, &task.test_command, limit).await {
        Ok(o) => o,
        Err(e) => return v.fail(Status::Error, format!("test: {e:#}")),
    };
    v.secs.test = t.elapsed().as_secs_f64();
    v.test_log = run.output.clone();
    if let Some(r) = &run.result {
        v.phase_changes.push(("test", r.changes.clone()));
    }
    if let Some(f) = guarded::judge_plain(sb, &run, "the test", Status::TestFailed, limit).await {
        v.fail(f.0, f.1);
    }
}

/// After install and test: a sample whose patch reached a protected file, or whose code
/// changed or made one while it ran, is rejected; base decides which new files are normal.
/// A reference variant that changed a watched file makes the task unusable.
fn check_protection(variants: &mut [Variant]) {
    let base_manifest = variants[0].manifest.clone();
    let base_created: Vec<(&'static str, BTreeSet<String>)> = {
        let mut acc = BTreeSet::new();
        variants[0]
            .phase_changes
            .iter()
            .map(|(phase, changes)| {
                if let Some(m) = &base_manifest {
                    acc.extend(guarded::created(changes, m));
                }
                (*phase, acc.clone())
            })
            .collect()
    };
    for v in variants.iter_mut() {
        let Some(manifest) = v.manifest.clone() else {
            continue;
        };
        if let (Role::Sample(_), Some(base)) = (v.role, &base_manifest) {
            let diff = guarded::tree_differences(&manifest, base);
            if !diff.is_empty() {
                v.reject(guarded::describe_violations("the patch itself:", &diff));
                continue;
            }
        }
        for (phase, changes) in v.phase_changes.clone() {
            let allowed = match v.role {
                Role::Sample(_) => base_created
                    .iter()
                    .find(|(p, _)| *p == phase)
                    .map(|(_, set)| set.clone())
                    .unwrap_or_default(),
                // base and human define which new files are normal: only changes count.
                Role::Base | Role::Human => guarded::created(&changes, &manifest),
            };
            let found = guarded::violations(&changes, &manifest, &allowed);
            if found.is_empty() {
                continue;
            }
            let detail = guarded::describe_violations(&format!("while running {phase},"), &found);
            match v.role {
                Role::Sample(_) => v.reject(detail),
                Role::Base | Role::Human => v.fail(Status::TestFailed, detail),
            }
            break;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(label: &str, role: Role, tree: &str) -> Variant {
        let mut v = Variant::new(label, role, None);
        v.tree = Some(tree.to_string());
        v.code = Some(format!("code-of-{tree}"));
        v
    }

    #[test]
    fn trees_with_the_same_python_code_are_shared_after_identical_ones() {
        let with_code = |label: &str, role: Role, tree: &str, code: &str| {
            let mut v = variant(label, role, tree);
            v.code = Some(code.to_string());
            v
        };
        let mut vs = vec![
            with_code("base", Role::Base, "t-base", "c-base"),
            with_code("human", Role::Human, "t-human", "c-human"),
            // The human patch plus a comment: another tree, the same code.
            with_code("s0", Role::Sample(0), "t-human-comment", "c-human"),
            // Byte-identical to s0 is not needed: human has the code.
            with_code("s1", Role::Sample(1), "t-human-comment", "c-human"),
            with_code("s2", Role::Sample(2), "t-other", "c-other"),
            with_code("s3", Role::Sample(3), "t-other-comment", "c-other"),
            // No code digest (an older guard): bytes only.
            {
                let mut v = variant("s4", Role::Sample(4), "t-human-2");
                v.code = None;
                v
            },
        ];
        share_identical_trees(&mut vs);
        let got: Vec<(Option<&str>, bool)> = vs
            .iter()
            .map(|v| (v.shared_with.as_deref(), v.shared_code_only))
            .collect();
        assert_eq!(
            got,
            [
                (None, false),
                (None, false),
                (Some("human"), true),
                (Some("human"), true),
                (None, false),
                (Some("s2"), true),
                (None, false),
            ]
        );
        assert!(vs[2].apply_log.contains("syntax trees are equal"));
    }

    #[test]
    fn identical_trees_are_shared_with_the_first_variant_that_has_them() {
        let mut vs = vec![
            variant("base", Role::Base, "t-base"),
            variant("human", Role::Human, "t-human"),
            variant("s0", Role::Sample(0), "t-human"),
            variant("s1", Role::Sample(1), "t-other"),
            variant("s2", Role::Sample(2), "t-other"),
            variant("s3", Role::Sample(3), "t-base"),
            variant("s4", Role::Sample(4), "t-human-plus-one-byte"),
        ];
        // A sample that failed is no one's source: s6 is measured, not shared with s5.
        let mut failed = variant("s5", Role::Sample(5), "t-failed");
        failed.fail(Status::TestFailed, "x".into());
        vs.push(failed);
        vs.push(variant("s6", Role::Sample(6), "t-failed"));
        share_identical_trees(&mut vs);
        let shared: Vec<Option<&str>> = vs.iter().map(|v| v.shared_with.as_deref()).collect();
        assert_eq!(
            shared,
            [
                None,
                None,
                Some("human"),
                None,
                Some("s1"),
                Some("base"),
                None,
                None,
                None
            ]
        );
    }
}
