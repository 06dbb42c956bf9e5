//! `harness compare RUN_DIR...`: models or runs side by side on the instances they share.
//! Per task, who is faster from the saved timings (`core::compare`: the ratio of the two
//! speedups over their own bases, with an interval); a ranking by Opt@K on the shared
//! instances with the interval of each rank; pass@k and opt@k per run as its reports give
//! them; and what differs between the runs' settings and machines. Runs measured on
//! different machines or under different criteria are not ranked unless asked.

pub mod html;
mod text;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::core::compare::{
    CompareRule, RankFigure, TaskComparison, TaskEntry, Winner, compare_task, rank_by_opt,
};
use crate::core::stats::derive_seed;
use crate::core::summary::Summary;
use crate::core::timings::BenchLog;
use crate::store::run_folder::{RunDir, names};

/// What `harness compare` is asked.
pub struct CompareOptions {
    pub run_dirs: Vec<PathBuf>,
    pub html: Option<PathBuf>,
    pub json: bool,
    /// Compare runs from different machines or criteria anyway.
    pub allow_mixed: bool,
    /// The spread of a run's log speedup between runs of the same code
    /// (`core::compare::BETWEEN_RUN_SD` unless set).
    pub between_run_sd: f64,
    /// `-q`: no "wrote" line.
    pub quiet: bool,
}

/// One run as a contender.
#[derive(Debug, Clone, Serialize)]
pub struct Contender {
    pub label: String,
    pub model: String,
    pub run_id: String,
    pub run_dir: String,
    pub k: usize,
    pub criterion: String,
    pub machine: String,
    /// Opt@K over the run's own instances, as its reports give it.
    pub opt_at_k: f64,
    pub pass_at_k: Vec<f64>,
    pub opt_at_k_curve: Vec<f64>,
    pub complete: bool,
    /// Its place on the shared instances (None when the runs are not ranked).
    pub rank: Option<RankFigure>,
    /// Instances of the shared set on which it is opt_commit.
    pub shared_opt_commit: usize,
    /// What its agents spent over its own samples, when their rows say.
    pub agents: Option<crate::core::spend::SpendTotals>,
}

/// One task, every contender's outcome and every pair's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    pub instance_id: String,
    /// Per contender: best status and speedup over base of its representative sample.
    pub outcomes: Vec<Outcome>,
    pub pairs: Vec<PairResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub status: String,
    pub opt_commit: bool,
    pub speedup_over_base: Option<f64>,
    /// What its agent spent on this instance's samples, when their rows say.
    pub agents: Option<crate::core::spend::SpendTotals>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairResult {
    pub first: usize,
    pub second: usize,
    #[serde(flatten)]
    pub result: TaskComparison,
}

/// Wins, losses and ties of the first contender against the second over the shared tasks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub first: usize,
    pub second: usize,
    pub wins: usize,
    pub losses: usize,
    pub ties: usize,
    pub neither: usize,
}

/// A setting whose value differs between the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    pub field: String,
    pub values: Vec<String>,
}

/// Everything `compare` prints, writes as HTML, or gives as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub schema_version: u32,
    pub contenders: Vec<Contender>,
    pub shared_instances: Vec<String>,
    pub confidence: f64,
    /// The spread between runs each task's interval was widened by.
    pub between_run_sd: f64,
    pub tasks: Vec<TaskRow>,
    pub tallies: Vec<Tally>,
    pub differences: Vec<Difference>,
    pub notes: Vec<String>,
}

impl Comparison {
    /// Indices of the contenders, best rank first (unranked last).
    pub fn by_rank(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.contenders.len()).collect();
        order.sort_by_key(|&i| {
            self.contenders[i]
                .rank
                .as_ref()
                .map_or(usize::MAX, |r| r.rank)
        });
        order
    }
}

/// The comparison page of run folders that can be ranked against each other (the same
/// machine and criterion), with the default spread between runs.
pub fn html_page(run_dirs: &[PathBuf]) -> Result<String> {
    let comparison = compare_folders(run_dirs, false, crate::core::compare::BETWEEN_RUN_SD)?;
    Ok(html::page(&comparison))
}

