//! One agent run on one task: a fresh container of the task's image, the agent as the
//! sandbox user, its diff taken by root.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::secrets::{redact, secret_in, secrets};
use super::{Agent, AgentRun, prompt};
use crate::core::task::Task;
use crate::sandbox::docker::container::{ExecOutcome, Sandbox};
use crate::sandbox::docker::spec::SandboxSpec;
use crate::sandbox::docker::{Engine, LABEL_INSTANCE, LABEL_RUN, LABEL_VARIANT};

/// Runs `agent` once on `task` in a fresh container of `image`; the log goes (redacted) to
/// `log_path`. The container is removed on every path.
pub async fn run_once(
    engine: &Engine,
    agent: &Agent,
    task: &Task,
    image: &str,
    sample: usize,
    log_path: &Path,
) -> Result<AgentRun> {
    let secrets = secrets(agent)?;
    let mut resources = task.resources.clone();
    resources.network = agent.network;
    if let Some(c) = agent.cpus {
        resources.cpus = c;
    }
    if let Some(m) = agent.memory_bytes {
        resources.memory_bytes = m;
    }
    let mut labels = HashMap::new();
    labels.insert(LABEL_RUN.to_string(), format!("agent-{}", agent.name));
    labels.insert(LABEL_INSTANCE.to_string(), task.id.clone());
    labels.insert(LABEL_VARIANT.to_string(), format!("agent-s{sample}"));
    let spec = SandboxSpec {
        image: image.to_string(),
        name_hint: format!("agent-{}-{}", agent.name, task.id),
        labels,
        resources,
        cpuset: None,
        gpu_ids: Vec::new(),
        env: Vec::new(),
    };
    let sandbox = Sandbox::start(engine, &spec).await?;
    let result = drive(&sandbox, agent, task, sample, &secrets, log_path).await;
    let removed = sandbox.remove().await;
    let run = result?;
    removed?;
    Ok(run)
}

/// Before the agent: its task file and script in the container, its setup commands (as
/// root), root's own copy of base's repository, which the diff is made with, and the hidden
/// parts of the task's image out of the container (see `view`).
async fn set_up(
    sandbox: &Sandbox,
    agent: &Agent,
    task: &Task,
    secrets: &[(String, String)],
    log_path: &Path,
    log: &mut String,
) -> Result<()> {
    let prompt = prompt(task);
    let mut files: Vec<(&str, Vec<u8>, u32)> = vec![
        ("opt/agent/task.md", prompt.into_bytes(), 0o644),
        (
            "opt/agent-harness/runner.py",
            RUNNER.as_bytes().to_vec(),
            0o600,
        ),
    ];
    if let Some(script) = &agent.script {
        let bytes = std::fs::read(script).with_context(|| {
            format!(
                "agent {}: script {}: cannot read",
                agent.name,
                script.display()
            )
        })?;
        files.push(("opt/agent/run", bytes, 0o755));
    }
    let refs: Vec<(&str, &[u8], u32)> = files
        .iter()
        .map(|(p, b, m)| (*p, b.as_slice(), *m))
        .collect();
    sandbox.upload("/", &refs).await?;
    for cmd in &agent.setup {
        let out = sandbox
            .sh(&format!("cd /testbed && {cmd}"), agent.time_limit, 1 << 20)
            .await?;
        log.push_str(&format!("$ {cmd}  (setup, as root)\n{}\n", out.output));
        if !out.success() {
            write_log(log_path, &redact(log, secrets))?;
            bail!(
                "agent {}: setup command failed ({}): {cmd}",
                agent.name,
                if out.timed_out {
                    "time limit".to_string()
                } else {
                    format!("exit {:?}", out.exit_code)
                }
            );
        }
    }
    // Base's repository, as root's own copy the agent cannot reach: the diff is made with it.
    let copied = sandbox
        .sh(
            &format!(
                "chown -R 0:0 {RUNNER_DIR} && chmod 700 {RUNNER_DIR} \
                 && rm -rf {AGENT_GIT} && mkdir -m 700 {AGENT_GIT} && cp -a /testbed/.git/. {AGENT_GIT}/ \
                 && chown -R 0:0 {AGENT_GIT} && chmod -R go-rwx {AGENT_GIT}"
            ),
            Duration::from_secs(300),
            64 * 1024,
        )
        .await?;
    if !copied.success() {
        bail!(
            "agent {}: cannot keep a copy of base's repository: {}",
            agent.name,
            copied.output
        );
    }
    // What the agent must not see: the evaluation's hidden files and later commits.
    super::view::hide(sandbox, task, AGENT_GIT).await
}

