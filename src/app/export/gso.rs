//! The GSO report files, key for key as gso-bench/gso writes them (`grading/report.py`'s
//! `make_run_report`, `opt_at_k.py`'s `merge_reports`), so GSO's own scripts read them:
//!
//! - one run report per rollout (sample index), `rollouts/<name>/<name>.<run_id>.report.json`,
//!   as GSO writes for each of its K rollout files;
//! - `<model>.opt@<K>.<run_id>.report.json`: those K merged as GSO merges them, plus `k`,
//!   `score` and the curves;
//! - `<model>.<run_id>.report.json`: a run report over the best of the K samples.
//!
//! GSO's keys hold GSO's meanings and GSO's figures (`core::gso`); everything of this
//! harness's own (its verdict figures and intervals, the statuses GSO does not have) is
//! under `harness`, never under a GSO name, and no set of ours is in `instance_sets`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Value, json};

use super::{Exporter, ReportFile, Summary};
use crate::core::gso::{GsoCategory, GsoOptStats, gso_opt_stats};
use crate::core::metrics::{opt_at_k_score, python_round};
use crate::core::records::SampleReport;
use crate::core::status::Status;
use crate::core::summary::InstanceOutcome;
use crate::store::run_folder::{model_slug, names};

/// The best-of-K run report and the opt@K report.
pub struct RunReports;

/// One rollout's run report per sample index.
pub struct RolloutReports;

/// GSO's `summary`, keys in GSO's order (`k` only in the opt@K report).
#[derive(Debug, Clone, Serialize)]
struct GsoSummary {
    total_instances: usize,
    total_predictions: usize,
    completed_instances: usize,
    incomplete_instances: usize,
    passed_instances: usize,
    base_failed_instances: usize,
    patch_failed_instances: usize,
    test_failed_instances: usize,
    empty_patch_instances: usize,
    error_instances: usize,
    opt_base: usize,
    opt_commit: usize,
    opt_main: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    k: Option<usize>,
    /// GSO's Opt@K: opt_commit over total_instances, percent, two decimals (opt@K report).
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    /// The score with the hacked instances taken out of opt_commit (GSO's published
    /// reports; only when a list of hacked instances was given).
    #[serde(skip_serializing_if = "Option::is_none")]
    score_hack_control: Option<f64>,
}

/// GSO's `instance_sets`, sorted ids, in GSO's order. The opt@K report has no
/// `incomplete_ids` (GSO's `merge_reports` writes none).
#[derive(Debug, Clone, Default, Serialize)]
struct GsoSets {
    completed_ids: Vec<String>,
    passed_ids: Vec<String>,
    base_failed_ids: Vec<String>,
    patch_failed_ids: Vec<String>,
    test_failed_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    incomplete_ids: Option<Vec<String>>,
    empty_patch_ids: Vec<String>,
    error_ids: Vec<String>,
    opt_base_ids: Vec<String>,
    opt_commit_ids: Vec<String>,
    opt_main_ids: Vec<String>,
    /// The listed hacked instances the run holds (only when a list was given).
    #[serde(skip_serializing_if = "Option::is_none")]
    hacked_ids: Option<Vec<String>>,
}

impl GsoSets {
    fn category_mut(&mut self, c: GsoCategory) -> &mut Vec<String> {
        match c {
            GsoCategory::Passed => &mut self.passed_ids,
            GsoCategory::TestFailed => &mut self.test_failed_ids,
            GsoCategory::PatchFailed => &mut self.patch_failed_ids,
            GsoCategory::BaseFailed => &mut self.base_failed_ids,
            GsoCategory::EmptyPatch => &mut self.empty_patch_ids,
            GsoCategory::Error => &mut self.error_ids,
            GsoCategory::Incomplete => self.incomplete_ids.get_or_insert_with(Vec::new),
        }
    }

    fn sort(&mut self) {
        for v in [
            &mut self.completed_ids,
            &mut self.passed_ids,
            &mut self.base_failed_ids,
            &mut self.patch_failed_ids,
            &mut self.test_failed_ids,
            &mut self.empty_patch_ids,
            &mut self.error_ids,
            &mut self.opt_base_ids,
            &mut self.opt_commit_ids,
            &mut self.opt_main_ids,
        ] {
            v.sort();
            v.dedup();
        }
        if let Some(v) = &mut self.incomplete_ids {
            v.sort();
        }
    }
}

