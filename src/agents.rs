//! Agents run by the harness (PRODUCT.md 8b): an agent named in `agents.toml` runs inside a
//! fresh container of a task's image, at `/testbed`, as the sandbox user; the diff of the
//! tree after it finished is its patch, saved as a predictions row.
//!
//! Secrets: the variables an agent needs are read from the harness's environment when the
//! agent starts and given to that one process (the exec's environment). They are never in
//! an image, a container's configuration, a log, a report or a predictions file: logs are
//! saved with every secret value replaced by `***`, and a patch that contains a secret value
//! is refused rather than saved.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::docker::container::{Sandbox, SandboxSpec};
use crate::docker::{Engine, LABEL_INSTANCE, LABEL_RUN, LABEL_VARIANT};
use crate::task::Task;

/// One agent, as `agents.toml` names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub name: String,
    /// A shell command line, run by `/bin/sh -c` in `/testbed` as the sandbox user.
    pub command: String,
    /// A script on the host copied into the container as `/opt/agent/run` (root-owned,
    /// executable) before the command runs; relative to agents.toml.
    pub script: Option<PathBuf>,
    /// Commands run as root before the agent (e.g. installing it), with the agent's network.
    pub setup: Vec<String>,
    /// Names of environment variables passed from the host at run time.
    pub env: Vec<String>,
    pub network: bool,
    pub time_limit: Duration,
    pub cpus: Option<f64>,
    pub memory_bytes: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgents {
    #[serde(default)]
    agent: BTreeMap<String, RawAgent>,
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
}

/// Agents by name, from an `agents.toml`.
pub fn load(path: &Path) -> Result<BTreeMap<String, Agent>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let raw: RawAgents =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
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
                crate::task::parse_memory(m)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", at("memory")))?,
            ),
        };
        out.insert(
            name.clone(),
            Agent {
                name,
                command: a.command,
                script: a.script.map(|s| dir.join(s)),
                setup: a.setup,
                env: a.env,
                network: a.network,
                time_limit: Duration::from_secs_f64(time_limit),
                cpus: a.cpus,
                memory_bytes,
            },
        );
    }
    Ok(out)
}

/// The secret values of `agent.env`, from the harness's environment; a clear error naming
/// every one that is missing.
pub fn secrets(agent: &Agent) -> Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in &agent.env {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => found.push((name.clone(), v)),
            _ => missing.push(name.as_str()),
        }
    }
    if !missing.is_empty() {
        bail!(
            "agent {} needs {} in the environment (set when the harness runs; never stored)",
            agent.name,
            missing.join(", ")
        );
    }
    Ok(found)
}

/// `text` with every secret value replaced by `***`.
pub fn redact(text: &str, secrets: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (_, v) in secrets {
        if !v.is_empty() {
            out = out.replace(v.as_str(), "***");
        }
    }
    out
}

