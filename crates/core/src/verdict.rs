//! From a task's timings to a sample's verdict: which rounds count, the speedups, their
//! intervals, and the decision under the chosen criterion.

use serde::{Deserialize, Serialize};

use crate::criterion::DecidedBy;
use crate::metrics::{
    BenchMeans, BenchPair, OptStats, Thresholds, gso_verdict, opt_stats_from_pairs,
};
use crate::rounds::{common_rounds, paired_rounds};
use crate::rule::DecisionRule;
use crate::stats::{
    Aggregate, Decision, Interval, RatioInterval, RoundPair, SpeedupIntervals, decide, derive_seed,
    ratio_interval,
};
use crate::task::Better;
use crate::timings::BenchLog;

/// A sample's outcome on its measured rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// Rounds in which base and the sample both have valid figures.
    pub rounds_with_base: Vec<u32>,
    /// Rounds in which human and the sample both have valid figures.
    pub rounds_with_human: Vec<u32>,
    pub bench_means: Vec<BenchMeans>,
    pub stats: Option<OptStats>,
    pub intervals: Option<SpeedupIntervals>,
    pub opt_base: Decision,
    pub opt_commit: Decision,
    /// GSO's per-test means over the rounds base, human and the sample all ran (the
    /// GSO-named fields of the reports), under any criterion.
    pub gso_times: Option<crate::gso::GsoTimes>,
}

impl Judgement {
    pub fn decided(&self) -> bool {
        self.opt_base != Decision::Undecided && self.opt_commit != Decision::Undecided
    }

    /// Rounds that count for the verdict: the fewer of the two pairings.
    pub fn rounds(&self) -> u32 {
        self.rounds_with_base
            .len()
            .min(self.rounds_with_human.len()) as u32
    }
}

/// Per bench, the figure of the reference and the patch over the paired rounds, under the
/// estimator (means under gso).
fn located(
    pairs: &[(u32, RoundPair)],
    benches: &[(String, Better)],
    est: crate::estimator::Estimator,
) -> Vec<BenchPair> {
    benches
        .iter()
        .enumerate()
        .map(|(i, (name, better))| {
            let mut r: Vec<f64> = pairs.iter().map(|(_, p)| p.reference[i]).collect();
            let mut x: Vec<f64> = pairs.iter().map(|(_, p)| p.patch[i]).collect();
            BenchPair {
                bench: name.clone(),
                better: *better,
                reference: crate::stats::location(&mut r, est, *better),
                patch: crate::stats::location(&mut x, est, *better),
            }
        })
        .collect()
}

/// Whether the variants of this log ran in more than one container each.
pub fn replicated(log: &BenchLog) -> bool {
    log.runs.iter().any(|r| r.replica > 0)
}

/// Every measured variant's per-container figures over `rounds` (the rounds a comparison
/// pairs), as log costs: what the between-container spread is pooled from.
fn replica_figures(
    log: &BenchLog,
    rounds: &std::collections::BTreeSet<u32>,
    benches: &[(String, Better)],
    est: crate::estimator::Estimator,
) -> crate::replicated::ReplicaFigures {
    let mut figs = crate::replicated::ReplicaFigures::default();
    for variant in &log.variants {
        let mut by_replica: std::collections::BTreeMap<u32, Vec<Vec<f64>>> = Default::default();
        for r in log
            .runs
            .iter()
            .filter(|r| &r.variant == variant && r.counts() && rounds.contains(&r.round))
        {
            let Some(b) = benches.iter().position(|(n, _)| *n == r.bench) else {
                continue;
            };
            let slot = by_replica
                .entry(r.replica)
                .or_insert_with(|| vec![Vec::new(); benches.len()]);
            if let Some(v) = r.value {
                slot[b].push(v);
            }
        }
        let replicas: Vec<Vec<f64>> = by_replica
            .into_values()
            .filter(|per_bench| per_bench.iter().all(|xs| !xs.is_empty()))
            .map(|mut per_bench| {
                per_bench
                    .iter_mut()
                    .zip(benches)
                    .map(|(xs, (_, better))| {
                        let v = crate::stats::location(xs, est, *better);
                        match better {
                            Better::Lower => v.ln(),
                            Better::Higher => -v.ln(),
                        }
                    })
                    .collect()
            })
            .collect();
        if !replicas.is_empty() {
            figs.log_costs.insert(variant.clone(), replicas);
        }
    }
    figs
}

