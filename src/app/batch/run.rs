//! The `harness run` command: every entry checked first (nothing runs when one is wrong),
//! then run one after another (measurements never overlap), then ranked.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{BatchPlan, BatchReport, EntryPlan, EntryResult, EntryState};
use crate::app::ci::{FailUnder, GateResult};
use crate::app::opt_at_k;
use crate::app::plan::{RawRunOptions, RunPlan};
use crate::core::events::Verbosity;
use crate::store::confined::Confined;
use crate::store::run_folder::names;

/// What `harness run` is asked.
pub struct BatchOptions {
    pub config: PathBuf,
    pub results_dir: PathBuf,
    pub json: bool,
    pub fail_under: Vec<String>,
    pub gpu: crate::sandbox::gpu::GpuOptions,
    /// `--disk-check`, for every entry.
    pub disk_check: crate::core::disk::DiskCheck,
    pub verbosity: Verbosity,
}

/// Runs a batch; the exit code follows `opt-at-k`'s over its entries.
pub async fn command(o: BatchOptions) -> Result<i32> {
    let batch = super::load(&o.config)?;
    let gates = crate::app::ci::parse_gates(&o.fail_under)?;
    let batch_dir = o.results_dir.join(&batch.name);
    let prepared = prepare(&batch, &o, &gates, &batch_dir)?;
    // The batch folder and everything in it are real folders and files, never links.
    Confined::beneath(&o.results_dir).create_dir_all(&batch_dir)?;
    let store = Confined::folder(&batch_dir);
    // From here a Ctrl-C or SIGTERM no longer ends the process: the entry running stops
    // (keeping what it finished) and no further entry starts.
    opt_at_k::watch_signals();
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (results, interrupted) = run_entries(prepared, &gates, &o, &batch, &batch_dir).await;
    let ranking = super::rank(results);
    let code = super::exit_code(&ranking.entries, interrupted);
    let report = BatchReport {
        schema_version: super::BATCH_SCHEMA_VERSION,
        name: batch.name.clone(),
        config: o.config.display().to_string(),
        batch_dir: batch_dir.display().to_string(),
        started_at,
        finished_at: Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        complete: ranking
            .entries
            .iter()
            .all(|e| e.state == EntryState::Complete),
        interrupted: interrupted.map(str::to_string),
        exit_code: code,
        comparable: ranking.comparable,
        groups: ranking.groups,
        notes: ranking.notes,
        entries: ranking.entries,
    };
    store.write_json(&batch_dir.join("batch.json"), &report)?;
    store.write_atomic(
        &batch_dir.join("summary.md"),
        super::summary_markdown(&report).as_bytes(),
    )?;
    store.write_atomic(
        &batch_dir.join(names::REPORT_HTML),
        super::html::page(&report, &batch_dir).as_bytes(),
    )?;
    if o.json {
        crate::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        crate::out!("{}", super::terminal_table(&report));
        crate::outln!("results: {}", batch_dir.display());
    }
    Ok(code)
}

/// The plan of one entry: its own model, predictions, K, dataset and instances, the
/// batch-wide settings, its run folder inside the batch folder.
fn entry_plan(
    batch: &BatchPlan,
    entry: &EntryPlan,
    batch_dir: &Path,
    o: &BatchOptions,
) -> Result<RunPlan> {
    RunPlan::resolve(RawRunOptions {
        model: entry.model.clone(),
        predictions: entry.predictions.clone(),
        k: entry.k,
        dataset: entry.dataset.clone(),
        results_root: batch_dir.to_path_buf(),
        run_id: Some(entry.run_id.clone()),
        instance_ids: entry.instance_ids.clone(),
        jobs: Some(batch.jobs),
        settings: batch.settings,
        verbosity: o.verbosity,
        json: false,
        gpu: o.gpu.clone(),
        partition: None,
        hacked_ids: None,
        rollout_per_file: false,
        disk_check: o.disk_check,
        instance_timeout: None,
    })
}

/// What an entry runs: its plan, or first its agent (whose predictions the plan then reads).
enum Work {
    Plan(Box<RunPlan>),
    Agent(Box<crate::app::agent::Agent>),
}

