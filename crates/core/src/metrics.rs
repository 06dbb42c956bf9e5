//! The metrics of docs/src/metrics.md, as plain functions over plain numbers.

use serde::{Deserialize, Serialize};

use crate::task::Better;

pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Geometric mean; `None` when empty or any value is not positive.
pub fn geometric_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|&x| !(x > 0.0 && x.is_finite())) {
        return None;
    }
    Some((xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

/// Harmonic mean; `None` when empty or any value is not positive.
pub fn harmonic_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|&x| !(x > 0.0 && x.is_finite())) {
        return None;
    }
    Some(xs.len() as f64 / xs.iter().map(|x| 1.0 / x).sum::<f64>())
}

/// Python's `round(x, ndigits)`: the decimal nearest to the exact binary value of `x`, ties
/// to even. So `round(1.15, 1)` is 1.1 (1.15 is stored as 1.149999...) and `round(1.25, 1)`
/// is 1.2 — the rule GSO applies to its 1.2 threshold.
pub fn python_round(x: f64, ndigits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    // Rust's fixed-precision formatting rounds the exact binary value, ties to even, like
    // CPython's float_round (which goes through the same correctly rounded dtoa).
    format!("{x:.ndigits$}").parse().unwrap_or(x)
}

/// numpy's `round(x, decimals)` on a float64, which is what GSO applies to its GM (a numpy
/// float64): `x * 10^d`, rounded half to even, `/ 10^d`. So `round(np.float64(1.15), 1)` is
/// 1.2 (1.15 * 10 is 11.5 in binary, a tie, to even 12), where Python's `round(1.15, 1)` is
/// 1.1, and 1.05 rounds to 1.0.
pub fn numpy_round(x: f64, decimals: i32) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let f = 10f64.powi(decimals);
    (x * f).round_ties_even() / f
}

/// The GSO thresholds: both are options and go into every report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// opt_base needs round(GM(base/patch), 1) >= this.
    pub min_speedup: f64,
    /// opt_commit needs HM(human/patch) > this.
    pub opt_thresh: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_speedup: 1.2,
            opt_thresh: 0.95,
        }
    }
}

/// Mean figure of one bench for base, human and the patch, in the bench's own unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchMeans {
    pub bench: String,
    pub better: Better,
    pub base: f64,
    pub human: f64,
    pub patch: f64,
}

/// speedup(x over y) for one bench, from the means: m_y / m_x for lower-is-better figures,
/// m_x / m_y for higher-is-better ones.
pub fn speedup(better: Better, x: f64, y: f64) -> f64 {
    match better {
        Better::Lower => y / x,
        Better::Higher => x / y,
    }
}

/// A figure turned into "cost" (lower is better), so means across benches compare alike.
fn as_cost(better: Better, v: f64) -> f64 {
    match better {
        Better::Lower => v,
        Better::Higher => 1.0 / v,
    }
}

/// GSO's `opt_stats` for one sample, names kept so the report reads like GSO's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptStats {
    pub base_mean: f64,
    pub patch_mean: f64,
    pub commit_mean: f64,
    pub gm_speedup_patch_base: f64,
    pub gm_speedup_patch_commit: f64,
    pub gm_speedup_commit_base: f64,
    pub hm_speedup_patch_base: f64,
    pub hm_speedup_patch_commit: f64,
    /// bench name → speedup of the patch over base.
    pub per_test_speedups: std::collections::BTreeMap<String, f64>,
}

/// Mean figures of one bench for a reference variant and the patch, from the same rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchPair {
    pub bench: String,
    pub better: Better,
    pub reference: f64,
    pub patch: f64,
}