/// Per bench, the replica-averaged (geometric mean over containers) figures of the
/// reference and the patch.
fn replica_pairs(
    figs: &crate::replicated::ReplicaFigures,
    reference: &str,
    patch: &str,
    benches: &[(String, Better)],
) -> Vec<BenchPair> {
    let avg = |v: &str, b: usize| -> Option<f64> {
        let reps = figs.log_costs.get(v)?;
        Some(reps.iter().map(|r| r[b]).sum::<f64>() / reps.len() as f64)
    };
    let mut out = Vec::new();
    for (b, (name, better)) in benches.iter().enumerate() {
        let (Some(r), Some(x)) = (avg(reference, b), avg(patch, b)) else {
            return Vec::new();
        };
        let value = |log_cost: f64| match better {
            Better::Lower => log_cost.exp(),
            Better::Higher => (-log_cost).exp(),
        };
        out.push(BenchPair {
            bench: name.clone(),
            better: *better,
            reference: value(r),
            patch: value(x),
        });
    }
    out
}

/// The verdict fields of a sample's `report.json`, from its judgement (`None`: it was not
/// measured, or did not pass).
pub fn apply_to(
    report: &mut crate::records::SampleReport,
    j: Option<&Judgement>,
    rule: &DecisionRule,
) {
    let passed = report.status == crate::status::Status::Passed;
    let j = j.filter(|_| passed);
    let (base, commit) = j
        .map(|j| (j.opt_base, j.opt_commit))
        .unwrap_or((Decision::No, Decision::No));
    report.criterion = rule.criterion.as_str().to_string();
    report.decision_base = base;
    report.decision_commit = commit;
    report.opt_base = base == Decision::Yes;
    report.opt_commit = commit == Decision::Yes;
    report.inconclusive = passed && (base == Decision::Undecided || commit == Decision::Undecided);
    report.opt_stats = j.and_then(|j| j.stats.clone());
    report.intervals = j.and_then(|j| j.intervals.clone());
    report.bench_means = j.map(|j| j.bench_means.clone()).unwrap_or_default();
    report.measured_rounds = j.map(|j| j.rounds()).unwrap_or(0);
    report.gso_times = j.and_then(|j| j.gso_times.clone());
}

