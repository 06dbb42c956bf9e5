//! One variant's container made ready for measurement, stage by stage: started with the
//! harness's files, the patch applied by the cascade, the tree locked and watched, install,
//! and (in the first container) the test.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::variant::{Role, Variant};
use super::{EvalContext, LOG_LIMIT, guarded};
use crate::docker::container::Sandbox;
use crate::docker::spec::SandboxSpec;
use crate::docker::{LABEL_INSTANCE, LABEL_RUN, LABEL_VARIANT};
use crate::events::emit;
use harness_core::events::Event;
use harness_core::status::Status;
use harness_core::task::Task;

const PATCH_PATH: &str = "/opt/harness/patch.diff";
/// A sample's sections that are the human's own change to protected files.
const HUMAN_PART_PATH: &str = "/opt/harness/human_part.diff";
const APPLY_TIMEOUT: Duration = Duration::from_secs(120);
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// What every container of a task is made from.
pub(super) struct Prep<'a> {
    pub ctx: &'a EvalContext,
    pub task: &'a Task,
    pub image: &'a str,
    pub human_image: &'a str,
    pub cpuset: Option<String>,
    pub gpu_ids: &'a [String],
    /// The guard's configuration (container/programs/guard.py), as config.json.
    pub guard_config: &'a str,
}

/// A stage that went wrong: the variant's status and why.
type Failure = (Status, String);

/// Where a variant's preparation is: which container (0 the first, r > 0 a replica).
struct Step<'a> {
    prep: &'a Prep<'a>,
    /// The image of this variant's containers.
    image: &'a str,
    replica: usize,
    label: String,
}

impl Step<'_> {
    fn phase(&self, phase: &'static str) {
        emit(
            &self.prep.ctx.events,
            Event::Phase {
                instance: self.prep.task.id.clone(),
                variant: self.label.clone(),
                phase,
            },
        );
    }

    /// What goes wrong in a replica that went right in the first container is the
    /// infrastructure's (or a nondeterministic build's) doing, said as such.
    fn in_replica(&self, what: String) -> String {
        if self.replica == 0 {
            what
        } else {
            format!("replica {}: {what}", self.replica)
        }
    }

    fn error(&self, what: String) -> Failure {
        (Status::Error, self.in_replica(what))
    }

    fn scale(&self) -> f64 {
        self.prep.ctx.budget.timeout_scale
    }
}

/// Prepares container `replica` of `v` (0: the first, which also runs the test); a failure
/// is recorded on the variant. The container is kept with the variant either way, so it is
/// removed with it.
pub(super) async fn prepare(prep: &Prep<'_>, v: &mut Variant, replica: usize) {
    let step = Step {
        prep,
        image: if v.role == Role::Human {
            prep.human_image
        } else {
            prep.image
        },
        replica,
        label: if replica == 0 {
            v.label.clone()
        } else {
            format!("{}/r{replica}", v.label)
        },
    };
    let t = Instant::now();
    let sandbox = match start(&step).await {
        Ok(sb) => sb,
        Err(f) => return v.fail(f.0, f.1),
    };
    let uploaded = upload(&step, &sandbox, v).await;
    let outcome = match uploaded {
        Ok(()) => {
            if replica == 0 {
                v.secs.container = t.elapsed().as_secs_f64();
            }
            ready(&step, &sandbox, v).await
        }
        Err(f) => Err(f),
    };
    if replica == 0 {
        v.sandbox = Some(sandbox);
    } else {
        v.replicas.push(sandbox);
    }
    if let Err((status, detail)) = outcome {
        v.fail(status, detail);
    }
}

/// The stages after the container is up: patch, lock and watch, install, test.
async fn ready(step: &Step<'_>, sb: &Sandbox, v: &mut Variant) -> Result<(), Failure> {
    if v.patch.is_some() {
        apply(step, sb, v).await?;
    }
    after_apply(step, sb, v).await?;
    if !step.prep.task.install.is_empty() {
        install(step, sb, v).await?;
    }
    if step.replica == 0 {
        test(step, sb, v).await?;
    }
    Ok(())
}

/// The task's `[env] pass` variables that the user allowed (`--pass-env`) and the harness's
/// environment has (the others are left unset, as a shell would have them).
fn passed_env(task: &harness_core::task::Task) -> Vec<(String, String)> {
    harness_core::task::allowed_env(&task.env_pass)
        .0
        .iter()
        .filter_map(|name| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| (name.clone(), v))
        })
        .collect()
}

