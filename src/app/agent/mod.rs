//! Agents run by the harness (docs/src/commands/agent.md): an agent named in `agents.toml` runs inside a
//! fresh container of a task's image, at `/testbed`, as the sandbox user; the diff of the
//! tree after it finished is its patch, saved as a predictions row.
//!
//! Secrets: the variables an agent needs are read from the harness's environment when the
//! agent starts and given to that one process (the exec's environment). They are never in
//! an image, a container's configuration, a log, a report or a predictions file: logs are
//! saved with every secret value replaced by `***` (as is, in base64 at any alignment, hex,
//! URL-encoded or reversed, and any piece of 8 characters of those, across line breaks and
//! indents: `core::secrets`), and a patch that contains a secret value in any of those forms,
//! or split by quotes, `+`, spaces or line breaks, is refused rather than saved, as is a
//! patch that changes a binary file (the diff is made without `--binary`: git's compressed
//! encoding would carry a key in no form the harness recognises). An agent that encrypts
//! its secret first can still smuggle it out: the harness catches encodings, not intent.
//!
//! Limits: the agent's container has the task's limits unless the agent names its own
//! (cpus, memory), and the task's disk limit as in evaluation: its command runs under a
//! runner of root's (runner.py) that sets no file larger than the limit and stops every
//! process of the agent once the tree and its home have grown by more than it; the run then
//! gives an empty patch, as at the time limit.
//!
//! What it sees (`view`): its container holds no `[image] files`, no GSO reference result
//! and no commit later than base; the prompt names no command that names one of them.
//!
//! The diff: once the agent is done and every process of its user is killed, root diffs the
//! tree against a copy of base's git repository made before the agent started, in a folder
//! only root can read, with no configuration, hook or file-system monitor of the agent's:
//! nothing the agent wrote into `/testbed/.git` runs as root.

mod batch;
mod image;
pub mod models;
mod paths;
pub mod pypi;
mod run;
mod secrets;
mod view;

pub use batch::{AgentBatch, command, run_batch};
pub use run::run_once;
pub use secrets::{redact, secret_forms, secret_in, secrets};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::core::task::Task;

/// One agent, as `agents.toml` names it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Agent {
    pub name: String,
    /// A shell command line, run by `/bin/sh -c` in `/testbed` as the sandbox user.
    pub command: String,
    /// A script on the host copied into the container as `/opt/agent/run` (root-owned,
    /// executable) before the command runs: named relative to agents.toml, held as its real
    /// path, which is inside the folder of agents.toml (`paths`).
    pub script: Option<PathBuf>,
    /// Commands run as root before the agent (e.g. installing it), with the agent's network.
    pub setup: Vec<String>,
    /// Names of environment variables the agent asks for: passed from the host at run time
    /// when the user names them with `--pass-env` (`secrets`), an error otherwise.
    pub env: Vec<String>,
    pub network: bool,
    pub time_limit: Duration,
    pub cpus: Option<f64>,
    pub memory_bytes: Option<i64>,
    /// The model gateway this agent talks to (`provider`): the container gets a token and
    /// the gateway's address, never the key.
    pub gateway: Option<AgentGateway>,
    /// The agent's program from PyPI, put into its image at build.
    pub pypi: Option<pypi::PypiInstall>,
    /// The price table of the agents file (`[price."MODEL"]`).
    pub prices: crate::app::gateway::Prices,
    /// Where the gateway forwards instead of the provider (`--model-server`).
    pub model_server: Option<String>,
    /// Dollars a sample may spend (`--max-cost`).
    pub max_cost: Option<f64>,
    /// Dollars all the samples of one `agent run` may spend (`--max-run-cost`).
    pub max_run_cost: Option<f64>,
    /// The `model_name_or_path` of its rows when not its name (a batch's agent x model
    /// entry: `agent/model`).
    pub rows_as: Option<String>,
}

impl Agent {
    /// The `model_name_or_path` its predictions rows carry.
    pub fn rows_name(&self) -> &str {
        self.rows_as.as_deref().unwrap_or(&self.name)
    }
}

