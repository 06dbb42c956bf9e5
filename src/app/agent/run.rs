//! One agent run on one task: a fresh container of the agent's image (see `image`), the
//! agent as the sandbox user in a sandbox of its own, its diff taken by the warden.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::secrets::{redact, secret_in, secrets};
use super::{Agent, AgentRun};
use crate::core::task::Task;
use crate::sandbox::docker::container::{ExecOutcome, Sandbox};
use crate::sandbox::docker::spec::SandboxSpec;
use crate::sandbox::docker::{Engine, LABEL_INSTANCE, LABEL_RUN, LABEL_VARIANT};

/// One attempt: the run, or why the harness could not make one, and in both cases what
/// the agent spent through the gateway (an attempt that failed still cost what it cost).
pub struct Attempt {
    pub run: Result<AgentRun>,
    pub usage: Option<crate::app::gateway::Usage>,
}

/// Runs `agent` once on `task` in a fresh container of its image (made from `image`, the
/// task's, when missing); the log goes (redacted) to `log_path`. The container is removed
/// on every path.
pub async fn run_once(
    engine: &Engine,
    agent: &Agent,
    task: &Task,
    image: &str,
    sample: usize,
    log_path: &Path,
) -> Attempt {
    let mut gateway = None;
    let run = attempt(engine, agent, task, image, sample, log_path, &mut gateway).await;
    let usage = gateway.map(|g: crate::app::gateway::Gateway| g.stop());
    let run = run.map(|mut r| {
        r.usage = usage.clone();
        r
    });
    Attempt { run, usage }
}

async fn attempt(
    engine: &Engine,
    agent: &Agent,
    task: &Task,
    image: &str,
    sample: usize,
    log_path: &Path,
    gateway_slot: &mut Option<crate::app::gateway::Gateway>,
) -> Result<AgentRun> {
    let secrets = secrets(agent)?;
    if let Some(g) = &agent.gateway {
        *gateway_slot = Some(start_gateway(agent, g).await?);
    }
    let gateway = gateway_slot.as_ref();
    // The agent's environment: the variables it asked for and, with a gateway, its
    // token and the gateway's address; what its logs and patch must not hold: those
    // variables and the provider's key (which is never in the container).
    let mut env = secrets.clone();
    let mut hidden = secrets.clone();
    if let Some(gw) = gateway {
        env.extend(gw.agent_env());
        if let Some(key) = gw.key() {
            hidden.push(("the provider's key".to_string(), key.to_string()));
        }
    }
    if let Some(model) = agent.gateway.as_ref().and_then(|g| g.model.clone()) {
        env.push(("HARNESS_AGENT_MODEL".to_string(), model));
    }
    let binds: Vec<String> = gateway
        .into_iter()
        .map(|gw| {
            format!(
                "{}:{}:ro",
                gw.socket_dir().display(),
                crate::app::gateway::CONTAINER_DIR
            )
        })
        .collect();
    let agent_image = super::image::ensure(
        engine,
        agent,
        task,
        image,
        &log_path.with_extension("image.log"),
    )
    .await?;
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
        image: agent_image,
        name_hint: format!("agent-{}-{}", agent.name, task.id),
        labels,
        resources,
        cpuset: None,
        gpu_ids: Vec::new(),
        env: Vec::new(),
        binds,
    };
    let sandbox = Sandbox::start(engine, &spec).await?;
    let access = Access { env, hidden };
    let result = drive(&sandbox, agent, task, sample, &access, log_path).await;
    let removed = sandbox.remove().await;
    let run = result?;
    removed?;
    Ok(run)
}

/// What the agent's process gets (`env`) and what nothing the harness saves may hold
/// (`hidden`), as (name, value).
struct Access {
    env: Vec<(String, String)>,
    hidden: Vec<(String, String)>,
}

/// This run's gateway: the provider (or `--model-server`), the key from the harness's
/// environment, a fresh token within the sample's budget.
async fn start_gateway(
    agent: &Agent,
    g: &super::AgentGateway,
) -> Result<crate::app::gateway::Gateway> {
    let upstream =
        crate::app::gateway::upstream(g.provider, agent.model_server.as_deref(), g.key.as_deref())
            .with_context(|| format!("agent {}", agent.name))?;
    let grant = crate::app::gateway::Grant {
        token: crate::app::gateway::new_token()?,
        max_cost: agent.max_cost,
        model: g.model.clone(),
    };
    crate::app::gateway::Gateway::start(upstream, grant, agent.prices.clone()).await
}

