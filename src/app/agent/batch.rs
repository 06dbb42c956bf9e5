//! `harness agent run`: an agent K times on every selected task, `--jobs` at a time, its
//! patches written as predictions rows as each run ends (the file is rewritten whole,
//! atomically, after every row). A sample whose row the file already holds is not run again
//! (resume); a run whose agent failed for an API reason gives no row, and what it spent is
//! kept beside its log, added to the row of the attempt that succeeds (LoCoDiff's rule: API
//! failures are retried, a model's bad patch never is).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use futures::StreamExt;

use super::run::Attempt;
use super::{
    Agent, AgentRun, AgentRunOptions, api_failure, named, run_once, saved_patches, secrets, spent,
};
use crate::core::spend::Usage;
use crate::core::task::Task;
use crate::sandbox::docker::Engine;
use crate::store::confined::Confined;

/// What `harness agent run` did.
pub struct AgentBatch {
    pub predictions: PathBuf,
    /// The runs of this call that gave a row.
    pub runs: Vec<AgentRun>,
    /// Samples whose rows the file already held: not run again.
    pub kept: usize,
    /// `instance/sample: why` for every run that gave no row, or a row the harness stopped.
    pub failures: Vec<String>,
    /// Of the failures, those of an API reason: the next run retries them.
    pub api_failures: Vec<String>,
}

/// A predictions file as `agent run` keeps it: the agent's rows by (instance, sample), and
/// every other line as it was.
struct Rows {
    mine: BTreeMap<(String, usize), String>,
    others: Vec<String>,
}