/// A container of the task's image, labelled, limited, pinned to the task's cores.
async fn start(step: &Step<'_>) -> Result<Sandbox, Failure> {
    let (ctx, task) = (step.prep.ctx, step.prep.task);
    step.phase("container");
    let mut labels = HashMap::new();
    labels.insert(LABEL_RUN.to_string(), ctx.run_id.clone());
    labels.insert(LABEL_INSTANCE.to_string(), task.id.clone());
    labels.insert(LABEL_VARIANT.to_string(), step.label.clone());
    let spec = SandboxSpec {
        image: step.image.to_string(),
        name_hint: format!("{}-{}", task.id, step.label.replace('/', "-")),
        labels,
        resources: task.resources.clone(),
        cpuset: step.prep.cpuset.clone(),
        gpu_ids: step.prep.gpu_ids.to_vec(),
        env: passed_env(task),
        binds: Vec::new(),
    };
    match tokio::time::timeout(START_TIMEOUT, Sandbox::start(&ctx.engine, &spec)).await {
        Ok(Ok(sb)) => Ok(sb),
        Ok(Err(e)) => Err(step.error(format!("{e:#}"))),
        Err(_) => Err(step.error("the container did not start within 120 s".into())),
    }
}

/// The guard's configuration and the patch, into the container (the harness's own files
/// are in since its start).
async fn upload(step: &Step<'_>, sb: &Sandbox, v: &Variant) -> Result<(), Failure> {
    let mut files: Vec<(&str, &[u8], u32)> = Vec::new();
    files.push((
        "opt/harness/config.json",
        step.prep.guard_config.as_bytes(),
        0o644,
    ));
    let patch = v.patch.as_deref().map(harness_core::patch::normalise);
    if let Some(p) = &patch {
        files.push(("opt/harness/patch.diff", p.as_bytes(), 0o644));
    }
    if !v.human_part.paths.is_empty() {
        files.push((
            "opt/harness/human_part.diff",
            v.human_part.patch.as_bytes(),
            0o644,
        ));
    }
    sb.upload("/", &files)
        .await
        .map_err(|e| step.error(format!("{e:#}")))
}