/// Every entry's work and pending result, or every problem at once.
fn prepare<'a>(
    batch: &'a BatchPlan,
    o: &BatchOptions,
    gates: &[FailUnder],
    batch_dir: &Path,
) -> Result<Vec<(&'a EntryPlan, Work, EntryResult)>> {
    let mut problems = Vec::new();
    let mut prepared = Vec::new();
    for entry in &batch.entries {
        let checked = (|| -> Result<(Work, Vec<String>)> {
            crate::app::ci::check_k(gates, entry.k)?;
            if let Some(a) = &entry.agent {
                let (agent, ids) = super::agents::check(entry, a)?;
                return Ok((Work::Agent(Box::new(agent)), ids));
            }
            let plan = entry_plan(batch, entry, batch_dir, o)?;
            let ids = super::preflight(entry)?;
            Ok((Work::Plan(Box::new(plan)), ids))
        })();
        match checked {
            Ok((plan, ids)) => {
                let result = EntryResult::pending(entry, &batch_dir.join(&entry.run_id), ids);
                prepared.push((entry, plan, result));
            }
            Err(e) => problems.push(format!("{}: {e:#}", entry.describe())),
        }
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "{}: {} problem(s), nothing was run:\n  {}",
            o.config.display(),
            problems.len(),
            problems.join("\n  ")
        );
    }
    Ok(prepared)
}

/// The plan of an entry whose agent has run: its predictions are the agent's rows.
async fn agent_plan(
    entry: &EntryPlan,
    agent: &crate::app::agent::Agent,
    result: &mut EntryResult,
    (batch, batch_dir, o): (&BatchPlan, &Path, &BatchOptions),
) -> Result<RunPlan> {
    let made =
        super::agents::make_predictions(entry, agent, batch_dir, batch.jobs, o.verbosity).await?;
    result.agent_failures = made.failures;
    let mut entry = entry.clone();
    entry.predictions = vec![made.predictions];
    super::preflight(&entry)?;
    entry_plan(batch, &entry, batch_dir, o)
}

/// Runs the entries one after another until a signal stops the batch.
async fn run_entries(
    prepared: Vec<(&EntryPlan, Work, EntryResult)>,
    gates: &[FailUnder],
    o: &BatchOptions,
    batch: &BatchPlan,
    batch_dir: &Path,
) -> (Vec<EntryResult>, Option<&'static str>) {
    let verbosity = o.verbosity;
    let total = prepared.len();
    let quiet = matches!(verbosity, Verbosity::Quiet);
    let mut results = Vec::new();
    let mut interrupted: Option<&'static str> = None;
    for (n, (entry, work, mut result)) in prepared.into_iter().enumerate() {
        if interrupted.is_none() {
            interrupted = opt_at_k::interrupted();
        }
        if interrupted.is_some() {
            results.push(result);
            continue;
        }
        if !quiet {
            eprintln!(
                "[{}/{total}] {} (model {}, K={}, {} instance(s)) -> {}",
                n + 1,
                entry.label,
                entry.model,
                entry.k,
                result.instance_ids.len(),
                result.run_dir
            );
        }
        let plan = match work {
            Work::Plan(plan) => Ok(*plan),
            Work::Agent(agent) => {
                agent_plan(entry, &agent, &mut result, (batch, batch_dir, o)).await
            }
        };
        let outcome = match plan {
            Ok(plan) => opt_at_k::run(&plan).await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(outcome) => {
                record(&mut result, &outcome, gates);
                if let Some(f) = &result.figures
                    && !quiet
                {
                    eprintln!(
                        "[{}/{total}] {}: Opt@{} {:.2}%{}, pass@1 {:.2}%",
                        n + 1,
                        entry.label,
                        entry.k,
                        f.opt_at_k,
                        if outcome.summary.totals.complete {
                            ""
                        } else {
                            " (partial)"
                        },
                        f.pass_at_1
                    );
                }
                for line in crate::app::ci::describe(&result.fail_under).lines() {
                    eprintln!("{}: {line}", entry.label);
                }
                interrupted = outcome.interrupted.or_else(opt_at_k::interrupted);
            }
            Err(e) => {
                eprintln!(
                    "error: {}: {}",
                    entry.describe(),
                    crate::core::text::for_terminal_block(&format!("{e:#}"))
                );
                result.state = EntryState::Failed;
                result.error = Some(format!("{e:#}"));
                result.exit_code = Some(1);
                interrupted = opt_at_k::interrupted();
            }
        }
        results.push(result);
    }
    (results, interrupted)
}

/// An entry's result from its finished (or interrupted) run.
fn record(result: &mut EntryResult, outcome: &opt_at_k::RunOutcome, gates: &[FailUnder]) {
    let summary = &outcome.summary;
    result.state = if summary.totals.complete {
        EntryState::Complete
    } else {
        EntryState::Partial
    };
    result.figures = Some(super::Figures::from_summary(summary));
    result.interrupted = outcome.interrupted.map(str::to_string);
    result.not_run_ids = summary.totals.not_run_ids.clone();
    result.report_files = outcome
        .report_files
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    result.exit_code = Some(opt_at_k::exit_code(outcome));
    let judged: Vec<GateResult> = crate::app::ci::judge(summary, gates);
    result.fail_under = judged;
}
