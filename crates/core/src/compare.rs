//! Comparing contenders (models, or runs of one model) on the instances they share, from
//! their saved timings: who is faster on a task, with an interval, and how sure a ranking
//! is. Plain data in, plain data out.
//!
//! A task's comparison is paired the only way two runs can be: each contender's speedup
//! over its own base is taken from its own rounds (its base and its sample measured side by
//! side), and the ratio of the two speedups gets a bootstrap interval that resamples each
//! contender's rounds on its own. Base cancels out of the ratio, so two runs on the same
//! machine compare fairly even though they measured at different times.
//!
//! That interval says how well each run knows its own speedup, not how far a second run of
//! the same code lands from the first: container placement, the hour and each run's own
//! offsets move a whole run by a few percent. So the interval a verdict is read from is
//! widened by the spread between runs ([`BETWEEN_RUN_SD`], measured from A/A pairs of runs
//! by `scripts/validate_compare.py`): two runs of the same code tie.

use serde::{Deserialize, Serialize};

use crate::estimator::Estimator;
use crate::stats::{
    Aggregate, Interval, RoundPair, SplitMix64, combine, complete_rounds, percentile, speedups,
};
use crate::task::Better;

/// What one contender has on one task.
#[derive(Debug, Clone)]
pub struct TaskEntry {
    /// Its best sample passed the tests.
    pub passed: bool,
    pub opt_commit: bool,
    /// The best sample's rounds with base (base's and the sample's figure per bench).
    pub rounds: Vec<RoundPair>,
}

/// Who is faster on one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Winner {
    First,
    Second,
    /// Both measured and the interval of the ratio holds 1.
    Tie,
    /// Neither has a passing, measured sample.
    Neither,
}

/// One task, two contenders: the first's speedup over the second's (both over their own
/// base), with an interval, and the winner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskComparison {
    pub ratio: Option<Interval>,
    pub winner: Winner,
    /// Why, in words.
    pub reason: String,
}

/// The standard deviation of a run's log speedup over its own base, between independent
/// runs of the same code on one machine (what a run's own rounds cannot show). Measured on
/// the shipped examples and `tasks/_real` (`scripts/validate_compare.py`, README "compare");
/// `harness compare --between-run-sd` sets another, e.g. one measured on your machine.
pub const BETWEEN_RUN_SD: f64 = 0.035;

/// How a comparison reads its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareRule {
    pub estimator: Estimator,
    pub confidence: f64,
    pub resamples: usize,
    /// [`BETWEEN_RUN_SD`] unless set.
    pub between_run_sd: f64,
}

/// The ratio's interval with the spread between runs added: each side of the log interval
/// is the root of the sum of squares of its own half-width and z * sqrt(2) * sd (two runs,
/// each off by sd).
pub fn widen_for_runs(iv: Interval, between_run_sd: f64, confidence: f64) -> Interval {
    let z = normal_quantile(1.0 - (1.0 - confidence) / 2.0);
    let extra = z * std::f64::consts::SQRT_2 * between_run_sd.max(0.0);
    let (e, lo, hi) = (iv.estimate.ln(), iv.lo.ln(), iv.hi.ln());
    let below = (e - lo).max(0.0).hypot(extra);
    let above = (hi - e).max(0.0).hypot(extra);
    Interval {
        estimate: iv.estimate,
        lo: (e - below).exp(),
        hi: (e + above).exp(),
    }
}