impl Rows {
    fn text(&self) -> String {
        let mut out = String::new();
        for line in self.mine.values().chain(&self.others) {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// The rows `path` holds (none when it does not exist). A line that is not a JSON object,
/// or a sample of the agent given twice, is an error naming it: the file is rewritten.
fn read_rows(path: &Path, agent: &str) -> Result<Rows> {
    let mut rows = Rows {
        mine: BTreeMap::new(),
        others: Vec::new(),
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(rows),
        Err(e) => bail!("{}: cannot read: {e}", path.display()),
    };
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let row: serde_json::Value = serde_json::from_str(line).with_context(|| {
            format!(
                "{}: not a JSON row (harness agent run rewrites this file: fix or remove the line)",
                at()
            )
        })?;
        let id = row["instance_id"].as_str();
        let sample = row["sample"].as_u64().and_then(|s| usize::try_from(s).ok());
        match (row["model_name_or_path"].as_str(), id, sample) {
            (Some(m), Some(id), Some(s)) if m == agent => {
                if rows
                    .mine
                    .insert((id.to_string(), s), line.to_string())
                    .is_some()
                {
                    bail!("{}: a second row of {agent} for {id} sample {s}", at());
                }
            }
            _ => rows.others.push(line.to_string()),
        }
    }
    Ok(rows)
}

/// The row of a finished run; `earlier` is what the sample's attempts that failed for an
/// API reason spent (added in, each a retry).
fn row_of(agent: &str, r: &AgentRun, earlier: &[Usage]) -> String {
    let mut row = serde_json::json!({
        "instance_id": r.instance_id,
        "model_name_or_path": agent,
        "sample": r.sample,
        "model_patch": r.patch,
    });
    if let Some(u) = &r.usage {
        let mut total = Usage::default();
        for e in earlier {
            total.absorb(e);
            total.retries += 1;
        }
        total.absorb(u);
        row["agent_usage"] = serde_json::to_value(&total).unwrap_or_default();
        row["agent_seconds"] = serde_json::json!(r.seconds);
    }
    row.to_string()
}

/// Where a sample's failed attempts are kept until one succeeds, beside its logs.
fn attempts_path(results_dir: &Path, agent: &Agent, task: &Task, sample: usize) -> PathBuf {
    logs_dir(results_dir, agent, task).join(format!("{sample}.attempts.jsonl"))
}

fn logs_dir(results_dir: &Path, agent: &Agent, task: &Task) -> PathBuf {
    results_dir
        .join("agents")
        .join(crate::store::run_folder::model_slug(&agent.name))
        .join(&task.id)
}

/// What the failed attempts kept at `path` spent (lines that do not read are skipped).
fn earlier_attempts(path: &Path) -> Vec<Usage> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn record_attempt(results: &Confined, path: &Path, usage: &Usage) -> Result<()> {
    let mut text = std::fs::read_to_string(path).unwrap_or_default();
    text.push_str(&serde_json::to_string(usage)?);
    text.push('\n');
    results.write_atomic(path, text.as_bytes())
}

/// The task's image and the agent's image over it (built when missing).
async fn images(
    engine: &Engine,
    agent: &Agent,
    task: &Task,
    results_dir: &Path,
    results: &Confined,
) -> Result<String> {
    let cache = results_dir.join(".cache");
    let material = crate::sandbox::source::materialize(task, &cache)?;
    let build_log = results_dir
        .join(crate::store::run_folder::names::IMAGES_DIR)
        .join(format!("{}.build.log", task.id));
    results.check(&build_log)?;
    let image = crate::sandbox::docker::image::ensure_tree_image(
        engine, task, &material, &build_log, false, None,
    )
    .await?
    .tag;
    // Built here, once, so that runs of the task side by side find it made.
    let logs = logs_dir(results_dir, agent, task);
    results.create_dir_all(&logs)?;
    super::image::ensure(engine, agent, task, &image, &logs.join("image.log")).await?;
    Ok(image)
}

/// Runs `agent` on every sample 0..`samples` of every task that `out` holds no row of,
/// `jobs` at a time, and writes each row into `out` as its run ends.
#[allow(clippy::too_many_arguments)]
pub async fn run_batch(
    engine: &Engine,
    agent: &Agent,
    tasks: &[&Task],
    samples: usize,
    jobs: usize,
    results_dir: &Path,
    out: &Path,
    events: &crate::sandbox::events::Events,
) -> Result<AgentBatch> {
    secrets(agent)?;
    let mut rows = read_rows(out, agent.rows_name())?;
    crate::sandbox::host_check::require(engine).await?;
    crate::sandbox::docker::image::ensure_base_images(engine, tasks, events).await?;
    let say = |m: String| crate::sandbox::events::emit(events, crate::core::events::Event::Info(m));
    // What goes into the results folder (build logs, the agent's logs, its saved patches)
    // goes through no link there; a file the user named elsewhere (`--out`) is theirs.
    let results = Confined::beneath(results_dir);
    let write = |rows: &Rows| -> Result<()> {
        if out.starts_with(results_dir) {
            results.write_atomic(out, rows.text().as_bytes())
        } else {
            crate::store::run_folder::write_atomic(out, rows.text().as_bytes())
        }
    };
    let mut batch = AgentBatch {
        predictions: out.to_path_buf(),
        runs: Vec::new(),
        kept: 0,
        failures: Vec::new(),
        api_failures: Vec::new(),
    };
    let mut todo = Vec::new();
    for task in tasks {
        let missing: Vec<usize> = (0..samples)
            .filter(|s| !rows.mine.contains_key(&(task.id.clone(), *s)))
            .collect();
        batch.kept += samples - missing.len();
        if missing.is_empty() {
            continue;
        }
        match images(engine, agent, task, results_dir, &results).await {
            Ok(image) => todo.extend(missing.into_iter().map(|s| (*task, image.clone(), s))),
            Err(e) => batch.failures.push(format!("{}: {e:#}", task.id)),
        }
    }
    if batch.kept > 0 {
        say(format!(
            "agent {}: {} sample(s) already have rows in {} (not run again)",
            agent.name,
            batch.kept,
            out.display()
        ));
    }
    let say = &say;
    let checker = &results;
    // Dollars the finished runs spent (`--max-run-cost`): a sample starts with what is left.
    let spent = std::cell::Cell::new(0.0_f64);
    let spent_so_far = &spent;
    let mut running = futures::stream::iter(todo.into_iter().map(|(task, image, sample)| {
        let log = logs_dir(results_dir, agent, task).join(format!("{sample}.log"));
        async move {
            let attempt = match (
                checker.check(&log),
                within_budget(agent, spent_so_far.get()),
            ) {
                (Err(e), _) | (_, Err(e)) => Attempt {
                    run: Err(e),
                    usage: None,
                },
                (Ok(()), Ok(agent)) => {
                    say(format!(
                        "agent {} on {}/{sample}: running",
                        agent.name, task.id
                    ));
                    run_once(engine, &agent, task, &image, sample, &log).await
                }
            };
            (task, sample, attempt)
        }
    }))
    .buffer_unordered(jobs.max(1));
    while let Some((task, sample, attempt)) = running.next().await {
        let at = format!("{}/{sample}", task.id);
        // What it spent counts against the run's budget whatever became of it; a cost
        // that is not known leaves the budget unenforceable, so nothing further starts.
        if let Some(u) = &attempt.usage {
            spent.set(spent.get() + u.dollars().unwrap_or(f64::INFINITY));
        }
        let attempts = attempts_path(results_dir, agent, task, sample);
        let earlier = earlier_attempts(&attempts);
        let r = match settle(attempt, earlier.len()) {
            Settled::Row(r) => r,
            Settled::Retry { why, usage, api } => {
                // No row: the next run tries it again, adding what this attempt spent.
                if let Some(u) = usage.filter(|u| u.requests > 0)
                    && let Err(e) = record_attempt(&results, &attempts, &u)
                {
                    batch.failures.push(format!("{at}: {e:#}"));
                }
                batch.failures.push(format!("{at}: {why}"));
                if api {
                    batch.api_failures.push(at);
                }
                continue;
            }
        };
        say(finished_line(agent, &at, &r));
        if let Some(why) = &r.stopped {
            batch.failures.push(format!("{at}: {why}"));
        }
        let row = row_of(agent.rows_name(), &r, &earlier);
        rows.mine.insert((task.id.clone(), sample), row);
        write(&rows)?;
        let _ = results.remove(&attempts);
        batch.runs.push(r);
    }
    write(&rows)?;
    Ok(batch)
}

/// A sample's attempts after the first that failed for an API reason: the one after them
/// is the sample, whatever it gives (an agent that can bring about a provider's 429 gets at
/// most this many new draws).
pub const MAX_API_RETRIES: usize = 2;

/// What becomes of an attempt: its row, or no row and why.
enum Settled {
    Row(AgentRun),
    Retry {
        why: String,
        usage: Option<Usage>,
        /// Failed for an API reason (else the harness failed).
        api: bool,
    },
}

/// An attempt's fate, `earlier` attempts of its sample having failed.
fn settle(attempt: Attempt, earlier: usize) -> Settled {
    let mut r = match attempt.run {
        Ok(r) => r,
        Err(e) => {
            return Settled::Retry {
                why: format!("{e:#}"),
                usage: attempt.usage,
                api: false,
            };
        }
    };
    match api_failure(&r) {
        Some(why) if earlier < MAX_API_RETRIES => Settled::Retry {
            why,
            usage: r.usage,
            api: true,
        },
        Some(why) => {
            r.patch.clear();
            r.stopped = Some(format!(
                "{why}; after {} attempts that failed so, the sample is an empty patch",
                earlier + 1
            ));
            Settled::Row(r)
        }
        None => Settled::Row(r),
    }
}

/// The agent as a sample starts it: its budget no more than what the run has left; an
/// error when the run's budget is spent.
fn within_budget(agent: &Agent, spent: f64) -> Result<Agent> {
    let mut agent = agent.clone();
    if let Some(run_budget) = agent.max_run_cost {
        let left = run_budget - spent;
        if spent.is_infinite() {
            bail!(
                "not run: the run's budget of ${run_budget:.2} cannot be held (an earlier \
                 sample's cost is unknown: --max-run-cost); run again to run it"
            );
        }
        if left <= 0.0 {
            bail!(
                "not run: the run's budget of ${run_budget:.2} is spent (${spent:.4}; \
                 --max-run-cost); run again to run it"
            );
        }
        agent.max_cost = Some(agent.max_cost.map_or(left, |c| c.min(left)));
    }
    Ok(agent)
}

/// "agent A on t/0: exit 0 in 12.3 s, patch of 420 bytes, 5 request(s) ... (log ...)".
fn finished_line(agent: &Agent, at: &str, r: &AgentRun) -> String {
    format!(
        "agent {} on {at}: {} in {:.1} s, patch of {} bytes{} (log {})",
        agent.name,
        match (&r.stopped, r.exit_code) {
            (Some(why), _) => why.clone(),
            (None, Some(c)) => format!("exit {c}"),
            (None, None) => "no exit code".to_string(),
        },
        r.seconds,
        r.patch.len(),
        r.usage.as_ref().map(spent).unwrap_or_default(),
        r.log_path.display()
    )
}

/// `harness agent run`: the agent on every selected task, its patches saved as predictions.
pub async fn command(o: AgentRunOptions, verbosity: crate::core::events::Verbosity) -> Result<i32> {
    let agent = named(&o.agents, &o.agent, &o.model_access)?;
    // Before anything else: a variable the user did not pass stops it here.
    secrets(&agent)?;
    if o.samples == 0 {
        bail!("--samples: must be at least 1");
    }
    if o.jobs == 0 {
        bail!("--jobs: must be at least 1");
    }
    let dataset = crate::store::dataset::Dataset::load(&o.dataset)?;
    let (tasks, warnings) = dataset.select(&o.instance_ids)?;
    for w in warnings {
        eprintln!("warning: {}", crate::core::text::for_terminal(&w));
    }
    let out = o
        .out
        .clone()
        .unwrap_or_else(|| saved_patches(&o.results_dir, &o.agent));
    let engine = Engine::connect().await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let reporter = crate::app::reporter::spawn_reporter(verbosity, rx);
    let batch = run_batch(
        &engine,
        &agent,
        &tasks,
        o.samples,
        o.jobs,
        &o.results_dir,
        &out,
        &tx,
    )
    .await;
    drop(tx);
    let _ = reporter.await;
    let batch = batch?;
    if o.json {
        let json = serde_json::json!({"agent": o.agent, "predictions": batch.predictions,
            "patches": batch.runs.len(), "kept": batch.kept, "failures": batch.failures,
            "api_failures": batch.api_failures});
        crate::outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        crate::outln!(
            "{} patch(es) of {} written to {}{}",
            batch.runs.len(),
            o.agent,
            batch.predictions.display(),
            if batch.kept > 0 {
                format!(" ({} kept from earlier runs)", batch.kept)
            } else {
                String::new()
            }
        );
    }
    for f in &batch.failures {
        // A failure's reason can hold the agent's own output: shown, never obeyed.
        eprintln!(
            "no patch: {}",
            crate::core::text::for_terminal(&f.to_string())
        );
    }
    if !batch.api_failures.is_empty() {
        eprintln!(
            "{} sample(s) failed for an API reason, not the model's ({}): run the same command \
             again to retry them (and only them)",
            batch.api_failures.len(),
            batch.api_failures.join(", ")
        );
    }
    Ok(if batch.failures.is_empty() { 0 } else { 1 })
}