/// The speedups of docs/src/metrics.md when base and human are each compared with the
/// patch on their own paired rounds: `vs_base` gives the speedups over base, `vs_human`
/// those against human (the patch's mean may differ slightly between the two).
pub fn opt_stats_from_pairs(vs_base: &[BenchPair], vs_human: &[BenchPair]) -> Option<OptStats> {
    if vs_base.is_empty() || vs_base.len() != vs_human.len() {
        return None;
    }
    let ok = |v: f64| v > 0.0 && v.is_finite();
    if vs_base
        .iter()
        .chain(vs_human)
        .any(|p| !ok(p.reference) || !ok(p.patch))
    {
        return None;
    }
    let pb: Vec<f64> = vs_base
        .iter()
        .map(|p| speedup(p.better, p.patch, p.reference))
        .collect();
    let pc: Vec<f64> = vs_human
        .iter()
        .map(|p| speedup(p.better, p.patch, p.reference))
        .collect();
    let cb: Vec<f64> = vs_base
        .iter()
        .zip(vs_human)
        .map(|(b, h)| speedup(b.better, h.reference, b.reference))
        .collect();
    let cost = |pairs: &[BenchPair], f: fn(&BenchPair) -> f64| -> Vec<f64> {
        pairs.iter().map(|p| as_cost(p.better, f(p))).collect()
    };
    Some(OptStats {
        base_mean: mean(&cost(vs_base, |p| p.reference))?,
        patch_mean: mean(&cost(vs_base, |p| p.patch))?,
        commit_mean: mean(&cost(vs_human, |p| p.reference))?,
        gm_speedup_patch_base: geometric_mean(&pb)?,
        gm_speedup_patch_commit: geometric_mean(&pc)?,
        gm_speedup_commit_base: geometric_mean(&cb)?,
        hm_speedup_patch_base: harmonic_mean(&pb)?,
        hm_speedup_patch_commit: harmonic_mean(&pc)?,
        per_test_speedups: vs_base
            .iter()
            .zip(&pb)
            .map(|(p, s)| (p.bench.clone(), *s))
            .collect(),
    })
}

/// The speedups of docs/src/metrics.md. `None` when a mean is missing or not positive.
pub fn opt_stats(benches: &[BenchMeans]) -> Option<OptStats> {
    if benches.is_empty()
        || benches.iter().any(|b| {
            [b.base, b.human, b.patch]
                .iter()
                .any(|v| !(*v > 0.0 && v.is_finite()))
        })
    {
        return None;
    }
    let pb: Vec<f64> = benches
        .iter()
        .map(|b| speedup(b.better, b.patch, b.base))
        .collect();
    let pc: Vec<f64> = benches
        .iter()
        .map(|b| speedup(b.better, b.patch, b.human))
        .collect();
    let cb: Vec<f64> = benches
        .iter()
        .map(|b| speedup(b.better, b.human, b.base))
        .collect();
    let cost = |f: fn(&BenchMeans) -> f64| -> Vec<f64> {
        benches.iter().map(|b| as_cost(b.better, f(b))).collect()
    };
    Some(OptStats {
        base_mean: mean(&cost(|b| b.base))?,
        patch_mean: mean(&cost(|b| b.patch))?,
        commit_mean: mean(&cost(|b| b.human))?,
        gm_speedup_patch_base: geometric_mean(&pb)?,
        gm_speedup_patch_commit: geometric_mean(&pc)?,
        gm_speedup_commit_base: geometric_mean(&cb)?,
        hm_speedup_patch_base: harmonic_mean(&pb)?,
        hm_speedup_patch_commit: harmonic_mean(&pc)?,
        per_test_speedups: benches
            .iter()
            .zip(&pb)
            .map(|(b, s)| (b.bench.clone(), *s))
            .collect(),
    })
}

/// GSO's rule on the means: (opt_base, opt_commit).
pub fn gso_verdict(stats: &OptStats, th: &Thresholds) -> (bool, bool) {
    let opt_base = stats.base_mean > stats.patch_mean
        && numpy_round(stats.gm_speedup_patch_base, 1) >= th.min_speedup;
    let opt_commit = opt_base && stats.hm_speedup_patch_commit > th.opt_thresh;
    (opt_base, opt_commit)
}

/// Unbiased pass@k for n samples with c successes: 1 - C(n-c, k) / C(n, k), in the
/// numerically stable product form. Requires k <= n.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> f64 {
    assert!(
        k >= 1 && k <= n && c <= n,
        "pass_at_k needs 1 <= k <= n and c <= n"
    );
    if n - c < k {
        return 1.0;
    }
    1.0 - ((n - c + 1)..=n)
        .map(|i| 1.0 - k as f64 / i as f64)
        .product::<f64>()
}

/// Per-instance (samples, successes) → each instance's pass@k for k = 1..=max_k. An
/// instance with fewer than `max_k` samples counts the missing ones as failures.
pub fn pass_at_k_rows(instances: &[(u64, u64)], max_k: u64) -> Vec<Vec<f64>> {
    instances
        .iter()
        .map(|&(n, c)| {
            (1..=max_k)
                .map(|k| pass_at_k(n.max(max_k), c.min(n), k))
                .collect()
        })
        .collect()
}