/// The standard normal's quantile (Acklam's rational approximation, |error| < 1.2e-9).
fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let p = p.clamp(1e-12, 1.0 - 1e-12);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Compares two contenders on one task. Only one passed: it wins. Both passed and were
/// measured: the interval of the ratio of speedups, widened by the spread between runs,
/// decides, or it is a tie.
pub fn compare_task(
    a: &TaskEntry,
    b: &TaskEntry,
    benches: &[(String, Better)],
    rule: &CompareRule,
    seed: u64,
) -> TaskComparison {
    match (a.passed, b.passed) {
        (false, false) => {
            return TaskComparison {
                ratio: None,
                winner: Winner::Neither,
                reason: "neither passed".into(),
            };
        }
        (true, false) | (false, true) => {
            return TaskComparison {
                ratio: None,
                winner: if a.passed {
                    Winner::First
                } else {
                    Winner::Second
                },
                reason: "only one passed the tests".into(),
            };
        }
        _ => {}
    }
    match speedup_ratio(
        &a.rounds,
        &b.rounds,
        benches,
        rule.estimator,
        rule.confidence,
        rule.resamples,
        seed,
    )
    .map(|iv| widen_for_runs(iv, rule.between_run_sd, rule.confidence))
    {
        None => TaskComparison {
            ratio: None,
            winner: Winner::Tie,
            reason: "too few measured rounds to compare".into(),
        },
        Some(iv) => {
            let (winner, reason) = if iv.lo > 1.0 {
                (
                    Winner::First,
                    "faster: the whole interval, the spread between runs included, is above 1",
                )
            } else if iv.hi < 1.0 {
                (
                    Winner::Second,
                    "slower: the whole interval, the spread between runs included, is below 1",
                )
            } else {
                (
                    Winner::Tie,
                    "the interval holds 1 (two runs of the same code differ this much)",
                )
            };
            TaskComparison {
                ratio: Some(iv),
                winner,
                reason: reason.into(),
            }
        }
    }
}

/// The ratio of two speedups over their own bases (geometric mean over benches), with a
/// percentile bootstrap interval that resamples each side's rounds independently. None when
/// a side has fewer than [`crate::stats::MIN_INTERVAL_ROUNDS`] complete rounds.
pub fn speedup_ratio(
    a: &[RoundPair],
    b: &[RoundPair],
    benches: &[(String, Better)],
    est: Estimator,
    confidence: f64,
    resamples: usize,
    seed: u64,
) -> Option<Interval> {
    let (a, b) = (complete_rounds(a, benches), complete_rounds(b, benches));
    let min = crate::stats::MIN_INTERVAL_ROUNDS;
    if a.len() < min || b.len() < min || benches.is_empty() {
        return None;
    }
    let speedup = |rounds: &[&RoundPair]| -> Option<f64> {
        combine(&speedups(rounds, benches, est)?, Aggregate::Geometric)
    };
    let estimate = speedup(&a)? / speedup(&b)?;
    let mut rng = SplitMix64::new(seed);
    let mut draws = Vec::with_capacity(resamples);
    let (mut pa, mut pb): (Vec<&RoundPair>, Vec<&RoundPair>) = (Vec::new(), Vec::new());
    for _ in 0..resamples {
        pa.clear();
        pb.clear();
        pa.extend((0..a.len()).map(|_| a[rng.below(a.len())]));
        pb.extend((0..b.len()).map(|_| b[rng.below(b.len())]));
        if let (Some(x), Some(y)) = (speedup(&pa), speedup(&pb)) {
            draws.push(x / y);
        }
    }
    draws.sort_by(f64::total_cmp);
    let alpha = (1.0 - confidence) / 2.0;
    Some(Interval {
        estimate,
        lo: percentile(&draws, alpha),
        hi: percentile(&draws, 1.0 - alpha),
    })
}

/// A contender's place: its score on the shared instances and the interval of its rank
/// over bootstrap resamples of those instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankFigure {
    /// 1 = best; contenders with equal scores share the better rank.
    pub rank: usize,
    /// Opt@K on the shared instances, in percent.
    pub score: f64,
    /// The 2.5th and 97.5th percentile of its rank over the resamples.
    pub rank_interval: [usize; 2],
    /// Share of resamples in which it ranked first; a first place shared by m contenders
    /// counts 1/m for each (two runs of the same code: about 50% each).
    pub first_share: f64,
}

/// Ranks with equal scores sharing the better rank (the point ranking).
fn ranks(scores: &[f64]) -> Vec<usize> {
    scores
        .iter()
        .map(|s| 1 + scores.iter().filter(|o| *o > s).count())
        .collect()
}

/// Ranks with equal scores put in a random order: in a resample, a tie is not a shared win.
fn ranks_tie_broken(scores: &[f64], rng: &mut SplitMix64) -> Vec<usize> {
    let keys: Vec<u64> = scores.iter().map(|_| rng.next_u64()).collect();
    (0..scores.len())
        .map(|c| {
            1 + (0..scores.len())
                .filter(|&o| scores[o] > scores[c] || (scores[o] == scores[c] && keys[o] > keys[c]))
                .count()
        })
        .collect()
}