/// An agent's access to its model, through the harness's gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentGateway {
    pub provider: crate::app::gateway::Provider,
    /// The variable of the harness's environment holding the provider's key (read by the
    /// gateway on the host only).
    pub key: Option<String>,
    /// The model the agent is told to use (`$HARNESS_AGENT_MODEL`).
    pub model: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgents {
    #[serde(default)]
    agent: BTreeMap<String, RawAgent>,
    #[serde(default)]
    price: crate::app::gateway::Prices,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    command: String,
    script: Option<String>,
    #[serde(default)]
    setup: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    network: bool,
    time_limit: Option<f64>,
    cpus: Option<f64>,
    memory: Option<String>,
    pypi: Option<String>,
    #[serde(default)]
    install: BTreeMap<String, String>,
    python: Option<String>,
    #[serde(default)]
    leave_out: Vec<String>,
    provider: Option<String>,
    key: Option<String>,
    model: Option<String>,
}

/// Agents by name, from an `agents.toml`.
pub fn load(path: &Path) -> Result<BTreeMap<String, Agent>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let raw: RawAgents =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut out = BTreeMap::new();
    for (name, a) in raw.agent {
        let at = |field: &str| format!("{}: agent.{name}.{field}", path.display());
        if a.command.trim().is_empty() {
            bail!("{}: is empty", at("command"));
        }
        for v in &a.env {
            if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                bail!("{}: {v:?} is not a variable name", at("env"));
            }
        }
        let time_limit = a.time_limit.unwrap_or(1800.0);
        if !(time_limit.is_finite() && time_limit > 0.0) {
            bail!(
                "{}: {time_limit} is not a number of seconds above 0",
                at("time_limit")
            );
        }
        if let Some(c) = a.cpus
            && !(c.is_finite() && c > 0.0)
        {
            bail!("{}: {c} is not a positive number", at("cpus"));
        }
        let memory_bytes = match &a.memory {
            None => None,
            Some(m) => Some(
                crate::core::task::parse_memory(m)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", at("memory")))?,
            ),
        };
        let script = match &a.script {
            Some(s) => Some(paths::inside(path, &name, "script", s)?),
            None => None,
        };
        let at_agent = format!("{}: agent.{name}", path.display());
        let pypi = match &a.pypi {
            Some(req) => Some(pypi::with_python(
                pypi::parse(req, a.install.clone().into_iter().collect(), &at_agent)?,
                a.python.clone(),
                a.leave_out.clone(),
                &at_agent,
            )?),
            None if !a.install.is_empty() || a.python.is_some() || !a.leave_out.is_empty() => {
                bail!("{}: install, python and leave_out need pypi", at_agent)
            }
            None => None,
        };
        let gateway = gateway_of(&a, &at_agent)?;
        out.insert(
            name.clone(),
            Agent {
                name,
                command: a.command,
                script,
                setup: a.setup,
                env: a.env,
                network: a.network,
                time_limit: Duration::from_secs_f64(time_limit),
                cpus: a.cpus,
                memory_bytes,
                gateway,
                pypi,
                prices: raw.price.clone(),
                model_server: None,
                max_cost: None,
                max_run_cost: None,
                rows_as: None,
            },
        );
    }
    Ok(out)
}