/// The verdict of `variant` from what `log` holds. Under `gso` the decision is GSO's rule
/// on the means (always decided); under `strict` the same thresholds must hold for the
/// whole confidence interval.
pub fn judge(log: &BenchLog, variant: &str, rule: &DecisionRule) -> Judgement {
    // An interval pairs each comparison on its own rounds; means compare the rounds both
    // references share.
    let decided_by = rule.criterion.decided_by();
    let (with_base, with_human) = match decided_by {
        DecidedBy::Interval => (
            paired_rounds(log, "base", variant),
            paired_rounds(log, "human", variant),
        ),
        DecidedBy::Means => common_rounds(log, variant),
    };
    let benches: Vec<(String, Better)> = log
        .benches
        .iter()
        .map(|b| (b.name.clone(), b.better))
        .collect();
    let est = rule.figure();
    let replicas = decided_by == DecidedBy::Interval && replicated(log);
    let source = log.runs_of(variant).to_string();
    let round_set = |pairs: &[(u32, RoundPair)]| -> std::collections::BTreeSet<u32> {
        pairs.iter().map(|(r, _)| *r).collect()
    };
    let figs_base = replicas.then(|| replica_figures(log, &round_set(&with_base), &benches, est));
    let figs_human = replicas.then(|| replica_figures(log, &round_set(&with_human), &benches, est));
    let (vs_base, vs_human) = if with_base.is_empty() || with_human.is_empty() {
        (Vec::new(), Vec::new())
    } else if let (Some(fb), Some(fh)) = (&figs_base, &figs_human) {
        (
            replica_pairs(fb, "base", &source, &benches),
            replica_pairs(fh, "human", &source, &benches),
        )
    } else {
        (
            located(&with_base, &benches, est),
            located(&with_human, &benches, est),
        )
    };
    let (stats, bench_means) = figures(&vs_base, &vs_human);
    let ctx = IntervalContext {
        rule,
        source: &source,
        benches: &benches,
        est,
        seed: derive_seed(rule.seed, &[&log.instance_id, variant]),
    };
    let rb: Vec<RoundPair> = with_base.iter().map(|(_, p)| p.clone()).collect();
    let rh: Vec<RoundPair> = with_human.iter().map(|(_, p)| p.clone()).collect();
    let intervals = ctx.intervals(&rb, &rh, &figs_base, &figs_human);
    let (opt_base, opt_commit) = match (&stats, decided_by) {
        (None, _) => (Decision::Undecided, Decision::Undecided),
        // Simulated: one deterministic count per variant and bench, GSO's thresholds on it.
        (Some(st), DecidedBy::Means) => {
            let (b, c) = gso_verdict(st, &rule.thresholds);
            let d = |x: bool| if x { Decision::Yes } else { Decision::No };
            (d(b), d(c))
        }
        (Some(st), DecidedBy::Interval) => match &intervals {
            None => (Decision::Undecided, Decision::Undecided),
            Some(iv) => strict_decisions(st, iv, &rule.thresholds),
        },
    };
    Judgement {
        rounds_with_base: with_base.iter().map(|(r, _)| *r).collect(),
        rounds_with_human: with_human.iter().map(|(r, _)| *r).collect(),
        bench_means,
        stats,
        intervals,
        opt_base,
        opt_commit,
        // GSO's figures are seconds: never made of simulated counts.
        gso_times: rule
            .criterion
            .gso_reports()
            .then(|| crate::gso::gso_times(log, variant))
            .flatten(),
    }
}

/// The speedups and per-bench figures a verdict is read from: the rule's figure (means
/// under gso) of each side over the rounds it is paired on.
fn figures(vs_base: &[BenchPair], vs_human: &[BenchPair]) -> (Option<OptStats>, Vec<BenchMeans>) {
    let means = vs_base
        .iter()
        .zip(vs_human)
        .map(|(b, h)| BenchMeans {
            bench: b.bench.clone(),
            better: b.better,
            base: b.reference,
            human: h.reference,
            patch: b.patch,
        })
        .collect();
    (opt_stats_from_pairs(vs_base, vs_human), means)
}

/// What every interval of one judgement shares.
struct IntervalContext<'a> {
    rule: &'a DecisionRule,
    /// The variant whose runs stand for the judged one.
    source: &'a str,
    benches: &'a [(String, Better)],
    est: crate::estimator::Estimator,
    seed: u64,
}