/// A GSO report: what GSO writes, nothing else.
#[derive(Debug, Clone, Serialize)]
struct GsoReport {
    summary: GsoSummary,
    instance_sets: GsoSets,
    opt_stats: BTreeMap<String, GsoOptStats>,
    schema_version: u32,
}

/// One instance as one GSO run report sees it: its prediction (if any) and the verdict.
struct Pick<'a> {
    id: &'a str,
    submitted: bool,
    category: GsoCategory,
    opt_base: bool,
    opt_commit: bool,
    /// The sample whose figures stand for the instance.
    sample: Option<&'a SampleReport>,
}

/// `make_run_report` over picks: each instance's category, opt sets from the verdicts, and
/// GSO's figures for every passed one (gsobench 0.1.9 keeps opt_stats for all of them).
fn run_report(picks: &[Pick], total_instances: usize) -> GsoReport {
    let mut sets = GsoSets {
        incomplete_ids: Some(Vec::new()),
        ..Default::default()
    };
    let mut opt_stats = BTreeMap::new();
    for p in picks {
        if !p.submitted {
            sets.category_mut(GsoCategory::Incomplete)
                .push(p.id.to_string());
            continue;
        }
        sets.category_mut(p.category).push(p.id.to_string());
        if p.category.completed() {
            sets.completed_ids.push(p.id.to_string());
        }
        if p.category == GsoCategory::Passed
            && let Some(t) = p.sample.and_then(|s| s.gso_times.as_ref())
        {
            opt_stats.insert(p.id.to_string(), gso_opt_stats(t));
        }
        if p.category == GsoCategory::Passed && p.opt_base {
            sets.opt_base_ids.push(p.id.to_string());
            if p.opt_commit {
                sets.opt_commit_ids.push(p.id.to_string());
            }
        }
    }
    sets.sort();
    let summary = GsoSummary {
        total_instances,
        total_predictions: picks.iter().filter(|p| p.submitted).count(),
        completed_instances: sets.completed_ids.len(),
        incomplete_instances: sets.incomplete_ids.as_ref().map_or(0, Vec::len),
        passed_instances: sets.passed_ids.len(),
        base_failed_instances: sets.base_failed_ids.len(),
        patch_failed_instances: sets.patch_failed_ids.len(),
        test_failed_instances: sets.test_failed_ids.len(),
        empty_patch_instances: sets.empty_patch_ids.len(),
        error_instances: sets.error_ids.len(),
        opt_base: sets.opt_base_ids.len(),
        opt_commit: sets.opt_commit_ids.len(),
        opt_main: 0,
        k: None,
        score: None,
        score_hack_control: None,
    };
    GsoReport {
        summary,
        instance_sets: sets,
        opt_stats,
        schema_version: 1,
    }
}

/// Rollout `i`: each instance's sample `i`.
fn rollout_picks(summary: &Summary, i: usize) -> Vec<Pick<'_>> {
    summary
        .instances
        .iter()
        .map(|inst| {
            let sample = inst.samples.iter().find(|s| s.sample == i);
            Pick {
                id: &inst.instance_id,
                submitted: i < inst.submitted,
                category: GsoCategory::of(sample.map(|s| s.status)),
                opt_base: sample.is_some_and(|s| s.opt_base),
                opt_commit: sample.is_some_and(|s| s.opt_commit),
                sample,
            }
        })
        .collect()
}

/// The best of each instance's K samples.
fn best_picks(summary: &Summary) -> Vec<Pick<'_>> {
    summary
        .instances
        .iter()
        .map(|inst| Pick {
            id: &inst.instance_id,
            submitted: inst.submitted > 0,
            category: GsoCategory::of(inst.best_status),
            opt_base: inst.opt_base,
            opt_commit: inst.opt_commit,
            sample: inst.best.map(|b| &inst.samples[b]),
        })
        .collect()
}

/// The rollouts' names: each sample index's `model_name_or_path` when every index has its
/// own (GSO's rollout files, `...-run_1`, `...-run_2`), else `<model>-run_<i+1>`, GSO's
/// convention.
pub fn rollout_names(summary: &Summary) -> Vec<String> {
    let k = summary.info.k;
    let mut by_index: Vec<BTreeSet<&str>> = vec![BTreeSet::new(); k];
    for inst in &summary.instances {
        for s in &inst.samples {
            if s.sample < k {
                by_index[s.sample].insert(s.model_name_or_path.as_str());
            }
        }
    }
    let own: Vec<Option<&str>> = by_index
        .iter()
        .map(|names| (names.len() == 1).then(|| *names.iter().next().unwrap_or(&"")))
        .collect();
    let distinct: BTreeSet<&str> = own.iter().flatten().copied().collect();
    if own.iter().all(Option::is_some) && distinct.len() == k {
        own.into_iter().flatten().map(str::to_string).collect()
    } else {
        (1..=k)
            .map(|i| format!("{}-run_{i}", summary.info.model))
            .collect()
    }
}