async fn drive(
    sandbox: &Sandbox,
    agent: &Agent,
    task: &Task,
    sample: usize,
    secrets: &[(String, String)],
    log_path: &Path,
) -> Result<AgentRun> {
    let started = std::time::Instant::now();
    let mut log = String::new();
    set_up(sandbox, agent, task, secrets, log_path, &mut log).await?;
    let (out, watch) = run_agent(sandbox, agent, task, sample, secrets).await?;
    // Why the harness stopped the agent, if it did: what it had changed by then is not its
    // patch (the container is gone at the time limit; past the disk limit the tree is
    // whatever the agent had filled it with).
    let stopped = if out.timed_out {
        Some(format!(
            "stopped at the time limit of {:.0} s",
            agent.time_limit.as_secs_f64()
        ))
    } else {
        watch.as_ref().and_then(Watch::stopped)
    };
    log.push_str(&format!(
        "$ {}  (as {}, {:.1} s, {})\n{}\n",
        agent.command,
        crate::sandbox::protect::RUN_USER,
        out.elapsed.as_secs_f64(),
        stopped
            .clone()
            .unwrap_or_else(|| format!("exit {:?}", out.exit_code)),
        out.output
    ));
    let patch = match (&stopped, watch) {
        (None, Some(_)) => match take_patch(sandbox, agent, secrets).await {
            Ok(p) => p,
            Err(e) => {
                write_log(log_path, &redact(&log, secrets))?;
                return Err(e);
            }
        },
        _ => String::new(),
    };
    write_log(log_path, &redact(&log, secrets))?;
    if let Some(name) = secret_in(&patch, secrets) {
        bail!(
            "agent {} wrote the value of {name} into its patch for {}: the patch is not saved",
            agent.name,
            task.id
        );
    }
    refuse_binary(&patch, agent, task)?;
    Ok(AgentRun {
        instance_id: task.id.clone(),
        sample,
        patch,
        exit_code: out.exit_code,
        timed_out: out.timed_out,
        stopped,
        seconds: started.elapsed().as_secs_f64(),
        log_path: log_path.to_path_buf(),
    })
}

/// The harness's runner of the agent's command in the container (see runner.py), and where
/// it leaves its result: a folder only root can read.
const RUNNER: &str = include_str!("runner.py");
const RUNNER_DIR: &str = "/opt/agent-harness";

/// What the runner saw of the agent's disk use.
struct Watch {
    disk_limit: i64,
    disk_used: i64,
    disk_exceeded: bool,
}

impl Watch {
    fn stopped(&self) -> Option<String> {
        self.disk_exceeded.then(|| {
            format!(
                "stopped: wrote more than the task's disk limit of {} ({} in the tree and home)",
                crate::sandbox::eval::guarded::mib(self.disk_limit),
                crate::sandbox::eval::guarded::mib(self.disk_used)
            )
        })
    }
}

/// The agent's command, as the sandbox user, under the runner (root, the pinned interpreter):
/// the task's disk limit held as in evaluation, what it left killed when it ends. The
/// runner's result is `None` when the container was killed at the time limit.
async fn run_agent(
    sandbox: &Sandbox,
    agent: &Agent,
    task: &Task,
    sample: usize,
    secrets: &[(String, String)],
) -> Result<(ExecOutcome, Option<Watch>)> {
    let python = pinned_python(sandbox).await?;
    let mut env: Vec<String> = vec![
        format!("HOME={}", crate::sandbox::protect::RUN_HOME),
        "HARNESS_TASK_FILE=/opt/agent/task.md".into(),
        format!("HARNESS_INSTANCE_ID={}", task.id),
        format!("HARNESS_SAMPLE={sample}"),
    ];
    env.extend(secrets.iter().map(|(k, v)| format!("{k}={v}")));
    let result = format!("{RUNNER_DIR}/result.json");
    let argv = vec![
        python,
        "-I".into(),
        "-S".into(),
        format!("{RUNNER_DIR}/runner.py"),
        result.clone(),
        task.resources.disk_bytes.to_string(),
        agent.command.clone(),
    ];
    let out = sandbox
        .exec_as(
            &argv,
            crate::sandbox::protect::ROOT,
            &env,
            agent.time_limit,
            4 << 20,
        )
        .await?;
    if out.timed_out {
        return Ok((out, None));
    }
    let read = sandbox
        .sh_clean(&format!("cat {result}"), Duration::from_secs(30), 64 * 1024)
        .await?;
    let v: serde_json::Value = serde_json::from_str(read.output.trim()).map_err(|_| {
        anyhow::anyhow!(
            "agent {}: the harness's runner left no result (the agent's output ends: {})",
            agent.name,
            redact(tail(&out.output, 2000), secrets)
        )
    })?;
    let watch = Watch {
        disk_limit: v["disk_limit"]
            .as_i64()
            .unwrap_or(task.resources.disk_bytes),
        disk_used: v["disk_used"].as_i64().unwrap_or(0),
        disk_exceeded: v["disk_exceeded"].as_bool().unwrap_or(false),
    };
    Ok((out, Some(watch)))
}