impl IntervalContext<'_> {
    /// The three intervals of a verdict (GM over base, HM and GM over human), or None while
    /// one of them cannot be had yet.
    fn intervals(
        &self,
        rb: &[RoundPair],
        rh: &[RoundPair],
        figs_base: &Option<crate::replicated::ReplicaFigures>,
        figs_human: &Option<crate::replicated::ReplicaFigures>,
    ) -> Option<SpeedupIntervals> {
        let gb = self.interval(rb, figs_base, "base", Aggregate::Geometric, "gm-base")?;
        let hh = self.interval(rh, figs_human, "human", Aggregate::Harmonic, "hm-human")?;
        let gh = self.interval(rh, figs_human, "human", Aggregate::Geometric, "gm-human")?;
        Some(SpeedupIntervals {
            confidence: self.rule.confidence,
            resamples: self.rule.resamples,
            seed: self.seed,
            rounds: gb.rounds,
            rounds_with_human: hh.rounds,
            gm_speedup_patch_base: gb.overall,
            hm_speedup_patch_commit: hh.overall,
            gm_speedup_patch_commit: gh.overall,
            per_bench: self
                .benches
                .iter()
                .map(|(n, _)| n.clone())
                .zip(gb.per_bench)
                .collect(),
        })
    }

    /// One speedup's interval against `reference`: exactly 1 for the same timings, from the
    /// replicas' figures when the variants ran in several containers, else bootstrapped
    /// over rounds.
    fn interval(
        &self,
        rounds: &[RoundPair],
        figs: &Option<crate::replicated::ReplicaFigures>,
        reference: &str,
        agg: Aggregate,
        tag: &str,
    ) -> Option<RatioInterval> {
        let enough = rounds.len() >= crate::stats::MIN_INTERVAL_ROUNDS;
        if self.source == reference {
            // Byte-identical trees: the same timings on both sides, a speedup of exactly 1.
            let one = Interval {
                estimate: 1.0,
                lo: 1.0,
                hi: 1.0,
            };
            return enough.then(|| RatioInterval {
                overall: one,
                per_bench: vec![one; self.benches.len()],
                rounds: rounds.len(),
            });
        }
        match figs {
            Some(figs) => enough
                .then(|| {
                    crate::replicated::replica_interval(
                        figs,
                        reference,
                        self.source,
                        self.benches.len(),
                        agg,
                        self.rule.confidence,
                    )
                })
                .flatten()
                .map(|mut iv| {
                    iv.rounds = rounds.len();
                    iv
                }),
            None => ratio_interval(
                rounds,
                self.benches,
                self.est,
                agg,
                self.rule.confidence,
                self.rule.resamples,
                derive_seed(self.seed, &[tag]),
            ),
        }
    }
}

/// Whether a saved sample is opt_commit with the bar over human at `p` instead of the rule's
/// opt_thresh (Opt_p@K): GSO's rule on the means under gso, the whole interval above `p`
/// under strict (undecided counts as no, so a curve never overstates).
pub fn opt_commit_at(report: &crate::records::SampleReport, rule: &DecisionRule, p: f64) -> bool {
    let Some(st) = report.opt_stats.as_ref().filter(|_| report.passed()) else {
        return false;
    };
    let th = Thresholds {
        opt_thresh: p,
        ..rule.thresholds
    };
    match rule.criterion.decided_by() {
        DecidedBy::Means => gso_verdict(st, &th).1,
        DecidedBy::Interval => report
            .intervals
            .as_ref()
            .is_some_and(|iv| strict_decisions(st, iv, &th).1 == Decision::Yes),
    }
}