/// What the agent is told: the task, the commands that must get faster, what must keep
/// passing and what it may not touch. In `/opt/agent/task.md` and `$HARNESS_TASK_FILE`.
pub fn prompt(task: &Task) -> String {
    let mut p = format!(
        "# Make this code faster\n\nRepository: /testbed (a git repository; your changes are \
         taken as the diff of its tree).\n\n{}\n\nMake these benchmark commands run faster, \
         without changing what they print:\n",
        task.description
    );
    for b in &task.benches {
        p.push_str(&format!("- `{}`\n", b.command));
    }
    p.push_str(&format!(
        "\nThis test must keep passing: `{}`\n\nDo not edit the benchmark or test files, or \
         any of these: {}.\n",
        task.test_command,
        task.protected.join(", ")
    ));
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
    pub seconds: f64,
    /// Where the (redacted) log went.
    pub log_path: PathBuf,
}

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
    };
    let sandbox = Sandbox::start(engine, &spec).await?;
    let result = drive(&sandbox, agent, task, sample, &secrets, log_path).await;
    let removed = sandbox.remove().await;
    let run = result?;
    removed?;
    Ok(run)
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
    let prompt = prompt(task);
    let mut files: Vec<(&str, Vec<u8>, u32)> =
        vec![("opt/agent/task.md", prompt.into_bytes(), 0o644)];
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
            write_log(log_path, &redact(&log, secrets))?;
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
    let mut env: Vec<String> = vec![
        format!("HOME={}", crate::protect::RUN_HOME),
        "HARNESS_TASK_FILE=/opt/agent/task.md".into(),
        format!("HARNESS_INSTANCE_ID={}", task.id),
        format!("HARNESS_SAMPLE={sample}"),
    ];
    env.extend(secrets.iter().map(|(k, v)| format!("{k}={v}")));
    let argv = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        agent.command.clone(),
    ];
    let out = sandbox
        .exec_as(
            &argv,
            crate::protect::RUN_AS,
            &env,
            agent.time_limit,
            4 << 20,
        )
        .await?;
    log.push_str(&format!(
        "$ {}  (as {}, {:.1} s, {})\n{}\n",
        agent.command,
        crate::protect::RUN_USER,
        out.elapsed.as_secs_f64(),
        if out.timed_out {
            format!(
                "stopped at the time limit of {:.0} s",
                agent.time_limit.as_secs_f64()
            )
        } else {
            format!("exit {:?}", out.exit_code)
        },
        out.output
    ));
    // The container is killed at the time limit; what the agent had changed by then is
    // still its patch only when the container is alive to diff it.
    let patch = if out.timed_out {
        String::new()
    } else {
        let diff = sandbox
            .sh(
                "cd /testbed && git -c safe.directory='*' add -A >/dev/null 2>&1 && \
                 git -c safe.directory='*' diff --cached --binary --no-color --no-ext-diff harness-base 2>/dev/null",
                Duration::from_secs(120),
                crate::patch::MAX_PATCH_BYTES + 1,
            )
            .await?;
        if diff.output.len() > crate::patch::MAX_PATCH_BYTES {
            write_log(log_path, &redact(&log, secrets))?;
            bail!(
                "agent {}: its patch is over {} bytes",
                agent.name,
                crate::patch::MAX_PATCH_BYTES
            );
        }
        if !diff.success() {
            write_log(log_path, &redact(&log, secrets))?;
            bail!(
                "agent {}: cannot diff the tree after it: {}",
                agent.name,
                diff.output
            );
        }
        diff.output
    };
    write_log(log_path, &redact(&log, secrets))?;
    if let Some((name, _)) = secrets.iter().find(|(_, v)| patch.contains(v.as_str())) {
        bail!(
            "agent {} wrote the value of {name} into its patch for {}: the patch is not saved",
            agent.name,
            task.id
        );
    }
    Ok(AgentRun {
        instance_id: task.id.clone(),
        sample,
        patch,
        exit_code: out.exit_code,
        timed_out: out.timed_out,
        seconds: started.elapsed().as_secs_f64(),
        log_path: log_path.to_path_buf(),
    })
}

fn write_log(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    crate::results::write_atomic(path, text.as_bytes())
}

/// The predictions rows of `runs`, one JSON object a line, sorted by instance and sample.
pub fn predictions_jsonl(agent: &str, runs: &[AgentRun]) -> String {
    let mut rows: Vec<&AgentRun> = runs.iter().collect();
    rows.sort_by(|a, b| (&a.instance_id, a.sample).cmp(&(&b.instance_id, b.sample)));
    rows.iter()
        .map(|r| {
            serde_json::json!({
                "instance_id": r.instance_id,
                "model_name_or_path": agent,
                "sample": r.sample,
                "model_patch": r.patch,
            })
            .to_string()
                + "\n"
        })
        .collect()
}

/// What `harness agent run` did.
pub struct AgentBatch {
    pub predictions: PathBuf,
    pub runs: Vec<AgentRun>,
    /// `instance/sample: why` for every run that gave no patch row.
    pub failures: Vec<String>,
}

