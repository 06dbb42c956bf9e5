//! `harness local --commit HASH`: the task one of whose commits starts with HASH, and one
//! patch for it (a file, a predictions row, an agent's saved patch) measured against base and
//! human exactly as `opt-at-k` measures them, then said three ways.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::commits::{CommitMatch, TaskCommits, find_by_prefix, task_commits};
use crate::dataset::Dataset;
use crate::report::Summary;
use crate::stats::Decision;

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

/// Every task's commits, with the tasks whose source cannot be read left out (and said).
pub fn all_commits(
    dataset: &Dataset,
    cache_dir: &Path,
) -> (Vec<(String, TaskCommits)>, Vec<String>) {
    let mut all = Vec::new();
    let mut problems = Vec::new();
    for (id, task) in &dataset.tasks {
        match crate::source::materialize(task, cache_dir).and_then(|m| task_commits(task, &m)) {
            Ok(c) => all.push((id.clone(), c)),
            Err(e) => problems.push(format!("{id}: {e:#}")),
        }
    }
    (all, problems)
}

/// The one task whose base or human commit starts with `prefix`; a clear error when none
/// does or when several do, listing them.
pub fn find_task(dataset: &Dataset, cache_dir: &Path, prefix: &str) -> Result<FoundTask> {
    if prefix.len() < 4 || !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!(
            "--commit {prefix:?}: give 4 or more hex digits of a base or human commit (`harness tasks` lists them)"
        );
    }
    let (all, problems) = all_commits(dataset, cache_dir);
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

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// `harness tasks`: every task with its commits, GPUs and description.
pub fn task_listing(dataset: &Dataset, cache_dir: &Path) -> String {
    let mut out = String::new();
    let (all, problems) = all_commits(dataset, cache_dir);
    let width = all.iter().map(|(id, _)| id.len()).max().unwrap_or(8).max(8);
    out.push_str(&format!(
        "{:<width$}  {:<12}  {:<12}  {:<4}  description\n",
        "instance", "base", "human", "gpus"
    ));
    for (id, c) in &all {
        let task = &dataset.tasks[id];
        out.push_str(&format!(
            "{id:<width$}  {:<12}  {:<12}  {:<4}  {}\n",
            short(&c.base),
            short(&c.human),
            task.resources.gpus,
            task.description
        ));
    }
    for p in problems {
        out.push_str(&format!("cannot list: {p}\n"));
    }
    for (name, why) in &dataset.invalid {
        out.push_str(&format!("invalid task {name}: {why}\n"));
    }
    out
}

/// Where agents' patches are saved: `<results>/agents/<agent>.predictions.jsonl`.
pub fn saved_patches(results_dir: &Path, agent: &str) -> PathBuf {
    results_dir.join("agents").join(format!(
        "{}.predictions.jsonl",
        crate::results::model_slug(agent)
    ))
}

/// Whether `path` is a predictions file with a row of `model` for `instance`.
pub fn has_row(path: &Path, model: &str, instance: &str) -> bool {
    path.is_file()
        && crate::predictions::load(
            &[path.to_path_buf()],
            &crate::predictions::LoadOptions {
                model: model.to_string(),
                max_patch_bytes: crate::patch::MAX_PATCH_BYTES,
            },
        )
        .is_ok_and(|p| p.by_instance.contains_key(instance))
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
            std::fs::create_dir_all(run_dir)
                .with_context(|| format!("{}: cannot create", run_dir.display()))?;
            let row = serde_json::json!({
                "instance_id": found.task_id,
                "model_name_or_path": model,
                "model_patch": patch,
            });
            let path = run_dir.join("input.predictions.jsonl");
            crate::results::write_atomic(&path, format!("{row}\n").as_bytes())?;
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
    let (Some(st), true) = (&s.opt_stats, s.status == crate::results::Status::Passed) else {
        out.push_str(&format!(
            "patch: {}{}\n",
            s.status,
            if s.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", s.detail)
            }
        ));
        return out;
    };
    let iv = s.intervals.as_ref();
    let ci = |f: fn(&crate::stats::SpeedupIntervals) -> crate::stats::Interval| {
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
    let against = match (&summary.info.criterion[..], hm) {
        (_, Some(hm)) if hm.lo > 1.0 => "beats human",
        (_, Some(hm)) if hm.lo > summary.info.thresholds.opt_thresh => "matches human",
        (_, Some(hm)) if hm.hi <= summary.info.thresholds.opt_thresh => "loses to human",
        ("gso", None) if st.hm_speedup_patch_commit > summary.info.thresholds.opt_thresh => {
            "matches human (GSO's rule, on means)"
        }
        ("gso", None) => "loses to human (GSO's rule, on means)",
        _ => "undecided against human (the interval straddles the threshold)",
    };
    out.push_str(&format!(
        "patch vs human: {against}: HM(human/patch) {:.2}{} (threshold {})\n",
        st.hm_speedup_patch_commit,
        ci(|iv| iv.hm_speedup_patch_commit),
        summary.info.thresholds.opt_thresh
    ));
    let d = |d: Decision| match d {
        Decision::Yes => "yes",
        Decision::No => "no",
        Decision::Undecided => "undecided",
    };
    out.push_str(&format!(
        "verdict ({}): opt_base {}, opt_commit {}{}; {} measured rounds\n",
        summary.info.criterion,
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