/// GSO's thresholds on intervals: opt_base when the whole interval of GM(base/patch) is at
/// or above min_speedup (and the patch's mean is below base's); opt_commit when, on top of
/// that, the whole interval of HM(human/patch) is above opt_thresh.
pub fn strict_decisions(
    st: &OptStats,
    iv: &SpeedupIntervals,
    th: &Thresholds,
) -> (Decision, Decision) {
    let mut base = decide(&iv.gm_speedup_patch_base, th.min_speedup, true);
    if base == Decision::Yes && st.base_mean <= st.patch_mean {
        base = Decision::Undecided;
    }
    let over_human = decide(&iv.hm_speedup_patch_commit, th.opt_thresh, false);
    let commit = match (base, over_human) {
        (Decision::No, _) | (_, Decision::No) => Decision::No,
        (Decision::Yes, Decision::Yes) => Decision::Yes,
        _ => Decision::Undecided,
    };
    (base, commit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criterion::Criterion;
    use crate::stats::Interval;

    fn iv(gm: (f64, f64), hm: (f64, f64)) -> SpeedupIntervals {
        let i = |(lo, hi): (f64, f64)| Interval {
            estimate: (lo + hi) / 2.0,
            lo,
            hi,
        };
        SpeedupIntervals {
            confidence: 0.95,
            resamples: 10,
            seed: 0,
            rounds: 10,
            rounds_with_human: 10,
            gm_speedup_patch_base: i(gm),
            hm_speedup_patch_commit: i(hm),
            gm_speedup_patch_commit: i(hm),
            per_bench: Default::default(),
        }
    }

    fn st() -> OptStats {
        OptStats {
            base_mean: 2.0,
            patch_mean: 1.0,
            commit_mean: 1.0,
            gm_speedup_patch_base: 2.0,
            gm_speedup_patch_commit: 1.0,
            gm_speedup_commit_base: 2.0,
            hm_speedup_patch_base: 2.0,
            hm_speedup_patch_commit: 1.0,
            per_test_speedups: Default::default(),
        }
    }

    fn log_with(runs: Vec<(u32, &str, f64, bool)>) -> BenchLog {
        use crate::timings::{BenchSetting, RunRecord, Schedule};
        BenchLog {
            shared_code_only: Default::default(),
            schema_version: 1,
            instance_id: "t".into(),
            sample_variant: None,
            variants: vec!["base".into(), "human".into(), "s0".into()],
            benches: vec![BenchSetting {
                name: "b".into(),
                command: "x".into(),
                warmups: 0,
                runs: 2,
                max_runs: 6,
                metric: "wall".into(),
                better: Better::Lower,
                timeout_s: 1.0,
                output_check: "stdout".into(),
            }],
            schedule: Schedule {
                criterion: Criterion::STRICT,
                warmup_rounds: 0,
                min_rounds: 2,
                max_rounds: 6,
                max_seconds: 60.0,
                cpuset: None,
                replicas: 1,
                repetitions: 1,
                max_replicas: 1,
            },
            rounds: vec![],
            runs: runs
                .into_iter()
                .map(|(round, variant, v, failed)| RunRecord {
                    round,
                    warmup: false,
                    variant: variant.into(),
                    bench: "b".into(),
                    wall_s: v,
                    exit_code: 0,
                    user_s: v,
                    sys_s: 0.0,
                    max_rss_kb: 0,
                    involuntary_switches: 0,
                    throttled: None,
                    cpu_probe_ms: None,
                    // A failed run has no figure; flagged runs count like any other.
                    value: (!failed).then_some(v),
                    disturbed: None,
                    output_digest: None,
                    lingering_killed: 0,
                    leftovers_removed: 0,
                    replica: 0,
                    gpu: None,
                    reps: Vec::new(),
                    exec_s: None,
                    native_s: None,
                    rep_digests: Vec::new(),
                })
                .collect(),
            decided_after: Default::default(),
            stopped_undecided: Default::default(),
            dropped: Default::default(),
            stop_reason: String::new(),
            seconds: 0.0,
            shared: Default::default(),
            telemetry_lines: Vec::new(),
            warnings: Vec::new(),
            equivalence: Vec::new(),
        }
    }

    fn rule() -> DecisionRule {
        DecisionRule {
            criterion: Criterion::STRICT,
            thresholds: Thresholds::default(),
            seed: 3,
            confidence: 0.95,
            resamples: 200,
            estimator: crate::estimator::Estimator::Mean,
        }
    }

    #[test]
    fn each_comparison_pairs_its_own_rounds() {
        // Round 1's human run gave no figure: base/s0 pair in rounds 0-5; human/s0 in all
        // but 1. Figures: base 2.0, human 0.5, s0 1.0.
        let mut runs = Vec::new();
        for r in 0..6 {
            runs.push((r, "base", 2.0, false));
            runs.push((r, "human", if r == 1 { 9.0 } else { 0.5 }, r == 1));
            runs.push((r, "s0", 1.0, false));
        }
        let log = log_with(runs);
        let j = judge(&log, "s0", &rule());
        assert_eq!(j.rounds_with_base, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(j.rounds_with_human, vec![0, 2, 3, 4, 5]);
        assert_eq!(j.rounds(), 5);
        let st = j.stats.unwrap();
        assert_eq!(st.gm_speedup_patch_base, 2.0);
        assert_eq!(st.hm_speedup_patch_commit, 0.5);
        // Constant figures: zero-width intervals, so strict decides at once.
        assert_eq!((j.opt_base, j.opt_commit), (Decision::Yes, Decision::No));
        // Same log, same seed: the same judgement.
        assert_eq!(judge(&log, "s0", &rule()), judge(&log, "s0", &rule()));
    }

    #[test]
    fn gso_means_come_from_the_rounds_every_variant_ran() {
        // A sample decided after 10 rounds, base and human measured for 30; the machine got
        // slower after round 10 (every variant 1.5x). A no-op sample: same code as base.
        let mut runs = Vec::new();
        for r in 0..30 {
            let drift = if r < 10 { 1.0 } else { 1.5 };
            let wobble = 1.0 + 0.01 * f64::from(r % 3);
            runs.push((r, "base", 2.0 * drift * wobble, false));
            runs.push((r, "human", 1.0 * drift * wobble, false));
            if r < 10 {
                runs.push((
                    r,
                    "s0",
                    2.0 * drift * (1.0 + 0.01 * f64::from((r + 1) % 3)),
                    false,
                ));
            }
        }
        let log = log_with(runs);
        let gso = DecisionRule {
            criterion: Criterion::GSO,
            ..rule()
        };
        let j = judge(&log, "s0", &gso);
        assert_eq!(j.rounds_with_base, (0..10).collect::<Vec<_>>());
        assert_eq!(j.rounds_with_human, (0..10).collect::<Vec<_>>());
        let st = j.stats.clone().unwrap();
        // Base's means over its 30 rounds would read 1.33x; over the sample's own rounds
        // the no-op is what it is.
        assert!((st.gm_speedup_patch_base - 1.0).abs() < 0.02, "{st:?}");
        assert_eq!(j.opt_base, Decision::No);
        // The figure lies inside its own interval: both come from the same runs.
        let iv = j.intervals.unwrap().gm_speedup_patch_base;
        assert!(
            iv.lo <= st.gm_speedup_patch_base && st.gm_speedup_patch_base <= iv.hi,
            "{iv:?}"
        );
    }

    #[test]
    fn too_few_rounds_decide_nothing() {
        // Four identical rounds of a clear 2x: the means are there, but strict waits for
        // an interval, which needs five rounds.
        let mut runs = Vec::new();
        for r in 0..4 {
            runs.push((r, "base", 2.0, false));
            runs.push((r, "human", 0.5, false));
            runs.push((r, "s0", 1.0, false));
        }
        let j = judge(&log_with(runs.clone()), "s0", &rule());
        assert!(j.stats.is_some());
        assert!(j.intervals.is_none());
        assert_eq!(
            (j.opt_base, j.opt_commit),
            (Decision::Undecided, Decision::Undecided)
        );
        runs.extend([
            (4, "base", 2.0, false),
            (4, "human", 0.5, false),
            (4, "s0", 1.0, false),
        ]);
        let j = judge(&log_with(runs), "s0", &rule());
        assert_eq!((j.opt_base, j.opt_commit), (Decision::Yes, Decision::No));
    }

    #[test]
    fn strict_has_three_outcomes() {
        let th = Thresholds::default();
        use Decision::*;
        // Clearly faster than base and at least as fast as human.
        assert_eq!(
            strict_decisions(&st(), &iv((1.8, 2.2), (0.97, 1.1)), &th),
            (Yes, Yes)
        );
        // Clearly faster than base, clearly slower than human.
        assert_eq!(
            strict_decisions(&st(), &iv((1.8, 2.2), (0.3, 0.5)), &th),
            (Yes, No)
        );
        // Clearly not faster than base: no to both, whatever human says.
        assert_eq!(
            strict_decisions(&st(), &iv((0.9, 1.1), (0.9, 1.3)), &th),
            (No, No)
        );
        // Straddles 1.2: undecided, and so is opt_commit unless human rules it out.
        assert_eq!(
            strict_decisions(&st(), &iv((1.1, 1.3), (0.97, 1.1)), &th),
            (Undecided, Undecided)
        );
        assert_eq!(
            strict_decisions(&st(), &iv((1.1, 1.3), (0.3, 0.5)), &th),
            (Undecided, No)
        );
        // Above base, straddles the human threshold.
        assert_eq!(
            strict_decisions(&st(), &iv((1.5, 1.7), (0.9, 1.0)), &th),
            (Yes, Undecided)
        );
        // GSO would round 1.16 up to 1.2; strict wants the interval at 1.2 or above.
        assert_eq!(
            strict_decisions(&st(), &iv((1.16, 1.19), (2.0, 3.0)), &th),
            (No, No)
        );
    }
}
