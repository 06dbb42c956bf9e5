//! What a run folder adds up to: each instance's first K samples, the best of them, and the
//! run's totals (Opt@K, pass@k and opt@k with their intervals), computed from the saved
//! files alone, so every report and `harness report` agree with the run.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::{opt_at_k_score, pass_at_k_curve, pass_at_k_rows};
use crate::records::{RunInfo, SampleReport};
use crate::status::Status;
use crate::timings::BenchLog;

/// One instance's first K samples and what they add up to.
#[derive(Debug, Clone)]
pub struct InstanceOutcome {
    pub instance_id: String,
    /// Saved results of its first K samples, by sample index.
    pub samples: Vec<SampleReport>,
    /// How many samples were submitted among the first K.
    pub submitted: usize,
    pub best_status: Option<Status>,
    pub opt_base: bool,
    pub opt_commit: bool,
    /// No sample is opt_commit and at least one was still undecided at its budget.
    pub inconclusive: bool,
    /// Samples of the predictions with no usable result yet (not run, or `error`).
    pub not_run: usize,
    /// Index into `samples` of the sample whose speedups represent the instance.
    pub best: Option<usize>,
}

/// Aggregates over a run.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub total_instances: usize,
    pub submitted_instances: usize,
    pub completed_instances: usize,
    /// Best-of-K status → number of instances.
    pub by_status: BTreeMap<String, usize>,
    pub opt_base: usize,
    pub opt_commit: usize,
    /// Whether every sample of the predictions has a result that is not `error` and the run
    /// was not interrupted. A partial run's scores count what is missing as failures.
    pub complete: bool,
    /// Instances with a sample not run (or ended `error`).
    pub not_run_ids: Vec<String>,
    /// The signal that interrupted the run, if one did.
    pub interrupted: Option<String>,
    /// Instances not attempted (`--skip-gpu` on a host that cannot run GPU tasks): in no
    /// denominator, listed here.
    pub skipped_ids: Vec<String>,
    /// Instances counted as not optimised only because a verdict stayed undecided.
    pub inconclusive: usize,
    /// Samples whose verdict stayed undecided.
    pub inconclusive_samples: usize,
    /// Opt@K, percent, two decimals.
    pub score: f64,
    /// pass@k for k = 1..K (fractions).
    pub pass_at_k: Vec<f64>,
    /// opt@k for k = 1..K (fractions).
    pub opt_at_k: Vec<f64>,
    /// 95% bootstrap intervals over instances of pass@k and opt@k, as [lo, hi] fractions.
    pub pass_at_k_ci: Vec<[f64; 2]>,
    pub opt_at_k_ci: Vec<[f64; 2]>,
    /// Opt_p@K over GSO's grid (`core::gso::opt_p_grid`): (p, percent, two decimals).
    pub opt_p_at_k: Vec<(f64, f64)>,
    /// With a list of hacked instances: the score counting them as not optimised.
    pub hack_adjusted: Option<HackAdjusted>,
    /// What the agents spent over the first K samples, when their rows say.
    pub agents: Option<crate::spend::SpendTotals>,
}

/// Opt@K with the instances judged reward hacks counted as not optimised.
#[derive(Debug, Clone, Serialize)]
pub struct HackAdjusted {
    /// Where the list came from (as given).
    pub source: String,
    /// Listed instances this run holds.
    pub hacked_ids: Vec<String>,
    /// Listed instances the run does not hold (a list for another dataset or model?).
    pub unknown_ids: Vec<String>,
    /// opt_commit instances taken out.
    pub removed_ids: Vec<String>,
    /// Opt@K, percent, two decimals.
    pub score: f64,
}

#[derive(Debug, Clone)]
pub struct Summary {
    pub info: RunInfo,
    pub instances: Vec<InstanceOutcome>,
    pub totals: Totals,
}

/// Where a run's saved samples are read from: the run folder (`harness_store::run_folder`
/// reads it from disk).
pub trait SavedSamples {
    /// A sample's saved report, when it has one that can be read.
    fn sample(&self, model: &str, instance_id: &str, sample: usize) -> Option<SampleReport>;
    /// A sample's saved bench log and the variant that stands for it there (its own, or the
    /// one whose runs it shares), when the log holds that variant.
    fn bench_log(&self, model: &str, s: &SampleReport) -> Option<(BenchLog, String)>;
}

/// Everything the reports show, from a run's info and its saved samples.
pub fn summarise(info: RunInfo, run: &impl SavedSamples) -> Summary {
    let instances: Vec<InstanceOutcome> = denominator(&info)
        .iter()
        .map(|id| instance(run, &info, id))
        .collect();
    let (instances, totals) = totals(&info, instances);
    Summary {
        info,
        instances,
        totals,
    }
}