/// Per-instance (samples, successes) → pass@k averaged over instances, k = 1..=max_k.
pub fn pass_at_k_curve(instances: &[(u64, u64)], max_k: u64) -> Vec<f64> {
    let rows = pass_at_k_rows(instances, max_k);
    let n = rows.len().max(1) as f64;
    (0..max_k as usize)
        // fold from +0.0: an empty sum of f64 is -0.0, printed "-0.00%" (an empty partition).
        .map(|k| rows.iter().map(|r| r[k]).fold(0.0, |a, b| a + b) / n)
        .collect()
}

/// GSO's Opt@K: percentage of all selected instances with an opt_commit sample among the
/// first K, rounded to two decimals as GSO does.
pub fn opt_at_k_score(opt_instances: usize, total_instances: usize) -> f64 {
    if total_instances == 0 {
        return 0.0;
    }
    python_round(opt_instances as f64 / total_instances as f64 * 100.0, 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn means_by_hand() {
        assert!(close(mean(&[1.0, 2.0, 6.0]).unwrap(), 3.0));
        // GM(2, 8) = 4; HM(2, 8) = 2 / (1/2 + 1/8) = 3.2
        assert!(close(geometric_mean(&[2.0, 8.0]).unwrap(), 4.0));
        assert!(close(harmonic_mean(&[2.0, 8.0]).unwrap(), 3.2));
        assert!(close(geometric_mean(&[1.5]).unwrap(), 1.5));
        assert_eq!(geometric_mean(&[]), None);
        assert_eq!(harmonic_mean(&[1.0, 0.0]), None);
        assert_eq!(geometric_mean(&[1.0, -1.0]), None);
    }

    #[test]
    fn numpy_rounding_as_gso_applies_it() {
        // Values checked against numpy 2.x: round(np.float64(x), 1)
        for (x, want) in [
            (1.15, 1.2),
            (1.25, 1.2),
            (1.05, 1.0),
            (0.95, 1.0),
            (1.35, 1.4),
            (1.45, 1.4),
            (2.25, 2.2),
            (1.149_999, 1.1),
            (1.150_000_1, 1.2),
            (1.2, 1.2),
        ] {
            assert_eq!(numpy_round(x, 1), want, "round(np.float64({x}), 1)");
        }
        // GSO's opt_base at the tie: a GM of exactly 1.15 passes the 1.2 threshold.
        let mut st = OptStats {
            base_mean: 1.15,
            patch_mean: 1.0,
            commit_mean: 1.0,
            gm_speedup_patch_base: 1.15,
            gm_speedup_patch_commit: 1.0,
            gm_speedup_commit_base: 1.15,
            hm_speedup_patch_base: 1.15,
            hm_speedup_patch_commit: 1.0,
            per_test_speedups: Default::default(),
        };
        assert_eq!(gso_verdict(&st, &Thresholds::default()), (true, true));
        st.gm_speedup_patch_base = 1.149_999;
        assert_eq!(gso_verdict(&st, &Thresholds::default()), (false, false));
    }

    #[test]
    fn python_rounding_at_the_boundary() {
        // Values checked against CPython 3.11: round(x, 1)
        for (x, want) in [
            (1.15, 1.1), // stored as 1.149999999999999911...
            (1.25, 1.2), // exact tie → even
            (1.35, 1.4), // stored as 1.350000000000000088...
            (1.149_999, 1.1),
            (1.150_000_1, 1.2),
            (1.19, 1.2),
            (0.25, 0.2),
            (2.675, 2.7),
        ] {
            assert_eq!(python_round(x, 1), want, "round({x}, 1)");
        }
        assert_eq!(python_round(2.675, 2), 2.67); // 2.67499999...
        assert_eq!(python_round(66.666_666, 2), 66.67);
    }

    fn stats(base: f64, human: f64, patch: f64) -> OptStats {
        opt_stats(&[BenchMeans {
            bench: "b".into(),
            better: Better::Lower,
            base,
            human,
            patch,
        }])
        .unwrap()
    }

    #[test]
    fn gso_rule_at_1_2() {
        let th = Thresholds::default();
        // speedup 1.15 rounds to 1.2 the way numpy rounds GSO's float64 GM → opt_base
        // (Python's round(1.15, 1) would say 1.1)
        let s = stats(1.15, 0.5, 1.0);
        assert_eq!(s.gm_speedup_patch_base, 1.15);
        assert_eq!(gso_verdict(&s, &th), (true, false));
        let s = stats(1.149, 0.5, 1.0);
        assert_eq!(gso_verdict(&s, &th), (false, false));
        // speedup 1.16 rounds to 1.2 → opt_base
        let s = stats(1.16, 2.0, 1.0);
        assert_eq!(gso_verdict(&s, &th), (true, true));
        // 1.25 (exact tie) rounds to 1.2 → opt_base
        let s = stats(1.25, 2.0, 1.0);
        assert!(gso_verdict(&s, &th).0);
        // human/patch HM at or below 0.95 is not > 0.95
        let s = stats(2.0, 0.94, 1.0);
        assert_eq!(gso_verdict(&s, &th), (true, false));
        let s = stats(2.0, 0.951, 1.0);
        assert_eq!(gso_verdict(&s, &th), (true, true));
        // A slower patch is never opt_base
        let s = stats(1.0, 0.5, 2.0);
        assert_eq!(gso_verdict(&s, &th), (false, false));
    }

    #[test]
    fn multi_bench_gm_and_hm() {
        let s = opt_stats(&[
            BenchMeans {
                bench: "a".into(),
                better: Better::Lower,
                base: 4.0,
                human: 1.0,
                patch: 2.0,
            },
            BenchMeans {
                bench: "b".into(),
                better: Better::Lower,
                base: 9.0,
                human: 2.0,
                patch: 1.0,
            },
        ])
        .unwrap();
        // patch over base: 2 and 9 → GM 4.2426..., HM 2*18/11 = 3.2727...
        assert!(close(s.gm_speedup_patch_base, 18f64.sqrt()));
        assert!(close(s.hm_speedup_patch_base, 36.0 / 11.0));
        // human over patch: 0.5 and 2 → GM 1, HM 0.8
        assert!(close(s.gm_speedup_patch_commit, 1.0));
        assert!(close(s.hm_speedup_patch_commit, 0.8));
        assert!(close(s.base_mean, 6.5));
        assert!(close(s.patch_mean, 1.5));
        // higher-is-better figures invert
        let h = opt_stats(&[BenchMeans {
            bench: "t".into(),
            better: Better::Higher,
            base: 100.0,
            human: 300.0,
            patch: 200.0,
        }])
        .unwrap();
        assert!(close(h.gm_speedup_patch_base, 2.0));
        assert!(close(h.hm_speedup_patch_commit, 200.0 / 300.0));
    }

    fn choose(n: u64, k: u64) -> f64 {
        if k > n {
            return 0.0;
        }
        (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
    }

    #[test]
    fn pass_at_k_matches_closed_form() {
        assert!(close(pass_at_k(5, 2, 3), 0.9));
        assert!((pass_at_k(8, 3, 5) - 0.982_142_857).abs() < 1e-8);
        assert!(close(pass_at_k(8, 3, 1), 0.375));
        for n in 1..=8 {
            for c in 0..=n {
                for k in 1..=n {
                    let want = 1.0 - choose(n - c, k) / choose(n, k);
                    assert!(
                        (pass_at_k(n, c, k) - want).abs() < 1e-12,
                        "n={n} c={c} k={k}"
                    );
                }
            }
        }
    }

    #[test]
    fn curves_and_opt_at_k_denominator() {
        // Two instances with 3 samples (1 and 0 successes) and one not submitted at all.
        let curve = pass_at_k_curve(&[(3, 1), (3, 0), (0, 0)], 3);
        assert!(close(curve[0], (1.0 / 3.0) / 3.0));
        assert!(close(curve[2], 1.0 / 3.0));
        // Opt@K divides by every selected instance, submitted or not.
        assert_eq!(opt_at_k_score(1, 3), 33.33);
        assert_eq!(opt_at_k_score(2, 3), 66.67);
        assert_eq!(opt_at_k_score(3, 4), 75.0);
        assert_eq!(opt_at_k_score(0, 0), 0.0);
        // No instance at all (an empty partition): +0, not -0.
        assert!(pass_at_k_curve(&[], 2).iter().all(|v| v.is_sign_positive()));
    }
}