pub fn command(o: CompareOptions) -> Result<i32> {
    let runs = expand(&o.run_dirs)?;
    let comparison = compare_folders(&runs, o.allow_mixed, o.between_run_sd)?;
    if let Some(path) = &o.html {
        crate::store::run_folder::write_atomic(path, html::page(&comparison).as_bytes())
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    if o.json {
        crate::outln!("{}", serde_json::to_string_pretty(&comparison)?);
    } else {
        crate::out!(
            "{}",
            crate::core::text::for_terminal_block(&text::render(&comparison))
        );
        if let Some(path) = o.html.as_ref().filter(|_| !o.quiet) {
            crate::outln!("wrote {}", path.display());
        }
    }
    Ok(0)
}

/// The comparison of run folders, read from disk.
pub fn compare_folders(
    runs: &[PathBuf],
    allow_mixed: bool,
    between_run_sd: f64,
) -> Result<Comparison> {
    if runs.len() < 2 {
        bail!(
            "compare needs at least two run folders (or a batch folder holding two); got {}",
            runs.len()
        );
    }
    let summaries = runs
        .iter()
        .map(|dir| {
            crate::store::run_folder::summarise(&RunDir { root: dir.clone() })
                .with_context(|| format!("{}: not a run folder that can be read", dir.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    compare(runs, &summaries, allow_mixed, between_run_sd)
}

/// Run folders from the arguments: a run folder as it is, a folder without run.json (a
/// batch, a fan-out) as the run folders under it, in name order.
fn expand(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for d in dirs {
        if d.join(names::RUN_JSON).is_file() {
            out.push(d.clone());
            continue;
        }
        let found = run_folders_under(d, 3);
        if found.is_empty() {
            bail!(
                "{}: neither a run folder (no {}) nor a folder holding run folders",
                d.display(),
                names::RUN_JSON
            );
        }
        out.extend(found);
    }
    Ok(out)
}

fn run_folders_under(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut subs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subs.sort();
    let mut out = Vec::new();
    for s in subs {
        if s.join(names::RUN_JSON).is_file() {
            out.push(s);
        } else if depth > 1 {
            out.extend(run_folders_under(&s, depth - 1));
        }
    }
    out
}

/// Labels that tell the runs apart: the model; with the run id when a model appears twice;
/// with the run's folder and start time when the run id does too (two runs under one id in
/// different results folders).
fn labels(runs: &[PathBuf], summaries: &[Summary]) -> Vec<String> {
    let folder = |dir: &PathBuf| {
        dir.parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string())
    };
    let labels = summaries
        .iter()
        .zip(runs)
        .map(|(s, dir)| {
            let same_model = summaries
                .iter()
                .filter(|o| o.info.model == s.info.model)
                .count();
            let same_id = summaries
                .iter()
                .filter(|o| o.info.model == s.info.model && o.info.run_id == s.info.run_id)
                .count();
            if same_id > 1 {
                format!(
                    "{} ({} in {}, started {})",
                    s.info.model,
                    s.info.run_id,
                    folder(dir),
                    s.info.started_at
                )
            } else if same_model > 1 {
                format!("{} ({})", s.info.model, s.info.run_id)
            } else {
                s.info.model.clone()
            }
        })
        .collect::<Vec<String>>();
    // A copied run folder (or one folder given twice) has all of the above in common: its
    // path, then its place on the command line, tell it apart.
    let mut labels = labels;
    for pass in 0..2 {
        let repeated: Vec<bool> = labels
            .iter()
            .map(|l| labels.iter().filter(|o| *o == l).count() > 1)
            .collect();
        for (i, label) in labels.iter_mut().enumerate() {
            if repeated[i] {
                if pass == 0 {
                    label.push_str(&format!(" at {}", runs[i].display()));
                } else {
                    label.push_str(&format!(" (argument {})", i + 1));
                }
            }
        }
    }
    labels
}

/// The settings that differ between the runs, each with every run's value.
fn differences(summaries: &[Summary]) -> Vec<Difference> {
    type Field = (&'static str, fn(&Summary) -> String);
    let fields: [Field; 11] = [
        ("machine", |s| {
            format!(
                "{} ({} cores) {}",
                s.info.fingerprint.cpu_model, s.info.fingerprint.cores, s.info.fingerprint_id
            )
        }),
        ("criterion", |s| {
            s.info.decision_rule.criterion.as_str().to_string()
        }),
        ("min_speedup", |s| {
            s.info.decision_rule.thresholds.min_speedup.to_string()
        }),
        ("opt_thresh", |s| {
            s.info.decision_rule.thresholds.opt_thresh.to_string()
        }),
        ("estimator", |s| {
            format!("{:?}", s.info.decision_rule.estimator)
        }),
        ("confidence", |s| {
            s.info.decision_rule.confidence.to_string()
        }),
        ("k", |s| s.info.k.to_string()),
        ("dataset", |s| s.info.dataset_digest.clone()),
        ("harness", |s| s.info.harness_version.clone()),
        ("docker", |s| s.info.fingerprint.docker_version.clone()),
        ("measurement settings", |s| {
            serde_json::to_string(&s.info.settings).unwrap_or_default()
        }),
    ];
    fields
        .iter()
        .filter_map(|(field, get)| {
            let values: Vec<String> = summaries.iter().map(get).collect();
            values.iter().any(|v| *v != values[0]).then(|| Difference {
                field: field.to_string(),
                values,
            })
        })
        .collect()
}

/// The comparison of the runs (already summarised, in argument order).
pub fn compare(
    runs: &[PathBuf],
    summaries: &[Summary],
    allow_mixed: bool,
    between_run_sd: f64,
) -> Result<Comparison> {
    let labels = labels(runs, summaries);
    let differences = differences(summaries);
    let mut notes = Vec::new();
    let mixed: Vec<&Difference> = differences
        .iter()
        .filter(|d| d.field == "machine" || d.field == "criterion")
        .collect();
    if !mixed.is_empty() {
        let why: Vec<String> = mixed
            .iter()
            .map(|d| {
                let each: Vec<String> = labels
                    .iter()
                    .zip(&d.values)
                    .map(|(l, v)| format!("{l}: {v}"))
                    .collect();
                format!("{} differs ({})", d.field, each.join("; "))
            })
            .collect();
        if !allow_mixed {
            bail!(
                "these runs cannot be ranked against each other: {}. Timings from different machines, or verdicts under different criteria, do not compare; pass --allow-mixed to compare them anyway",
                why.join("; ")
            );
        }
        notes.push(format!(
            "compared although {} (--allow-mixed): read the task comparisons with care",
            why.join("; ")
        ));
    }
    let shared: Vec<String> = summaries[0]
        .instances
        .iter()
        .map(|i| i.instance_id.clone())
        .filter(|id| {
            summaries
                .iter()
                .all(|s| s.instances.iter().any(|i| &i.instance_id == id))
        })
        .collect();
    if shared.is_empty() {
        bail!("the runs share no instance: nothing to compare");
    }
    for (s, l) in summaries.iter().zip(&labels) {
        let own = s.instances.len();
        if own > shared.len() {
            notes.push(format!(
                "{l}: {} of its {own} instances are not in every run and are left out of the task comparisons and the ranking",
                own - shared.len()
            ));
        }
        if !s.totals.complete {
            notes.push(format!(
                "{l}: the run is partial; its missing samples count as failures"
            ));
        }
    }
    let rule = &summaries[0].info.decision_rule;
    let tasks: Vec<TaskRow> = shared
        .iter()
        .map(|id| task_row(runs, summaries, id, between_run_sd))
        .collect();
    let opt: Vec<Vec<bool>> = (0..summaries.len())
        .map(|c| tasks.iter().map(|t| t.outcomes[c].opt_commit).collect())
        .collect();
    let ranks = rank_by_opt(&opt, rule.confidence, rule.resamples, rule.seed);
    let contenders = summaries
        .iter()
        .zip(&labels)
        .zip(runs)
        .zip(ranks)
        .enumerate()
        .map(|(c, (((s, label), dir), rank))| Contender {
            label: label.clone(),
            model: s.info.model.clone(),
            run_id: s.info.run_id.clone(),
            run_dir: dir.display().to_string(),
            k: s.info.k,
            criterion: s.info.decision_rule.criterion.as_str().to_string(),
            machine: s.info.fingerprint_id.clone(),
            opt_at_k: s.totals.score,
            pass_at_k: s.totals.pass_at_k.clone(),
            opt_at_k_curve: s.totals.opt_at_k.clone(),
            complete: s.totals.complete,
            agents: s.totals.agents.clone(),
            shared_opt_commit: opt[c].iter().filter(|b| **b).count(),
            rank: Some(rank),
        })
        .collect();
    Ok(Comparison {
        schema_version: 1,
        contenders,
        shared_instances: shared,
        confidence: rule.confidence,
        between_run_sd,
        tallies: tallies(summaries.len(), &tasks),
        tasks,
        differences,
        notes,
    })
}

fn tallies(n: usize, tasks: &[TaskRow]) -> Vec<Tally> {
    let mut out = Vec::new();
    for first in 0..n {
        for second in first + 1..n {
            let mut t = Tally {
                first,
                second,
                ..Tally::default()
            };
            for p in tasks
                .iter()
                .flat_map(|r| &r.pairs)
                .filter(|p| p.first == first && p.second == second)
            {
                match p.result.winner {
                    Winner::First => t.wins += 1,
                    Winner::Second => t.losses += 1,
                    Winner::Tie => t.ties += 1,
                    Winner::Neither => t.neither += 1,
                }
            }
            out.push(t);
        }
    }
    out
}

/// Each contender's representative sample on one task, and every pair compared.
fn task_row(runs: &[PathBuf], summaries: &[Summary], id: &str, between_run_sd: f64) -> TaskRow {
    let mut entries = Vec::new();
    let mut outcomes = Vec::new();
    let mut benches = Vec::new();
    for (dir, s) in runs.iter().zip(summaries) {
        let inst = s.instances.iter().find(|i| i.instance_id == id);
        let best = inst.and_then(|i| i.best.and_then(|b| i.samples.get(b)));
        let log: Option<BenchLog> = best.and_then(|b| {
            let run = RunDir { root: dir.clone() };
            let path = run
                .sample_dir(&s.info.model, id, b.sample)
                .join(names::BENCH_JSON);
            serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
        });
        let rounds = match (best, &log) {
            (Some(b), Some(log)) => {
                let label = log
                    .sample_variant
                    .clone()
                    .unwrap_or_else(|| format!("s{}", b.sample));
                if benches.is_empty() {
                    benches = log
                        .benches
                        .iter()
                        .map(|b| (b.name.clone(), b.better))
                        .collect();
                }
                crate::core::rounds::paired_rounds(log, "base", &label)
                    .into_iter()
                    .map(|(_, p)| p)
                    .collect()
            }
            _ => Vec::new(),
        };
        let passed = best.is_some_and(|b| b.passed());
        outcomes.push(Outcome {
            status: inst
                .and_then(|i| i.best_status)
                .map(|st| st.as_str().to_string())
                .unwrap_or_else(|| "not submitted".into()),
            opt_commit: inst.is_some_and(|i| i.opt_commit),
            speedup_over_base: best
                .and_then(|b| b.opt_stats.as_ref())
                .map(|st| st.gm_speedup_patch_base),
            agents: inst.and_then(|i| {
                crate::core::spend::SpendTotals::of(
                    i.samples.iter().filter_map(|s| s.agent.as_ref()),
                )
            }),
        });
        entries.push(TaskEntry {
            passed,
            opt_commit: inst.is_some_and(|i| i.opt_commit),
            rounds,
        });
    }
    let rule = &summaries[0].info.decision_rule;
    let compare_rule = CompareRule {
        estimator: rule.figure(),
        confidence: rule.confidence,
        resamples: rule.resamples,
        between_run_sd,
    };
    let mut pairs = Vec::new();
    for first in 0..entries.len() {
        for second in first + 1..entries.len() {
            let seed = derive_seed(
                rule.seed,
                &["compare", id, &first.to_string(), &second.to_string()],
            );
            let result = compare_task(
                &entries[first],
                &entries[second],
                &benches,
                &compare_rule,
                seed,
            );
            pairs.push(PairResult {
                first,
                second,
                result,
            });
        }
    }
    TaskRow {
        instance_id: id.to_string(),
        outcomes,
        pairs,
    }
}