/// The instances Opt@K is over: the selected ones; under `--criterion gso` the whole dataset
/// (GSO's Opt@K is over its dataset whatever `--instance_ids` ran: the others count as
/// unsubmitted), except in a partition, whose merge makes the whole run.
fn denominator(info: &RunInfo) -> Vec<String> {
    let mut ids = info.instance_ids.clone();
    if info.decision_rule.criterion.opt_at_k_over_dataset() && info.partition.is_none() {
        let selected: std::collections::BTreeSet<&String> = info.instance_ids.iter().collect();
        let others: Vec<String> = info
            .dataset_instance_ids
            .iter()
            .filter(|id| !selected.contains(id))
            .cloned()
            .collect();
        ids.extend(others);
    }
    ids
}

/// One instance's saved samples (only those of the current predictions, each with its own
/// result key) and what they add up to.
fn instance(run: &impl SavedSamples, info: &RunInfo, id: &String) -> InstanceOutcome {
    let k = info.k;
    // Only the samples of the current predictions count, each with its own result key.
    let (mut samples, submitted): (Vec<SampleReport>, usize) = match &info.samples {
        Some(expected) => {
            let expected = expected.get(id).map(Vec::as_slice).unwrap_or(&[]);
            let found = expected
                .iter()
                .filter(|e| e.sample < k)
                .filter_map(|e| {
                    run.sample(&info.model, id, e.sample)
                        .filter(|r| r.result_key == e.result_key)
                })
                .collect();
            (found, expected.iter().filter(|e| e.sample < k).count())
        }
        None => {
            let found: Vec<SampleReport> = (0..k)
                .filter_map(|i| run.sample(&info.model, id, i))
                .collect();
            let n = found.len();
            (found, n)
        }
    };
    samples.sort_by_key(|s| s.sample);
    for s in samples.iter_mut() {
        fill_gso_times(run, info, s);
    }
    let not_run =
        submitted - samples.len() + samples.iter().filter(|s| s.status == Status::Error).count();
    let best_status = samples.iter().map(|s| s.status).min_by_key(|s| s.rank());
    let opt_base = samples.iter().any(|s| s.opt_base);
    let opt_commit = samples.iter().any(|s| s.opt_commit);
    let inconclusive = !opt_commit && samples.iter().any(|s| s.inconclusive);
    // The representative sample: the best opt_commit one by HM over human, else the
    // best passed one by GM over base (ties: lowest index).
    let best = samples
        .iter()
        .enumerate()
        .filter(|(_, s)| s.opt_stats.is_some())
        .max_by(|(ia, a), (ib, b)| {
            let key = |s: &SampleReport| {
                let st = s.opt_stats.as_ref();
                (
                    s.opt_commit,
                    s.opt_base,
                    st.map(|x| x.hm_speedup_patch_commit).unwrap_or(0.0),
                )
            };
            let (ca, ba, ha) = key(a);
            let (cb, bb, hb) = key(b);
            (ca, ba)
                .cmp(&(cb, bb))
                .then(ha.total_cmp(&hb))
                .then(ib.cmp(ia))
        })
        .map(|(i, _)| i);
    InstanceOutcome {
        instance_id: id.clone(),
        samples,
        submitted,
        best_status,
        opt_base,
        opt_commit,
        inconclusive,
        not_run,
        best,
    }
}

/// Run folders of older builds saved no GSO means: they are taken from the sample's
/// bench.json, as a run now would.
fn fill_gso_times(run: &impl SavedSamples, info: &RunInfo, s: &mut SampleReport) {
    if !s.passed() || s.gso_times.is_some() {
        return;
    }
    if let Some((log, label)) = run.bench_log(&info.model, s) {
        s.gso_times = crate::gso::gso_times(&log, &label);
    }
}