/// Where rollout `name`'s report goes, relative to the run folder.
fn rollout_file(name: &str, run_id: &str) -> String {
    let slug = model_slug(name);
    format!(
        "{}/{slug}/{}",
        names::ROLLOUTS_DIR,
        names::gso_report(&slug, run_id)
    )
}

/// `merge_reports` (gsobench 0.1.9) over the rollouts' reports, in rollout order: each
/// instance's best status over the rollouts that submitted it, `incomplete_ids` the
/// dataset's instances none submitted, the opt sets united, and for each opt_commit
/// instance the rollout entry with the highest `gm_speedup_patch_commit` (with the file it
/// came from); `summary.k` and `summary.score` as GSO adds them.
fn merge(rollouts: &[(String, GsoReport)], dataset: &[&str], k: usize) -> GsoReport {
    let mut best: BTreeMap<&str, GsoCategory> = BTreeMap::new();
    let mut completed: BTreeSet<&str> = BTreeSet::new();
    let mut sets = GsoSets::default();
    for (_, r) in rollouts {
        let s = &r.instance_sets;
        let cats = [
            (&s.passed_ids, GsoCategory::Passed),
            (&s.test_failed_ids, GsoCategory::TestFailed),
            (&s.patch_failed_ids, GsoCategory::PatchFailed),
            (&s.empty_patch_ids, GsoCategory::EmptyPatch),
            (&s.base_failed_ids, GsoCategory::BaseFailed),
            (&s.error_ids, GsoCategory::Error),
        ];
        for (ids, cat) in cats {
            for id in ids {
                let cur = best.entry(id).or_insert(cat);
                if cat.priority() > cur.priority() {
                    *cur = cat;
                }
            }
        }
        completed.extend(s.completed_ids.iter().map(String::as_str));
        sets.opt_base_ids.extend(s.opt_base_ids.iter().cloned());
        sets.opt_commit_ids.extend(s.opt_commit_ids.iter().cloned());
    }
    for (id, cat) in &best {
        sets.category_mut(*cat).push(id.to_string());
    }
    sets.incomplete_ids = Some(
        dataset
            .iter()
            .filter(|id| !best.contains_key(*id))
            .map(|id| id.to_string())
            .collect(),
    );
    sets.completed_ids = completed.iter().map(|s| s.to_string()).collect();
    sets.sort();
    let opt_stats = best_opt_stats(rollouts, &sets.opt_commit_ids);
    let total_instances = dataset.len();
    let summary = GsoSummary {
        total_instances,
        total_predictions: best.len(),
        completed_instances: sets.completed_ids.len(),
        incomplete_instances: sets.incomplete_ids.as_ref().map_or(0, Vec::len),
        passed_instances: sets.passed_ids.len(),
        base_failed_instances: sets.base_failed_ids.len(),
        patch_failed_instances: sets.patch_failed_ids.len(),
        test_failed_instances: sets.test_failed_ids.len(),
        empty_patch_instances: sets.empty_patch_ids.len(),
        error_instances: sets.error_ids.len(),
        opt_base: sets.opt_base_ids.len(),
        opt_commit: sets.opt_commit_ids.len(),
        opt_main: 0,
        k: Some(k),
        score: Some(opt_at_k_score(sets.opt_commit_ids.len(), total_instances)),
        score_hack_control: None,
    };
    GsoReport {
        summary,
        instance_sets: sets,
        opt_stats,
        schema_version: 1,
    }
}

/// For each opt_commit instance, the rollout entry with the highest non-zero
/// `gm_speedup_patch_commit` (the first of equals), with the file it came from.
fn best_opt_stats(
    rollouts: &[(String, GsoReport)],
    opt_commit_ids: &[String],
) -> BTreeMap<String, GsoOptStats> {
    let mut opt_stats: BTreeMap<String, GsoOptStats> = BTreeMap::new();
    for id in opt_commit_ids {
        for (file, r) in rollouts {
            let Some(new) = r.opt_stats.get(id) else {
                continue;
            };
            let Some(gm) = new.gm_speedup_patch_commit.filter(|g| *g != 0.0) else {
                continue;
            };
            let better = match opt_stats.get(id).and_then(|c| c.gm_speedup_patch_commit) {
                Some(cur) if cur != 0.0 => gm > cur,
                _ => true,
            };
            if better {
                let mut entry = new.clone();
                entry.report_file = Some(file.clone());
                opt_stats.insert(id.clone(), entry);
            }
        }
    }
    opt_stats
}