fn gateway_of(a: &RawAgent, at: &str) -> Result<Option<AgentGateway>> {
    let Some(name) = &a.provider else {
        if a.key.is_some() || a.model.is_some() {
            bail!("{at}: key and model need a provider (anthropic or openai)");
        }
        return Ok(None);
    };
    let provider = crate::app::gateway::Provider::parse(name)
        .with_context(|| format!("{at}.provider: {name:?} is not anthropic or openai"))?;
    if a.network {
        bail!(
            "{at}: an agent with a provider reaches its model through the harness's gateway \
             and nothing else: network = true would give its container the internet"
        );
    }
    if let Some(k) = &a.key
        && (k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    {
        bail!("{at}.key: {k:?} is not a variable name");
    }
    Ok(Some(AgentGateway {
        provider,
        key: a.key.clone(),
        model: a.model.clone(),
    }))
}

/// What the agent is told: the task's description, what it may not touch, and the commands
/// that measure and test the change when they name nothing hidden from it (a GSO task's
/// tests and reference results are: `view`). In `/opt/agent/task.md` and
/// `$HARNESS_TASK_FILE`.
pub fn prompt(task: &Task) -> String {
    let hidden = view::hidden_paths(task);
    let mut p = format!(
        "# Make this code faster\n\nRepository: /testbed (a git repository; your changes are \
         taken as the diff of its tree).\n\n{}\n",
        task.description
    );
    let benches: Vec<&str> = task
        .benches
        .iter()
        .map(|b| b.command.as_str())
        .filter(|c| !view::names_hidden(c, &hidden))
        .collect();
    if !benches.is_empty() {
        p.push_str(
            "\nMake these benchmark commands run faster, without changing what they print:\n",
        );
        for b in &benches {
            p.push_str(&format!("- `{b}`\n"));
        }
    }
    if !view::names_hidden(&task.test_command, &hidden) {
        p.push_str(&format!(
            "\nThis test must keep passing: `{}`\n",
            task.test_command
        ));
    }
    if benches.len() < task.benches.len() || view::names_hidden(&task.test_command, &hidden) {
        p.push_str("\nThe benchmarks and tests that judge the change are not shown.\n");
    }
    p.push_str("\nDo not edit the benchmark or test files");
    if !task.protected.is_empty() {
        p.push_str(&format!(", or any of these: {}", task.protected.join(", ")));
    }
    p.push_str(".\n");
    p
}

/// The result of one agent run on one task.
#[derive(Debug, Clone)]
pub struct AgentRun {
    pub instance_id: String,
    pub sample: usize,
    /// The diff of the tree after the agent (empty when it changed nothing).
    pub patch: String,
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    /// Why the harness stopped the agent (its time limit, the task's disk limit): the run
    /// then gives an empty patch and is reported.
    pub stopped: Option<String>,
    pub seconds: f64,
    /// Where the (redacted) log went.
    pub log_path: PathBuf,
    /// What it spent through the gateway (agents with a provider).
    pub usage: Option<crate::app::gateway::Usage>,
}

/// Why a run is not the model's outcome, if its agent failed for an API reason: its last
/// request to the provider failed (429, 5xx, overloaded, no connection) and it left no
/// change. The LoCoDiff rule: such a run is retried, a run whose model produced a patch,
/// good, bad or cut short, never is (a change it made before the failure is its outcome:
/// an agent cannot trade a bad patch for a new draw by bringing about a 429).
pub fn api_failure(r: &AgentRun) -> Option<String> {
    let u = r.usage.as_ref()?;
    let failed = r.stopped.is_none() && r.patch.is_empty();
    (u.ended_on_api_error && failed).then(|| {
        format!(
            "the agent failed for an API reason (no patch saved; the next run retries it): {}",
            u.last_api_error.as_deref().unwrap_or("the provider failed")
        )
    })
}

/// ", 12 requests (1 failed), 3400 in + 800 out tokens (1200 cached), $0.0213".
pub fn spent(u: &crate::app::gateway::Usage) -> String {
    format!(
        ", {} request(s){}, {} in + {} out tokens ({} cache read, {} cache write), {}",
        u.requests,
        if u.api_errors > 0 {
            format!(" ({} failed)", u.api_errors)
        } else {
            String::new()
        },
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        match u.cost_usd {
            Some(c) => format!("${c:.4}"),
            None if u.unpriced_models.is_empty() && u.unreported + u.in_flight == 0 => {
                "$0".to_string()
            }
            None => format!("cost unknown ({} not priced)", u.unpriced_models.join(", ")),
        }
    ) + &if u.unreported + u.in_flight > 0 {
        format!(
            " ({} answer(s) without usage, {} cut off at the end: cost unknown)",
            u.unreported, u.in_flight
        )
    } else {
        String::new()
    } + &if u.refused_over_budget > 0 {
        format!(
            "; its budget was spent ({} request(s) refused)",
            u.refused_over_budget
        )
    } else {
        String::new()
    }
}

/// Where agents' patches are saved: `<results>/agents/<agent>.predictions.jsonl`.
pub fn saved_patches(results_dir: &Path, agent: &str) -> PathBuf {
    results_dir.join("agents").join(format!(
        "{}.predictions.jsonl",
        crate::store::run_folder::model_slug(agent)
    ))
}

/// Whether `path` is a predictions file with a row of `model` for `instance`.
pub fn has_row(path: &Path, model: &str, instance: &str) -> bool {
    path.is_file()
        && crate::store::predictions::load(
            &[path.to_path_buf()],
            &crate::store::predictions::LoadOptions {
                model: model.to_string(),
                max_patch_bytes: crate::core::patch::MAX_PATCH_BYTES,
                rollout_per_file: false,
            },
        )
        .is_ok_and(|p| p.by_instance.contains_key(instance))
}

/// What `harness agent run` is asked.
pub struct AgentRunOptions {
    /// The agent's name in agents.toml.
    pub agent: String,
    pub agents: PathBuf,
    pub dataset: PathBuf,
    pub instance_ids: Vec<String>,
    /// Runs per task (sample 0..N-1).
    pub samples: usize,
    /// Agent runs side by side.
    pub jobs: usize,
    pub results_dir: PathBuf,
    /// The predictions file to write (None: where `harness local --agent` finds it).
    pub out: Option<PathBuf>,
    pub model_access: ModelAccess,
    /// What was written, as JSON on stdout.
    pub json: bool,
}

/// The user's choices for an agent's model access (`--model-server`, `--max-cost`).
#[derive(Debug, Clone, Default)]
pub struct ModelAccess {
    pub model_server: Option<String>,
    pub max_cost: Option<f64>,
    pub max_run_cost: Option<f64>,
}

/// The agent named `name` in the agents file, with the user's model access, or an error
/// listing the names there.
pub fn named(agents_file: &Path, name: &str, access: &ModelAccess) -> Result<Agent> {
    let agents = load(agents_file)?;
    let mut agent = agents.get(name).cloned().with_context(|| {
        format!(
            "{}: no agent named {name:?} (agents there: {})",
            agents_file.display(),
            agents.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    for (flag, value) in [
        ("--max-cost", access.max_cost),
        ("--max-run-cost", access.max_run_cost),
    ] {
        if let Some(c) = value
            && !(c.is_finite() && c > 0.0)
        {
            bail!("{flag}: {c} is not a number of dollars above 0");
        }
    }
    let budgets = access.max_cost.is_some() || access.max_run_cost.is_some();
    if agent.gateway.is_none() && (access.model_server.is_some() || budgets) {
        bail!(
            "agent {name} has no provider in {}: --model-server, --max-cost and \
             --max-run-cost apply to agents that reach their model through the harness's \
             gateway",
            agents_file.display()
        );
    }
    agent.model_server = access.model_server.clone();
    agent.max_cost = access.max_cost;
    agent.max_run_cost = access.max_run_cost;
    Ok(agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_toml_is_checked_field_by_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agents.toml");
        std::fs::write(dir.path().join("a.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(
            &p,
            "[agent.a]\ncommand = \"run\"\nscript = \"a.sh\"\nenv = [\"KEY_1\"]\nnetwork = true\ntime_limit = 60\nmemory = \"2g\"\n",
        )
        .unwrap();
        let a = &load(&p).unwrap()["a"];
        assert_eq!(
            a.script.as_deref(),
            Some(dir.path().canonicalize().unwrap().join("a.sh").as_path())
        );
        assert_eq!(a.env, ["KEY_1"]);
        assert!(a.network);
        assert_eq!(a.time_limit, Duration::from_secs(60));
        assert_eq!(a.memory_bytes, Some(2 << 30));
        std::fs::write(&p, "[agent.b]\ncommand = \"run\"\nenv = [\"A-B\"]\n").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("agent.b.env") && e.contains("A-B"), "{e}");
        std::fs::write(&p, "[agent.c]\ncommand = \"run\"\ncomand = 1\n").unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("comand"));
        // A file beside the folder of agents.toml: refused, named by agent and key.
        let sub = dir.path().join("cfg/agents.toml");
        std::fs::create_dir_all(dir.path().join("cfg")).unwrap();
        std::fs::write(&sub, "[agent.d]\ncommand = \"run\"\nscript = \"../a.sh\"\n").unwrap();
        let e = load(&sub).unwrap_err().to_string();
        assert!(e.contains("agent.d.script") && e.contains("outside"), "{e}");
    }
}