/// The last `n` bytes of `text` or fewer (at a character boundary).
fn tail(text: &str, n: usize) -> &str {
    let mut from = text.len().saturating_sub(n);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    &text[from..]
}

/// The interpreter the image's build pinned for the harness's own programs (root's, outside
/// the tree and home), read before anything of the agent has run.
async fn pinned_python(sandbox: &Sandbox) -> Result<String> {
    let read = sandbox
        .sh_clean(
            "cat /opt/harness-build/interpreter.json",
            Duration::from_secs(30),
            64 * 1024,
        )
        .await?;
    let v: serde_json::Value = serde_json::from_str(read.output.trim()).unwrap_or_default();
    match v["executable"].as_str() {
        Some(p) if p.starts_with('/') => Ok(p.to_string()),
        _ => bail!(
            "the task's image has no pinned interpreter in /opt/harness-build/interpreter.json: {}",
            tail(&read.output, 500)
        ),
    }
}

/// The diff of the tree after the agent (see [`diff_script`]).
async fn take_patch(
    sandbox: &Sandbox,
    agent: &Agent,
    secrets: &[(String, String)],
) -> Result<String> {
    let diff = sandbox
        .sh_clean(
            &diff_script(),
            Duration::from_secs(120),
            crate::core::patch::MAX_PATCH_BYTES + 1,
        )
        .await?;
    if diff.output.len() > crate::core::patch::MAX_PATCH_BYTES {
        bail!(
            "agent {}: its patch is over {} bytes",
            agent.name,
            crate::core::patch::MAX_PATCH_BYTES
        );
    }
    if !diff.success() {
        bail!(
            "agent {}: cannot diff the tree after it: {}",
            agent.name,
            redact(&diff.output, secrets)
        );
    }
    Ok(diff.output)
}

/// An error naming the files a patch changes as binary ("Binary files ... differ": the diff
/// is made without `--binary`, so their content is not in it). Such a patch is not saved:
/// the evaluation refuses binary changes, and git's binary encoding (compressed, base85)
/// would carry a secret in a form no redaction recognises.
fn refuse_binary(patch: &str, agent: &super::Agent, task: &Task) -> Result<()> {
    let binary: Vec<String> = crate::core::patch::parse(patch)
        .into_iter()
        .filter(|f| f.binary)
        .map(|f| f.new_path.or(f.old_path).unwrap_or_else(|| "?".into()))
        .collect();
    if binary.is_empty() {
        return Ok(());
    }
    bail!(
        "agent {} changed binary file(s) in {}: {}; binary changes are not accepted, the patch is not saved",
        agent.name,
        task.id,
        binary.join(", ")
    )
}

/// Root's copy of base's git repository in an agent's container.
const AGENT_GIT: &str = "/opt/agent-base.git";

/// The diff of the tree after the agent, made by root with programs the agent cannot have
/// written (a fixed PATH of root's folders, the interpreter pinned at image build, not
/// `python3` or `git` from the image's PATH, which may lead into the tree): every process of
/// the agent's user killed first (nothing changes the tree while it is read), then git with root's copy of
/// base's repository, no configuration but its own and none of the agent's hooks,
/// file-system monitor, external diff or text conversion. Without `--binary`: a binary file
/// is named ("Binary files ... differ"), its content left out, and the patch refused.
fn diff_script() -> String {
    format!(
        "cd / && PY=$(sed -n 's/.*\"executable\": *\"\\([^\"]*\\)\".*/\\1/p' /opt/harness-build/interpreter.json) && \
         \"$PY\" -I -S -c 'import sys; sys.path.insert(0, \"/opt/harness-build\"); import guard; guard.kill_user({uid}, {gid})' && \
         export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/nonexistent && \
         G=\"git --git-dir={AGENT_GIT} --work-tree=/testbed -c core.fsmonitor=false -c core.hooksPath=/dev/null \
         -c core.untrackedCache=false -c safe.directory=*\" && cd /testbed && \
         $G add -A >/dev/null 2>&1 && $G diff --cached --no-color --no-ext-diff --no-textconv harness-base 2>/dev/null",
        uid = crate::sandbox::protect::RUN_UID,
        gid = crate::sandbox::protect::RUN_GID,
    )
}

fn write_log(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    crate::store::run_folder::write_atomic(path, text.as_bytes())
}