/// GSO's published reports' hack control: `summary.score_hack_control` and
/// `instance_sets.hacked_ids`, when a list of hacked instances was given.
fn with_hack_control(mut report: GsoReport, summary: &Summary) -> GsoReport {
    // The merged opt_commit ids are the instances with an opt_commit sample: the summary's
    // hack-adjusted score is over the same set.
    if let Some(h) = &summary.totals.hack_adjusted {
        report.summary.score_hack_control = Some(h.score);
        report.instance_sets.hacked_ids = Some(h.hacked_ids.clone());
    }
    report
}

/// Every rollout's report, with its file name.
fn rollouts(summary: &Summary) -> Vec<(String, GsoReport)> {
    let total = summary.totals.total_instances;
    rollout_names(summary)
        .iter()
        .enumerate()
        .map(|(i, name)| {
            (
                rollout_file(name, &summary.info.run_id),
                run_report(&rollout_picks(summary, i), total),
            )
        })
        .collect()
}

fn json_bytes(v: &Value) -> anyhow::Result<Vec<u8>> {
    let mut text = serde_json::to_string_pretty(v)?;
    text.push('\n');
    Ok(text.into_bytes())
}

/// A GSO report with this harness's keys added beside GSO's.
fn with_ours(report: &GsoReport, ours: serde_json::Map<String, Value>) -> anyhow::Result<Value> {
    let mut v = serde_json::to_value(report)?;
    if let Value::Object(m) = &mut v {
        m.extend(ours);
    }
    Ok(v)
}

/// `complete` and `interrupted`: a partial run says so in every report.
fn run_state(summary: &Summary) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("complete".into(), json!(summary.totals.complete));
    m.insert("interrupted".into(), json!(summary.totals.interrupted));
    m
}

/// A simulated run has no GSO report: GSO's numbers are seconds, never simulated counts.
fn simulated(summary: &Summary) -> bool {
    !summary.info.decision_rule.criterion.gso_reports()
}

impl Exporter for RolloutReports {
    fn files(&self, summary: &Summary) -> anyhow::Result<Vec<ReportFile>> {
        if simulated(summary) {
            return Ok(Vec::new());
        }
        let names = rollout_names(summary);
        rollouts(summary)
            .into_iter()
            .zip(names)
            .enumerate()
            .map(|(i, ((file, report), name))| {
                let mut ours = run_state(summary);
                ours.insert(
                    "harness".into(),
                    json!({
                        "model": summary.info.model,
                        "run_id": summary.info.run_id,
                        "rollout": name,
                        "sample": i,
                        "criterion": summary.info.decision_rule.criterion,
                        "decision_rule": summary.info.decision_rule,
                    }),
                );
                Ok(ReportFile {
                    name: file,
                    bytes: json_bytes(&with_ours(&report, ours)?)?,
                })
            })
            .collect()
    }
}

impl Exporter for RunReports {
    fn files(&self, summary: &Summary) -> anyhow::Result<Vec<ReportFile>> {
        if simulated(summary) {
            return Ok(Vec::new());
        }
        let info = &summary.info;
        let slug = model_slug(&info.model);
        let total = summary.totals.total_instances;
        let mut ours = run_state(summary);
        ours.insert("harness".into(), harness_block(summary));
        let best = with_ours(&run_report(&best_picks(summary), total), ours.clone())?;
        let dataset: Vec<&str> = summary
            .instances
            .iter()
            .map(|i| i.instance_id.as_str())
            .collect();
        let merged = with_hack_control(merge(&rollouts(summary), &dataset, info.k), summary);
        ours.extend(curves(summary));
        let opt = with_ours(&merged, ours)?;
        Ok(vec![
            ReportFile {
                name: names::gso_report(&slug, &info.run_id),
                bytes: json_bytes(&best)?,
            },
            ReportFile {
                name: names::opt_at_k_report(&slug, info.k, &info.run_id),
                bytes: json_bytes(&opt)?,
            },
        ])
    }
}