async fn drive(
    sandbox: &Sandbox,
    agent: &Agent,
    task: &Task,
    sample: usize,
    access: &Access,
    log_path: &Path,
) -> Result<AgentRun> {
    let secrets = access.hidden.as_slice();
    let started = std::time::Instant::now();
    let mut log = String::new();
    super::view::check_hidden(sandbox, task).await?;
    let (out, ran) = run_agent(sandbox, agent, task, sample, access).await?;
    // Why the harness stopped the agent, if it did: what it had changed by then is not its
    // patch (the container is gone at the time limit; at the disk limit its writes stopped
    // where the limit is).
    let stopped = match &ran {
        None => Some(format!(
            "stopped at the time limit of {:.0} s",
            agent.time_limit.as_secs_f64()
        )),
        Some(r) if r.disk_exceeded => Some(format!(
            "stopped: it reached the task's disk limit of {} (the tree, its home and /tmp \
             together; no write went past it)",
            crate::sandbox::eval::guarded::mib(r.disk_limit)
        )),
        _ => None,
    };
    log.push_str(&format!(
        "$ {}  (as {}, {:.1} s, {})\n{}\n",
        agent.command,
        crate::sandbox::protect::RUN_USER,
        out.elapsed.as_secs_f64(),
        stopped
            .clone()
            .unwrap_or_else(|| format!("exit {:?}", ran.as_ref().map(|r| r.exit_code))),
        out.output
    ));
    let mut patch = match (&stopped, &ran) {
        (None, Some(r)) => checked_patch(r, agent),
        _ => Ok(String::new()),
    };
    write_log(log_path, &redact(&log, secrets))?;
    if let Ok(p) = &patch
        && let Some(name) = secret_in(p, secrets)
    {
        patch = Err(anyhow::anyhow!(
            "agent {} wrote the value of {name} into its patch for {}",
            agent.name,
            task.id
        ));
    }
    if let Ok(p) = &patch
        && let Err(e) = refuse_binary(p, agent, task)
    {
        patch = Err(e);
    }
    // A patch the harness cannot take is the agent's outcome, not the harness's failure:
    // the sample is an empty patch, said so, and is never run again.
    let (patch, stopped) = match patch {
        Ok(p) => (p, stopped),
        Err(e) => (
            String::new(),
            Some(format!(
                "its patch is not saved ({e:#}): the sample is an empty patch"
            )),
        ),
    };
    Ok(AgentRun {
        instance_id: task.id.clone(),
        sample,
        patch,
        exit_code: ran.as_ref().map(|r| r.exit_code),
        timed_out: out.timed_out,
        stopped,
        seconds: started.elapsed().as_secs_f64(),
        log_path: log_path.to_path_buf(),
        usage: None,
    })
}

/// What the harness's runner reported (container/programs/agent_runner.py).
#[derive(Debug, Deserialize)]
struct Ran {
    harness_error: Option<String>,
    exit_code: i64,
    disk_limit: i64,
    disk_exceeded: bool,
    diff_exit: Option<i64>,
    patch: String,
    patch_over_limit: bool,
}

/// The patch the warden's diff gave, or why there is none.
fn checked_patch(r: &Ran, agent: &Agent) -> Result<String> {
    if r.patch_over_limit || r.patch.len() > crate::core::patch::MAX_PATCH_BYTES {
        bail!(
            "agent {}: its patch is over {} bytes",
            agent.name,
            crate::core::patch::MAX_PATCH_BYTES
        );
    }
    if r.diff_exit != Some(0) {
        bail!(
            "agent {}: cannot diff the tree after it (exit {:?})",
            agent.name,
            r.diff_exit
        );
    }
    Ok(r.patch.clone())
}

/// The agent's command under the harness's runner (the warden; root's supervisor starts
/// the command as the sandbox user): `None` for the runner's report when the container was
/// killed at the time limit.
async fn run_agent(
    sandbox: &Sandbox,
    agent: &Agent,
    task: &Task,
    sample: usize,
    access: &Access,
) -> Result<(ExecOutcome, Option<Ran>)> {
    let secrets = access.hidden.as_slice();
    let nonce = crate::sandbox::eval::guarded::nonce();
    let mut env: Vec<String> = vec![
        format!("HARNESS_NONCE={nonce}"),
        "HARNESS_TASK_FILE=/opt/agent/task.md".into(),
        format!("HARNESS_INSTANCE_ID={}", task.id),
        format!("HARNESS_SAMPLE={sample}"),
    ];
    env.extend(access.env.iter().map(|(k, v)| format!("{k}={v}")));
    let args = [
        "warden".to_string(),
        "/opt/harness/agent_runner.py".into(),
        task.resources.disk_bytes.to_string(),
        agent.command.clone(),
    ];
    let out = sandbox
        .supervisor_unredacted(&args, &env, agent.time_limit, 8 << 20)
        .await?;
    if out.timed_out {
        return Ok((redacted(sandbox, out, secrets), None));
    }
    let (line, shown) = crate::sandbox::eval::guarded::split_result(&out.output, &nonce);
    let ran: Ran = line
        .and_then(|l| serde_json::from_str(l).ok())
        .with_context(|| {
            format!(
                "agent {}: the harness's runner gave no result (the output ends: {})",
                agent.name,
                redact(tail(&shown, 2000), secrets)
            )
        })?;
    if let Some(e) = &ran.harness_error {
        bail!("agent {}: the harness's runner failed: {e}", agent.name);
    }
    let out = ExecOutcome {
        output: shown,
        ..out
    };
    Ok((redacted(sandbox, out, secrets), Some(ran)))
}

fn redacted(sandbox: &Sandbox, mut out: ExecOutcome, secrets: &[(String, String)]) -> ExecOutcome {
    out.output = redact(&sandbox.redact(&out.output), secrets);
    out
}

/// The last `n` bytes of `text` or fewer (at a character boundary).
fn tail(text: &str, n: usize) -> &str {
    let mut from = text.len().saturating_sub(n);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    &text[from..]
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

fn write_log(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    crate::store::run_folder::write_atomic(path, text.as_bytes())
}
