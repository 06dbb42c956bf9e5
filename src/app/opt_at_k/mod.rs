//! The main job: a validated plan in, a finished run folder and its summary out.

mod disk;
mod execute;
mod prebuilt;
mod signals;
mod work;

use execute::{Machine, execute, refresh_reports};
pub use signals::{interrupted, watch_signals};
use work::{Warnings, open_run_dir, plan_work, read_predictions, run_info};

use std::collections::BTreeMap;

use anyhow::Result;
use tokio::sync::mpsc;

use crate::app::export;
use crate::app::plan::RunPlan;
use crate::app::reporter::spawn_reporter;
use crate::core::events::Event;
use crate::core::summary::Summary;
use crate::sandbox::events::{Events, emit};
use crate::store::dataset::Dataset;
use crate::store::run_folder::RunDir;

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

/// `harness opt-at-k`: the run, its CI outputs, the table (or JSON) on stdout. Exit codes:
/// 0 the run completed, 1 bad input or a sample ended `error`, 2 a `--fail-under` threshold
/// missed, 130 SIGINT, 143 SIGTERM (the first that applies in the order 130/143, 1, 2).
pub async fn command(plan: RunPlan, ci: &crate::app::ci::CiOptions) -> Result<i32> {
    let gates = ci.gates(plan.k)?;
    let outcome = run(&plan).await?;
    let judged = ci.write_outputs(&gates, &outcome.summary)?;
    if plan.json {
        let invocation = serde_json::json!({
            "evaluated_samples": outcome.evaluated,
            "reused_samples": outcome.reused,
            "images_built": outcome.images_built,
            "interrupted": outcome.interrupted,
            "complete": outcome.summary.totals.complete,
            "report_files": outcome.report_files,
        });
        let json = crate::app::ci::json_output(&outcome.summary, &judged, ci, Some(invocation))?;
        crate::outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let verbose = plan.verbosity == crate::core::events::Verbosity::Verbose;
        crate::out!(
            "{}",
            export::run_ending(&outcome.summary, &outcome.run_dir.root, verbose)
        );
    }
    eprint!("{}", crate::app::ci::describe(&judged));
    Ok(match exit_code(&outcome) {
        0 => crate::app::ci::exit_code(&judged),
        code => code,
    })
}

/// 130 after SIGINT, 143 after SIGTERM, 1 when a sample ended `error` (infrastructure:
/// repeat the command to retry it), 0 otherwise, whatever the model scored.
pub fn exit_code(outcome: &RunOutcome) -> i32 {
    match outcome.interrupted {
        Some("SIGTERM") => 143,
        Some(_) => 130,
        None => {
            let errors = outcome
                .summary
                .instances
                .iter()
                .flat_map(|i| i.samples.iter())
                .filter(|s| s.status == crate::core::status::Status::Error)
                .count();
            if errors > 0 {
                eprintln!(
                    "{errors} sample(s) ended `error` (not the model's fault): repeat the command to run them again"
                );
                1
            } else {
                0
            }
        }
    }
}

/// Runs `opt-at-k`'s job; progress goes to stderr through the reporter.
pub async fn run(plan: &RunPlan) -> Result<RunOutcome> {
    let (tx, rx) = mpsc::unbounded_channel();
    let reporter = spawn_reporter(plan.verbosity, rx);
    let result = run_with(plan, &tx).await;
    drop(tx);
    let _ = reporter.await;
    result
}

/// The run, stage by stage: the input (nothing is started when it is wrong), the machine,
/// what there is to do (and what is saved already), run.json, the tasks, the reports.
async fn run_with(plan: &RunPlan, events: &Events) -> Result<RunOutcome> {
    let mut warnings = Warnings {
        events,
        all: Vec::new(),
    };
    let dataset = Dataset::load(&plan.dataset)?;
    let (selected, select_warnings) = dataset.select(&plan.instance_ids)?;
    for w in select_warnings {
        warnings.push(w);
    }
    for task in &selected {
        let (_, refused) = crate::core::task::allowed_env(&task.env_pass);
        if !refused.is_empty() {
            warnings.push(format!(
                "task {}: asks for {} from this environment; not passed (allow with --pass-env {})",
                task.id,
                refused.join(", "),
                refused.join(",")
            ));
        }
    }
    let chosen = read_predictions(plan, &dataset, &selected, &mut warnings)?;
    let (tasks, partition) = match plan.partition {
        None => (selected, None),
        Some(p) => {
            let part = crate::core::partition::select(
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
            let info = crate::core::partition::PartitionInfo {
                index: p.index,
                count: p.count,
                selected_instance_ids: selected.iter().map(|t| t.id.clone()).collect(),
                selection_digest: crate::store::inputs::selection_digest(&selected)?,
                task_digests: Vec::new(),
            };
            (part, Some(info))
        }
    };
    let machine = Machine::prepare(plan, &tasks, events).await?;
    let run_dir = open_run_dir(plan)?;
    let planned = plan_work(plan, &tasks, &chosen, &machine, &run_dir, &mut warnings).await?;
    // Before any container of the run starts, and before run.json says a run began.
    let disk_gate = disk::check(plan, &machine, &planned.work, events).await?;
    prebuilt::check(&machine.engine, &planned.work, events).await?;
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
    let dataset_ids: Vec<String> = dataset
        .tasks
        .keys()
        .chain(dataset.invalid.keys())
        .cloned()
        .collect::<std::collections::BTreeSet<String>>()
        .into_iter()
        .collect();
    let mut info = run_info(
        plan,
        &tasks,
        &machine,
        &planned,
        warnings.all,
        partition,
        &dataset_ids,
    )?;
    run_dir.store().write_json(&run_dir.run_json(), &info)?;
    // The reports of an earlier invocation go now: until this one finishes, the folder's
    // reports say what is done so far, partial (refreshed after every task), so a run
    // killed outright never leaves complete-looking reports beside its run.json.
    refresh_reports(&run_dir, events);

    let (interrupted, images_built) =
        execute(plan, &machine, &run_dir, &planned.work, disk_gate, events).await;
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
    run_dir.store().write_json(&run_dir.run_json(), &info)?;
    let summary = crate::store::run_folder::summarise(&run_dir)?;
    let report_files = export::write_all(&run_dir, &summary)?;
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