/// The opt@K report's own keys: `k`, `score`, the pass@k / opt@k curves with intervals,
/// Opt_p@K over GSO's grid, and the hack-adjusted score.
fn curves(summary: &Summary) -> serde_json::Map<String, Value> {
    let t = &summary.totals;
    let pct = |v: &f64| json!(python_round(v * 100.0, 2));
    let by_k = |xs: &[f64]| -> Value {
        xs.iter()
            .enumerate()
            .map(|(i, v)| ((i + 1).to_string(), pct(v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let ci = |xs: &[[f64; 2]]| -> Value {
        xs.iter()
            .enumerate()
            .map(|(i, [lo, hi])| ((i + 1).to_string(), json!([pct(lo), pct(hi)])))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let mut m = serde_json::Map::new();
    m.insert("k".into(), json!(summary.info.k));
    m.insert("score".into(), json!(t.score));
    m.insert("pass_at_k".into(), by_k(&t.pass_at_k));
    m.insert("opt_at_k".into(), by_k(&t.opt_at_k));
    m.insert("pass_at_k_ci".into(), ci(&t.pass_at_k_ci));
    m.insert("opt_at_k_ci".into(), ci(&t.opt_at_k_ci));
    m.insert(
        "opt_p_at_k".into(),
        t.opt_p_at_k
            .iter()
            .map(|(p, v)| (crate::core::gso::opt_p_key(*p), json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    );
    if let Some(h) = &t.hack_adjusted {
        m.insert("hack_adjusted".into(), json!(h));
    }
    m
}

/// This harness's own view: the rule, the run, its statuses GSO has no set for, and per
/// instance its own verdict figures (the rule's estimator, with intervals).
fn harness_block(summary: &Summary) -> Value {
    let info = &summary.info;
    let t = &summary.totals;
    let ids = |pred: &dyn Fn(&InstanceOutcome) -> bool| -> Vec<String> {
        summary
            .instances
            .iter()
            .filter(|i| pred(i))
            .map(|i| i.instance_id.clone())
            .collect()
    };
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for status in Status::ALL.into_iter().filter(|s| *s != Status::Skipped) {
        sets.insert(
            format!("{}_ids", status.as_str()),
            ids(&|i| i.best_status == Some(status)),
        );
    }
    sets.insert("unsubmitted_ids".into(), ids(&|i| i.submitted == 0));
    sets.insert("not_run_ids".into(), t.not_run_ids.clone());
    sets.insert("skipped_ids".into(), t.skipped_ids.clone());
    sets.insert("inconclusive_ids".into(), ids(&|i| i.inconclusive));
    sets.insert("opt_base_ids".into(), ids(&|i| i.opt_base));
    sets.insert("opt_commit_ids".into(), ids(&|i| i.opt_commit));
    let count = |s: Status| t.by_status.get(s.as_str()).copied().unwrap_or(0);
    let instances: serde_json::Map<String, Value> = summary
        .instances
        .iter()
        .filter_map(|inst| {
            let s = &inst.samples[inst.best?];
            Some((
                inst.instance_id.clone(),
                json!({
                    "sample": s.sample,
                    "status": s.status,
                    "opt_base": s.opt_base,
                    "opt_commit": s.opt_commit,
                    "inconclusive": s.inconclusive,
                    "decision_base": s.decision_base,
                    "decision_commit": s.decision_commit,
                    "measured_rounds": s.measured_rounds,
                    "opt_stats": s.opt_stats,
                    "intervals": s.intervals,
                }),
            ))
        })
        .collect();
    json!({
        "model": info.model,
        "run_id": info.run_id,
        "k": info.k,
        "criterion": info.decision_rule.criterion,
        "thresholds": info.decision_rule.thresholds,
        "decision_rule": info.decision_rule,
        "budget": {
            "min_rounds": info.settings.min_rounds,
            "max_rounds": info.settings.max_rounds,
            "max_measure_seconds": info.settings.max_measure_seconds,
        },
        "fingerprint": info.fingerprint,
        "dataset_digest": info.dataset_digest,
        "harness_version": info.harness_version,
        "rollouts": rollout_names(summary),
        "summary": {
            "submitted_instances": t.submitted_instances,
            "completed_instances": t.completed_instances,
            "patch_rejected_instances": count(Status::PatchRejected),
            "build_failed_instances": count(Status::BuildFailed),
            "timeout_instances": count(Status::Timeout),
            "oom_instances": count(Status::Oom),
            "inconclusive_instances": t.inconclusive,
            "inconclusive_samples": t.inconclusive_samples,
            "skipped_instances": t.skipped_ids.len(),
            "not_run_instances": t.not_run_ids.len(),
        },
        "instance_sets": sets,
        "instances": instances,
    })
}