/// Ranks contenders by the share of instances on which they are opt_commit:
/// `opt[c][i]` is contender c's verdict on shared instance i.
pub fn rank_by_opt(
    opt: &[Vec<bool>],
    confidence: f64,
    resamples: usize,
    seed: u64,
) -> Vec<RankFigure> {
    let n = opt.first().map_or(0, Vec::len);
    let score = |c: &Vec<bool>, pick: &[usize]| -> f64 {
        if pick.is_empty() {
            return 0.0;
        }
        100.0 * pick.iter().filter(|&&i| c[i]).count() as f64 / pick.len() as f64
    };
    let all: Vec<usize> = (0..n).collect();
    let point: Vec<f64> = opt.iter().map(|c| score(c, &all)).collect();
    let mut drawn: Vec<Vec<usize>> = vec![Vec::with_capacity(resamples); opt.len()];
    let mut rng = SplitMix64::new(seed);
    let mut pick = Vec::with_capacity(n);
    for _ in 0..resamples {
        pick.clear();
        pick.extend((0..n).map(|_| rng.below(n.max(1))));
        let scores: Vec<f64> = opt.iter().map(|c| score(c, &pick)).collect();
        for (c, r) in ranks_tie_broken(&scores, &mut rng).into_iter().enumerate() {
            drawn[c].push(r);
        }
    }
    let alpha = (1.0 - confidence) / 2.0;
    ranks(&point)
        .into_iter()
        .zip(point)
        .zip(drawn.iter_mut())
        .map(|((rank, score), d)| {
            d.sort_unstable();
            let at = |q: f64| {
                d.get(((d.len().saturating_sub(1)) as f64 * q).round() as usize)
                    .copied()
                    .unwrap_or(rank)
            };
            RankFigure {
                rank,
                score,
                rank_interval: [at(alpha), at(1.0 - alpha)],
                first_share: d.iter().filter(|r| **r == 1).count() as f64 / d.len().max(1) as f64,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(base: f64, patch: f64, n: usize, wobble: f64) -> Vec<RoundPair> {
        (0..n)
            .map(|i| {
                let w = 1.0 + wobble * ((i % 3) as f64 - 1.0);
                RoundPair {
                    reference: vec![base * w],
                    patch: vec![patch * w],
                }
            })
            .collect()
    }

    fn entry(rounds: Vec<RoundPair>) -> TaskEntry {
        TaskEntry {
            passed: true,
            opt_commit: false,
            rounds,
        }
    }

    fn benches() -> Vec<(String, Better)> {
        vec![("b".into(), Better::Lower)]
    }

    fn rule(between_run_sd: f64) -> CompareRule {
        CompareRule {
            estimator: Estimator::Mean,
            confidence: 0.95,
            resamples: 500,
            between_run_sd,
        }
    }

    /// Two runs of the same code a few percent apart, each sure of its own speedup (the
    /// issue's pair-sum 1.03x [1.01, 1.07], primes-sieve 1.09x [1.04, 1.10]): without the
    /// spread between runs one "wins"; with it they tie. A 1.3x difference is still found.
    #[test]
    fn runs_of_the_same_code_tie_and_a_real_difference_is_found() {
        let a = entry(rounds(1.0, 0.5, 10, 0.02));
        for offset in [1.03, 1.06, 1.09, 1.0 / 1.06] {
            let b = entry(rounds(1.0, 0.5 * offset, 10, 0.02));
            let alone = compare_task(&a, &b, &benches(), &rule(0.0), 3);
            assert_ne!(alone.winner, Winner::Tie, "{offset}: {alone:?}");
            let c = compare_task(&a, &b, &benches(), &rule(BETWEEN_RUN_SD), 3);
            assert_eq!(c.winner, Winner::Tie, "{offset}: {c:?}");
        }
        let slower = entry(rounds(1.0, 0.5 * 1.3, 10, 0.05));
        let c = compare_task(&a, &slower, &benches(), &rule(BETWEEN_RUN_SD), 3);
        assert_eq!(c.winner, Winner::First, "{c:?}");
        let c = compare_task(&slower, &a, &benches(), &rule(BETWEEN_RUN_SD), 3);
        assert_eq!(c.winner, Winner::Second, "{c:?}");
    }

    #[test]
    fn normal_quantile_matches_its_table() {
        for (p, z) in [
            (0.975, 1.959964),
            (0.5, 0.0),
            (0.995, 2.575829),
            (0.01, -2.326348),
        ] {
            assert!(
                (normal_quantile(p) - z).abs() < 1e-5,
                "{p}: {}",
                normal_quantile(p)
            );
        }
    }

    /// Two runs of the same code with the same verdicts share first place: about half the
    /// resamples each, not all of them each.
    #[test]
    fn identical_contenders_split_first_place() {
        let a: Vec<bool> = (0..20).map(|i| i % 3 == 0).collect();
        let r = rank_by_opt(&[a.clone(), a], 0.95, 2000, 5);
        for f in &r {
            assert_eq!(f.rank, 1);
            assert!((f.first_share - 0.5).abs() < 0.05, "{r:?}");
            assert_eq!(f.rank_interval, [1, 2], "{r:?}");
        }
    }

    #[test]
    fn a_clearly_faster_contender_wins_and_equal_ones_tie() {
        let fast = entry(rounds(1.0, 0.25, 8, 0.05));
        let slow = entry(rounds(1.0, 0.5, 8, 0.05));
        let c = compare_task(&fast, &slow, &benches(), &rule(0.0), 1);
        assert_eq!(c.winner, Winner::First, "{c:?}");
        let iv = c.ratio.unwrap();
        assert!((iv.estimate - 2.0).abs() < 1e-9, "{iv:?}");
        let c = compare_task(&slow, &fast, &benches(), &rule(0.0), 1);
        assert_eq!(c.winner, Winner::Second);
        // The same speedup with noise that moves base and patch apart: a tie.
        let noisy: Vec<RoundPair> = (0..8)
            .map(|i| RoundPair {
                reference: vec![1.0 + 0.3 * ((i % 2) as f64)],
                patch: vec![0.5 + 0.15 * (((i + 1) % 2) as f64)],
            })
            .collect();
        let c = compare_task(
            &entry(noisy.clone()),
            &entry(noisy),
            &benches(),
            &rule(0.0),
            1,
        );
        assert_eq!(c.winner, Winner::Tie, "{c:?}");
    }

    #[test]
    fn passing_beats_failing_and_few_rounds_decide_nothing() {
        let mut failed = entry(Vec::new());
        failed.passed = false;
        let ok = entry(rounds(1.0, 0.5, 8, 0.0));
        let c = compare_task(&failed, &ok, &benches(), &rule(0.0), 1);
        assert_eq!(c.winner, Winner::Second);
        let c = compare_task(&failed, &failed, &benches(), &rule(0.0), 1);
        assert_eq!(c.winner, Winner::Neither);
        let short = entry(rounds(1.0, 0.1, 3, 0.0));
        let c = compare_task(&short, &ok, &benches(), &rule(0.0), 1);
        assert_eq!((c.winner, c.ratio), (Winner::Tie, None));
    }

    #[test]
    fn rank_intervals_widen_when_scores_are_close() {
        // 40 instances: A opt on 30, B on 10, C on 11.
        let n = 40;
        let a: Vec<bool> = (0..n).map(|i| i < 30).collect();
        let b: Vec<bool> = (0..n).map(|i| i < 10).collect();
        let c: Vec<bool> = (0..n).map(|i| (5..16).contains(&i)).collect();
        let r = rank_by_opt(&[a, b, c], 0.95, 2000, 7);
        assert_eq!(r[0].rank, 1);
        assert_eq!(r[0].rank_interval, [1, 1], "{r:?}");
        assert!(r[0].first_share > 0.99);
        assert_eq!((r[1].rank, r[2].rank), (3, 2));
        assert_eq!(r[1].rank_interval, [2, 3], "{r:?}");
        assert_eq!(r[2].rank_interval, [2, 3], "{r:?}");
    }
}