/// The patch by the cascade, as the sandbox user (a static program of the harness's starts
/// it: nothing of the image runs as root), who cannot write protected files or anything
/// outside the tree. The human reference is trusted and may change protected files: before
/// its application the guard hands what it touches to the sandbox user, and after it takes
/// everything back (`after_apply`).
async fn apply(step: &Step<'_>, sb: &Sandbox, v: &mut Variant) -> Result<(), Failure> {
    step.phase("apply");
    let t = Instant::now();
    let limit = APPLY_TIMEOUT.mul_f64(step.scale());
    let human_commit = match (&v.role, &step.prep.task.human) {
        (Role::Human, harness_core::task::HumanRef::ImageCommit { commit, .. }) => {
            Some(commit.clone())
        }
        _ => None,
    };
    if v.role == Role::Human {
        guarded::unlock_human(sb, PATCH_PATH, human_commit.as_deref())
            .await
            .map_err(|e| step.error(format!("apply: {e:#}")))?;
    } else if !v.human_part.paths.is_empty() {
        // Only the files the sample changes as the human does: the human's bytes.
        guarded::unlock_human(sb, HUMAN_PART_PATH, None)
            .await
            .map_err(|e| step.error(format!("apply: {e:#}")))?;
    }
    let mut argv = vec![
        crate::assets::SUPERVISOR.to_string(),
        "run".into(),
        "--persist".into(),
        "--cwd".into(),
        harness_core::task::WORKDIR.into(),
        "--".into(),
        "/bin/sh".into(),
    ];
    match human_commit {
        // GSO's opt_commit, where the image holds it; the task's patch where it does not.
        Some(commit) => argv.extend([
            "/opt/harness/human_commit.sh".to_string(),
            commit,
            PATCH_PATH.into(),
        ]),
        None => argv.extend(["/opt/harness/apply_patch.sh".to_string(), PATCH_PATH.into()]),
    }
    let home = format!("HOME={}", crate::protect::RUN_HOME);
    let out = sb
        .exec_as(&argv, crate::protect::ROOT, &[home], limit, LOG_LIMIT)
        .await
        .map_err(|e| step.error(format!("apply: {e:#}")))?;
    if step.replica == 0 {
        v.secs.apply = t.elapsed().as_secs_f64();
        let normalised = v.patch.as_deref().map(harness_core::patch::normalise);
        if normalised.as_deref() != v.patch.as_deref() {
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
        return Err((
            Status::Timeout,
            step.in_replica(format!(
                "applying the patch ran past its timeout of {:.0} s",
                limit.as_secs_f64()
            )),
        ));
    }
    if !out.success() {
        if step.replica > 0 || !sb.is_running().await {
            return Err(
                step.error("the patch did not apply again, or the container stopped".into())
            );
        }
        return Err((
            Status::PatchFailed,
            "no strategy of the cascade applied the patch (see apply.log)".into(),
        ));
    }
    Ok(())
}

/// The guard locks what the patch changed and snapshots the watched files; a replica's
/// tree must be the first container's.
async fn after_apply(step: &Step<'_>, sb: &Sandbox, v: &mut Variant) -> Result<(), Failure> {
    let after = match guarded::after_apply(sb).await {
        Ok(Ok(after)) => after,
        Ok(Err(why)) if matches!(v.role, Role::Sample(_)) => {
            return Err((Status::PatchRejected, step.in_replica(why)));
        }
        Ok(Err(why)) => return Err(step.error(why)),
        Err(e) => return Err(step.error(format!("{e:#}"))),
    };
    if step.replica == 0 {
        v.manifest = Some(after.snapshot);
        v.tree = Some(after.tree);
        v.code = after.code;
    } else if v.tree.as_deref() != Some(after.tree.as_str()) {
        return Err(step.error("the patched tree differs from the first container's".into()));
    }
    Ok(())
}

async fn install(step: &Step<'_>, sb: &Sandbox, v: &mut Variant) -> Result<(), Failure> {
    let task = step.prep.task;
    step.phase("install");
    let t = Instant::now();
    let limit = task.install_timeout.mul_f64(step.scale());
    let script = format!("set -e\n{}", task.install.join("\n"));
    let gate = &step.prep.ctx.disk_gate;
    let room = gate
        .admit(task.resources.disk_bytes.max(0) as u64)
        .await
        .map_err(|e| step.error(e))?;
    let run = guarded::run_plain(sb, &script, limit, false)
        .await
        .map_err(|e| step.error(format!("install: {e:#}")))?;
    drop(room);
    // Base's install (the task's own code) is the forecast's figure: a sample's patch
    // must not make the next run's forecast (nor the human's commit, in another image).
    if let Some(used) = run.result.as_ref().and_then(|r| r.limits.disk_used) {
        let used = used.max(0) as u64;
        v.install_bytes = Some(v.install_bytes.unwrap_or(0).max(used));
        if v.role == Role::Base {
            // By the task's image (base may run on its derived samples' image): the name
            // the next run's forecast knows the task by.
            let limit = task.resources.disk_bytes;
            gate.record(
                &harness_core::disk::install_key(step.prep.human_image, &task.install, limit),
                used,
            );
        }
    }
    if step.replica == 0 {
        v.secs.install = t.elapsed().as_secs_f64();
        v.build_log = run.output.clone();
    }
    if let Some(r) = &run.result {
        v.phase_changes.push(("install", r.changes.clone()));
    }
    match guarded::judge_plain(sb, &run, "install", Status::BuildFailed, limit).await {
        Some((status, detail)) => Err((status, step.in_replica(detail))),
        None => Ok(()),
    }
}

async fn test(step: &Step<'_>, sb: &Sandbox, v: &mut Variant) -> Result<(), Failure> {
    let task = step.prep.task;
    step.phase("test");
    let t = Instant::now();
    let limit = task.test_timeout.mul_f64(step.scale());
    let run = guarded::run_plain(sb, &task.test_command, limit, true)
        .await
        .map_err(|e| (Status::Error, format!("test: {e:#}")))?;
    v.secs.test = t.elapsed().as_secs_f64();
    v.test_log = run.output.clone();
    if let Some(r) = &run.result {
        v.phase_changes.push(("test", r.changes.clone()));
        v.test_witness = r.witness.clone();
    }
    match guarded::judge_plain(sb, &run, "the test", Status::TestFailed, limit).await {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}
