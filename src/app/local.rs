//! `harness local --commit HASH`: the task one of whose commits starts with HASH, and one
//! patch for it (a file, a predictions row, an agent's saved patch) measured against base and
//! human exactly as `opt-at-k` measures them, then said three ways.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::app::agent::{has_row, saved_patches};
use crate::app::tasks::{CommitMatch, TaskCommits, all_commits, find_by_prefix, short};
use crate::core::stats::Decision;
use crate::core::summary::Summary;
use crate::store::dataset::Dataset;

/// The task a commit prefix found.
#[derive(Debug, Clone)]
pub struct FoundTask {
    pub task_id: String,
    pub commits: TaskCommits,
    /// Which commit the prefix matched ("base" or "human").
    pub matched: &'static str,
}

/// Where the patch comes from.
#[derive(Debug, Clone)]
pub enum PatchSource {
    /// `--patch FILE`.
    File(PathBuf),
    /// `--predictions FILE --agent NAME`: the task's row of NAME.
    Predictions(PathBuf),
    /// `--agent NAME` alone: NAME's saved patch (`harness agent run` writes it).
    Saved,
}

/// The one task whose base or human commit starts with `prefix`; a clear error when none
/// does or when several do, listing them.
pub fn find_task(dataset: &Dataset, cache_dir: &Path, prefix: &str) -> Result<FoundTask> {
    if prefix.len() < 4 || !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!(
            "--commit {prefix:?}: give 4 or more hex digits of a base or human commit (`harness tasks` lists them)"
        );
    }
    // `local` evaluates the task it finds: a remote source may be fetched to find it.
    let crate::app::tasks::AllCommits { all, problems, .. } =
        all_commits(dataset, cache_dir, crate::sandbox::source::Fetch::Allowed);
    let matches = find_by_prefix(&all, prefix);
    let mut ids: Vec<&str> = matches.iter().map(|m| m.instance_id.as_str()).collect();
    ids.dedup();
    match ids.len() {
        0 => {
            let mut msg = format!(
                "no task in {} has a base or human commit starting with {prefix}; its tasks:\n{}",
                dataset.root.display(),
                listing_lines(&all)
            );
            for p in problems {
                msg.push_str(&format!("\n(not listed: {p})"));
            }
            bail!(msg)
        }
        1 => {
            let m: &CommitMatch = &matches[0];
            let commits = all
                .iter()
                .find(|(id, _)| *id == m.instance_id)
                .map(|(_, c)| c.clone())
                .context("a matched task vanished")?;
            Ok(FoundTask {
                task_id: m.instance_id.clone(),
                commits,
                matched: m.which,
            })
        }
        _ => bail!(
            "--commit {prefix} is ambiguous: it starts\n{}\ngive more digits",
            matches
                .iter()
                .map(|m| format!("  the {} commit {} of {}", m.which, m.commit, m.instance_id))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

fn listing_lines(all: &[(String, TaskCommits)]) -> String {
    all.iter()
        .map(|(id, c)| format!("  {id}: base {} human {}", short(&c.base), short(&c.human)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The predictions file the run reads: the given one, or one written into `run_dir` with
/// the patch as the task's only row.
pub fn predictions_file(
    found: &FoundTask,
    source: &PatchSource,
    model: &str,
    run_dir: &Path,
    results_dir: &Path,
) -> Result<PathBuf> {
    match source {
        PatchSource::File(p) => {
            let patch = std::fs::read(p)
                .with_context(|| format!("--patch {}: cannot read", p.display()))?;
            let patch = String::from_utf8(patch)
                .map_err(|_| anyhow::anyhow!("--patch {}: not UTF-8 text", p.display()))?;
            let row = serde_json::json!({
                "instance_id": found.task_id,
                "model_name_or_path": model,
                "model_patch": patch,
            });
            let path = run_dir.join("input.predictions.jsonl");
            crate::store::confined::Confined::beneath(results_dir)
                .write_atomic(&path, format!("{row}\n").as_bytes())?;
            Ok(path)
        }
        PatchSource::Predictions(p) => Ok(p.clone()),
        PatchSource::Saved => {
            let path = saved_patches(results_dir, model);
            if !path.is_file() {
                bail!(
                    "no saved patch of agent {model:?} ({} does not exist): give --patch FILE, or \
                     --predictions FILE with the agent's rows",
                    path.display()
                );
            }
            Ok(path)
        }
    }
}

/// The three-way table: base, human and the patch, times, speedups with intervals, and the
/// patch against human as beats / matches / loses.
pub fn three_way(found: &FoundTask, model: &str, summary: &Summary) -> String {
    let mut out = format!(
        "task {} (base {}, human {}; --commit matched the {} commit), patch of {model}\n",
        found.task_id,
        short(&found.commits.base),
        short(&found.commits.human),
        found.matched
    );
    let Some(s) = summary
        .instances
        .iter()
        .find(|i| i.instance_id == found.task_id)
        .and_then(|i| i.samples.first())
    else {
        out.push_str("no result for the patch (see the run folder)\n");
        return out;
    };
    let (Some(st), true) = (
        &s.opt_stats,
        s.status == crate::core::status::Status::Passed,
    ) else {
        out.push_str(&format!(
            "patch: {}{}\n",
            s.status,
            if s.detail.is_empty() {
                String::new()
            } else {
                // The container's text (a test's last line): shown, never obeyed.
                format!(": {}", crate::core::text::for_terminal(&s.detail))
            }
        ));
        return out;
    };
    let iv = s.intervals.as_ref();
    let ci = |f: fn(&crate::core::stats::SpeedupIntervals) -> crate::core::stats::Interval| {
        iv.map(|iv| {
            let x = f(iv);
            format!(" [{:.2}, {:.2}]", x.lo, x.hi)
        })
        .unwrap_or_default()
    };
    let energy = |j: f64| format!("  {j:.1} J/round");
    let e = s.energy.as_ref();
    out.push_str(&format!(
        "{:<8}{:>14}  {:<24}{}\n",
        "variant",
        "time",
        "speedup over base",
        if e.is_some() { "  GPU energy" } else { "" }
    ));
    out.push_str(&format!(
        "{:<8}{:>14}  {:<24}{}\n",
        "base",
        format!("{:.6}", st.base_mean),
        "1.00x",
        e.map(|e| energy(e.base_j)).unwrap_or_default()
    ));
    out.push_str(&format!(
        "{:<8}{:>14}  {:<24}{}\n",
        "human",
        format!("{:.6}", st.commit_mean),
        format!("{:.2}x", st.gm_speedup_commit_base),
        e.map(|e| energy(e.human_j)).unwrap_or_default()
    ));
    out.push_str(&format!(
        "{:<8}{:>14}  {:<24}{}\n",
        "patch",
        format!("{:.6}", st.patch_mean),
        format!(
            "{:.2}x{}",
            st.gm_speedup_patch_base,
            ci(|iv| iv.gm_speedup_patch_base)
        ),
        e.map(|e| energy(e.patch_j)).unwrap_or_default()
    ));
    let hm = iv.map(|iv| iv.hm_speedup_patch_commit);
    let against = match (summary.info.decision_rule.criterion.as_str(), hm) {
        (_, Some(hm)) if hm.lo > 1.0 => "beats human",
        (_, Some(hm)) if hm.lo > summary.info.decision_rule.thresholds.opt_thresh => {
            "matches human"
        }
        (_, Some(hm)) if hm.hi <= summary.info.decision_rule.thresholds.opt_thresh => {
            "loses to human"
        }
        ("gso", None)
            if st.hm_speedup_patch_commit > summary.info.decision_rule.thresholds.opt_thresh =>
        {
            "matches human (GSO's rule, on means)"
        }
        ("gso", None) => "loses to human (GSO's rule, on means)",
        _ => "undecided against human (the interval straddles the threshold)",
    };
    out.push_str(&format!(
        "patch vs human: {against}: HM(human/patch) {:.2}{} (threshold {})\n",
        st.hm_speedup_patch_commit,
        ci(|iv| iv.hm_speedup_patch_commit),
        summary.info.decision_rule.thresholds.opt_thresh
    ));
    let d = |d: Decision| match d {
        Decision::Yes => "yes",
        Decision::No => "no",
        Decision::Undecided => "undecided",
    };
    out.push_str(&format!(
        "verdict ({}): opt_base {}, opt_commit {}{}; {} measured rounds\n",
        summary.info.decision_rule.criterion,
        d(s.decision_base),
        d(s.decision_commit),
        if s.inconclusive {
            " (inconclusive)"
        } else {
            ""
        },
        s.measured_rounds
    ));
    out
}

/// What `harness local` is asked.
pub struct LocalOptions {
    /// A prefix of the task's base or human commit.
    pub commit: String,
    pub patch: Option<PathBuf>,
    pub predictions: Option<PathBuf>,
    pub agent: Option<String>,
    pub agents: PathBuf,
    pub model_access: crate::app::agent::ModelAccess,
    pub dataset: PathBuf,
    pub results_dir: PathBuf,
    pub settings: crate::core::settings::Settings,
    pub gpu: crate::sandbox::gpu::GpuOptions,
    pub disk_check: crate::core::disk::DiskCheck,
    /// The run's summary as JSON on stdout (what `opt-at-k --json` prints) instead of the
    /// three-way text.
    pub json: bool,
}

/// `harness local`: one task by commit prefix, base, human and one patch judged three ways.
pub async fn command(o: LocalOptions, verbosity: crate::core::events::Verbosity) -> Result<i32> {
    let dataset = Dataset::load(&o.dataset)?;
    let found = find_task(&dataset, &o.results_dir.join(".cache"), &o.commit)?;
    let model = o.agent.clone().unwrap_or_else(|| "local".to_string());
    // One folder per commit prefix, a run per model in it (a run folder holds one model).
    let local_root = o
        .results_dir
        .join(format!("local-{}", o.commit.to_ascii_lowercase()));
    let run_id = crate::store::run_folder::model_slug(&model);
    let source = patch_source(&o, &dataset, &found, &local_root.join(&run_id), verbosity).await?;
    let predictions = predictions_file(
        &found,
        &source,
        &model,
        &local_root.join(&run_id),
        &o.results_dir,
    )?;
    let plan = crate::app::plan::RunPlan::resolve(crate::app::plan::RawRunOptions {
        model: model.clone(),
        predictions: vec![predictions],
        k: 1,
        dataset: o.dataset.clone(),
        results_root: local_root,
        run_id: Some(run_id),
        instance_ids: vec![found.task_id.clone()],
        jobs: Some(1),
        settings: o.settings,
        verbosity,
        json: false,
        gpu: o.gpu.clone(),
        partition: None,
        hacked_ids: None,
        rollout_per_file: false,
        disk_check: o.disk_check,
        instance_timeout: None,
    })?;
    let outcome = crate::app::opt_at_k::run(&plan).await?;
    if o.json {
        let run = serde_json::json!({"run_dir": outcome.run_dir.root, "task": found.task_id});
        let json = crate::app::ci::json_output(
            &outcome.summary,
            &[],
            &crate::app::ci::CiOptions::default(),
            Some(run),
        )?;
        crate::outln!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(crate::app::opt_at_k::exit_code(&outcome));
    }
    crate::out!(
        "{}",
        crate::core::text::for_terminal_block(&three_way(&found, &model, &outcome.summary))
    );
    crate::outln!(
        "page: {}",
        outcome
            .run_dir
            .root
            .join(crate::store::run_folder::names::REPORT_HTML)
            .display()
    );
    Ok(crate::app::opt_at_k::exit_code(&outcome))
}

/// Where the patch comes from: a file, a predictions file, the agent's saved patch, or the
/// agent run on the task now.
async fn patch_source(
    o: &LocalOptions,
    dataset: &Dataset,
    found: &FoundTask,
    run_dir: &Path,
    verbosity: crate::core::events::Verbosity,
) -> Result<PatchSource> {
    let agent = match (&o.patch, &o.predictions, &o.agent) {
        (Some(p), _, _) => return Ok(PatchSource::File(p.clone())),
        (None, Some(p), _) => return Ok(PatchSource::Predictions(p.clone())),
        (None, None, None) => anyhow::bail!(
            "give the patch: --patch FILE, --predictions FILE --agent NAME, or --agent NAME"
        ),
        (None, None, Some(agent)) => agent,
    };
    let saved = saved_patches(&o.results_dir, agent);
    if has_row(&saved, agent, &found.task_id) {
        eprintln!(
            "using {agent}'s saved patch for {} from {}",
            found.task_id,
            saved.display()
        );
        return Ok(PatchSource::Predictions(saved));
    }
    let spec = crate::app::agent::named(&o.agents, agent, &o.model_access)?;
    crate::app::agent::secrets(&spec)?;
    eprintln!(
        "no saved patch of {agent} for {}: running the agent now",
        found.task_id
    );
    let task = &dataset.tasks[&found.task_id];
    let engine = crate::sandbox::docker::Engine::connect().await?;
    let out = run_dir.join("agent.predictions.jsonl");
    // The agent runs now, as said: an earlier run's row in this folder is not resumed.
    let results = crate::store::confined::Confined::beneath(&o.results_dir);
    if out.exists() {
        results.remove(&out)?;
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let reporter = crate::app::reporter::spawn_reporter(verbosity, rx);
    let batch =
        crate::app::agent::run_batch(&engine, &spec, &[task], 1, 1, &o.results_dir, &out, &tx)
            .await;
    drop(tx);
    let _ = reporter.await;
    let batch = batch?;
    if let Some(f) = batch.failures.first() {
        anyhow::bail!("agent {agent} gave no patch: {f}");
    }
    Ok(PatchSource::Predictions(batch.predictions))
}