/// The run's totals; instances skipped whole are taken out of the list.
fn totals(info: &RunInfo, instances: Vec<InstanceOutcome>) -> (Vec<InstanceOutcome>, Totals) {
    let k = info.k;
    // Instances skipped whole (GPU tasks under --skip-gpu) are reported apart and are not
    // in any denominator: they were not attempted, for a reason that is not the model's.
    let (skipped, instances): (Vec<InstanceOutcome>, Vec<InstanceOutcome>) =
        instances.into_iter().partition(|i| {
            !i.samples.is_empty()
                && i.samples.len() == i.submitted
                && i.samples.iter().all(|s| s.status == Status::Skipped)
        });
    let skipped_ids: Vec<String> = skipped.into_iter().map(|i| i.instance_id).collect();
    let mut by_status: BTreeMap<String, usize> = Status::ALL
        .iter()
        .filter(|s| **s != Status::Skipped)
        .map(|s| (s.as_str().to_string(), 0))
        .collect();
    for inst in &instances {
        if let Some(s) = inst.best_status {
            *by_status.entry(s.as_str().to_string()).or_default() += 1;
        }
    }
    let pass_counts: Vec<(u64, u64)> = instances
        .iter()
        .map(|i| {
            (
                k as u64,
                i.samples.iter().filter(|s| s.passed()).count() as u64,
            )
        })
        .collect();
    let opt_counts: Vec<(u64, u64)> = instances
        .iter()
        .map(|i| {
            (
                k as u64,
                i.samples.iter().filter(|s| s.opt_commit).count() as u64,
            )
        })
        .collect();
    let opt_commit = instances.iter().filter(|i| i.opt_commit).count();
    let rule = &info.decision_rule;
    let curve_ci = |counts: &[(u64, u64)], tag: &str| -> Vec<[f64; 2]> {
        crate::stats::mean_intervals(
            &pass_at_k_rows(counts, k as u64),
            rule.confidence,
            rule.resamples,
            crate::stats::derive_seed(rule.seed, &[tag]),
        )
        .iter()
        .map(|iv| [iv.lo, iv.hi])
        .collect()
    };
    let not_run_ids: Vec<String> = instances
        .iter()
        .filter(|i| i.not_run > 0)
        .map(|i| i.instance_id.clone())
        .collect();
    let totals = Totals {
        skipped_ids,
        // A run folder whose run.json has no end is a run still going, or one killed
        // outright (kill -9): never complete, whatever its samples say.
        complete: not_run_ids.is_empty()
            && info.interrupted.is_none()
            && info.finished_at.is_some(),
        not_run_ids,
        interrupted: info.interrupted.clone(),
        total_instances: instances.len(),
        submitted_instances: instances.iter().filter(|i| i.submitted > 0).count(),
        completed_instances: instances
            .iter()
            .filter(|i| i.samples.iter().any(|s| s.status != Status::Error))
            .count(),
        by_status,
        opt_base: instances.iter().filter(|i| i.opt_base).count(),
        opt_commit,
        inconclusive: instances.iter().filter(|i| i.inconclusive).count(),
        inconclusive_samples: instances
            .iter()
            .map(|i| i.samples.iter().filter(|s| s.inconclusive).count())
            .sum(),
        agents: crate::spend::SpendTotals::of(
            instances
                .iter()
                .flat_map(|i| &i.samples)
                .filter_map(|s| s.agent.as_ref()),
        ),
        score: opt_at_k_score(opt_commit, instances.len()),
        pass_at_k: pass_at_k_curve(&pass_counts, k as u64),
        opt_at_k: pass_at_k_curve(&opt_counts, k as u64),
        pass_at_k_ci: curve_ci(&pass_counts, "pass@k"),
        opt_at_k_ci: curve_ci(&opt_counts, "opt@k"),
        opt_p_at_k: crate::gso::opt_p_grid()
            .into_iter()
            .map(|p| {
                let n = instances
                    .iter()
                    .filter(|i| {
                        // p = 0 is GSO's "no threshold" (its Opt_p reader counts every
                        // passed instance there), not opt_base@K.
                        i.samples.iter().any(|s| {
                            if p == 0.0 {
                                s.passed()
                            } else {
                                crate::verdict::opt_commit_at(s, rule, p)
                            }
                        })
                    })
                    .count();
                (p, opt_at_k_score(n, instances.len()))
            })
            .collect(),
        hack_adjusted: info.hacked.as_ref().map(|h| hack_adjusted(h, &instances)),
    };
    (instances, totals)
}

fn hack_adjusted(h: &crate::gso::HackedIds, instances: &[InstanceOutcome]) -> HackAdjusted {
    let held: std::collections::BTreeSet<&str> =
        instances.iter().map(|i| i.instance_id.as_str()).collect();
    let (hacked_ids, unknown_ids): (Vec<String>, Vec<String>) = h
        .ids
        .iter()
        .cloned()
        .partition(|id| held.contains(id.as_str()));
    let removed_ids: Vec<String> = instances
        .iter()
        .filter(|i| i.opt_commit && hacked_ids.contains(&i.instance_id))
        .map(|i| i.instance_id.clone())
        .collect();
    let opt = instances.iter().filter(|i| i.opt_commit).count() - removed_ids.len();
    HackAdjusted {
        source: h.source.clone(),
        hacked_ids,
        unknown_ids,
        removed_ids,
        score: opt_at_k_score(opt, instances.len()),
    }
}

/// Samples measured on a machine (or harness build) other than the run's, as
/// "instance/sample (fingerprint)". Reports refuse to mix them silently. In a merged run,
/// the partitions' machines (which `harness merge` checked are alike) are the run's.
pub fn mixed_fingerprints(summary: &Summary) -> Vec<String> {
    let info = &summary.info;
    summary
        .instances
        .iter()
        .flat_map(|i| i.samples.iter())
        .filter(|s| {
            s.fingerprint_id != info.fingerprint_id
                && !info
                    .merged_from
                    .iter()
                    .any(|p| p.fingerprint_id == s.fingerprint_id)
        })
        .map(|s| format!("{}/{} ({})", s.instance_id, s.sample, s.fingerprint_id))
        .collect()
}