/// Runs `agent` `samples` times on every task (images made when missing) and writes the
/// predictions file (`out`): one row per run that produced a diff (an empty diff is an
/// empty patch).
pub async fn run_batch(
    engine: &Engine,
    agent: &Agent,
    tasks: &[&Task],
    samples: usize,
    results_dir: &Path,
    out: &Path,
    say: &(dyn Fn(String) + Sync),
) -> Result<AgentBatch> {
    secrets(agent)?;
    crate::docker::image::ensure_base_images(engine, tasks, say).await?;
    let cache = results_dir.join(".cache");
    let mut runs: Vec<AgentRun> = Vec::new();
    let mut failures = Vec::new();
    for task in tasks {
        let material = match crate::source::materialize(task, &cache) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{}: {e:#}", task.id));
                continue;
            }
        };
        let image = match crate::docker::image::ensure_task_image(
            engine,
            task,
            &material,
            &results_dir
                .join("images")
                .join(format!("{}.build.log", task.id)),
            false,
            None,
        )
        .await
        {
            Ok(img) => img.tag,
            Err(e) => {
                failures.push(format!("{}: {e:#}", task.id));
                continue;
            }
        };
        for sample in 0..samples {
            let log = results_dir
                .join("agents")
                .join(crate::results::model_slug(&agent.name))
                .join(&task.id)
                .join(format!("{sample}.log"));
            say(format!(
                "agent {} on {}/{sample}: running",
                agent.name, task.id
            ));
            match run_once(engine, agent, task, &image, sample, &log).await {
                Ok(r) => {
                    say(format!(
                        "agent {} on {}/{sample}: {} in {:.1} s, patch of {} bytes (log {})",
                        agent.name,
                        task.id,
                        if r.timed_out {
                            "stopped at the time limit".to_string()
                        } else {
                            match r.exit_code {
                                Some(c) => format!("exit {c}"),
                                None => "no exit code".to_string(),
                            }
                        },
                        r.seconds,
                        r.patch.len(),
                        r.log_path.display()
                    ));
                    if r.timed_out {
                        failures.push(format!("{}/{sample}: stopped at the time limit", task.id));
                    }
                    runs.push(r);
                }
                Err(e) => failures.push(format!("{}/{sample}: {e:#}", task.id)),
            }
        }
    }
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    crate::results::write_atomic(out, predictions_jsonl(&agent.name, &runs).as_bytes())?;
    Ok(AgentBatch {
        predictions: out.to_path_buf(),
        runs,
        failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_toml_is_checked_field_by_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agents.toml");
        std::fs::write(
            &p,
            "[agent.a]\ncommand = \"run\"\nscript = \"a.sh\"\nenv = [\"KEY_1\"]\nnetwork = true\ntime_limit = 60\nmemory = \"2g\"\n",
        )
        .unwrap();
        let a = &load(&p).unwrap()["a"];
        assert_eq!(a.script.as_deref(), Some(dir.path().join("a.sh").as_path()));
        assert_eq!(a.env, ["KEY_1"]);
        assert!(a.network);
        assert_eq!(a.time_limit, Duration::from_secs(60));
        assert_eq!(a.memory_bytes, Some(2 << 30));
        std::fs::write(&p, "[agent.b]\ncommand = \"run\"\nenv = [\"A-B\"]\n").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("agent.b.env") && e.contains("A-B"), "{e}");
        std::fs::write(&p, "[agent.c]\ncommand = \"run\"\ncomand = 1\n").unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("comand"));
    }

    #[test]
    fn secrets_are_redacted_and_missing_ones_named() {
        let s = vec![("K".to_string(), "s3cr3t".to_string())];
        assert_eq!(redact("key=s3cr3t; again s3cr3t", &s), "key=***; again ***");
        let agent = Agent {
            name: "x".into(),
            command: "true".into(),
            script: None,
            setup: Vec::new(),
            env: vec!["HARNESS_TEST_SURELY_UNSET_VARIABLE".into()],
            network: false,
            time_limit: Duration::from_secs(1),
            cpus: None,
            memory_bytes: None,
        };
        let e = secrets(&agent).unwrap_err().to_string();
        assert!(e.contains("HARNESS_TEST_SURELY_UNSET_VARIABLE"), "{e}");
    }
}
