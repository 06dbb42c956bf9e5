//! Intervals when every variant ran in several containers (replicas).
//!
//! On a machine like the one this harness is developed on, a container keeps a speed offset
//! of a few percent for its whole life (measured: two containers of the same code differ by
//! up to 4-5%, the same way in both halves of a measurement). Resampling rounds inside one
//! container per variant cannot see that offset, so its intervals cover the true speedup far
//! less often than they claim. With replicas, each variant's figure is averaged over its
//! containers, and the spread between a variant's containers, pooled over every variant of
//! the task, measures how much one container's figure varies — offset and round noise
//! together. The interval of a log speedup is then a t-interval:
//!
//! `L ± t(df) · sqrt(τ² · (1/C_ref + 1/C_patch))`, with τ² the pooled between-container
//! variance and df = Σ (C_v − 1) over the variants that contributed.

use std::collections::BTreeMap;

use crate::stats::{Aggregate, Interval, RatioInterval};

/// Per variant, per replica, per bench: the log of the figure's cost (lower is better: a
/// higher-is-better figure enters inverted). A replica is listed only when it has a figure
/// for every bench.
#[derive(Debug, Clone, Default)]
pub struct ReplicaFigures {
    pub log_costs: BTreeMap<String, Vec<Vec<f64>>>,
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, s) = xs.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| s / n as f64)
}

impl ReplicaFigures {
    /// Pooled between-replica variance of a statistic of a replica's bench figures, and
    /// its degrees of freedom.
    fn pooled(&self, stat: &dyn Fn(&[f64]) -> f64) -> Option<(f64, usize)> {
        let (mut ss, mut df) = (0.0, 0usize);
        for replicas in self.log_costs.values() {
            if replicas.len() < 2 {
                continue;
            }
            let xs: Vec<f64> = replicas.iter().map(|r| stat(r)).collect();
            let m = xs.iter().sum::<f64>() / xs.len() as f64;
            ss += xs.iter().map(|x| (x - m).powi(2)).sum::<f64>();
            df += xs.len() - 1;
        }
        (df > 0).then(|| (ss / df as f64, df))
    }

    /// The mean over a variant's replicas of a statistic, and how many replicas.
    fn averaged(&self, variant: &str, stat: &dyn Fn(&[f64]) -> f64) -> Option<(f64, usize)> {
        let replicas = self.log_costs.get(variant)?;
        mean(replicas.iter().map(|r| stat(r))).map(|m| (m, replicas.len()))
    }
}

/// The speedup of `patch` over `reference`, per bench and combined (GM or HM), with
/// t-intervals from the pooled between-replica variance. `None` when either variant has no
/// complete replica or nothing gives a degree of freedom.
pub fn replica_interval(
    figs: &ReplicaFigures,
    reference: &str,
    patch: &str,
    benches: usize,
    agg: Aggregate,
    confidence: f64,
) -> Option<RatioInterval> {
    if benches == 0 {
        return None;
    }
    let t = |df: usize| student_t_quantile(0.5 + confidence / 2.0, df as f64);
    let gm = |r: &[f64]| r.iter().sum::<f64>() / r.len() as f64;
    let (ref_g, c_ref) = figs.averaged(reference, &gm)?;
    let (patch_g, c_patch) = figs.averaged(patch, &gm)?;
    let spread = |stat: &dyn Fn(&[f64]) -> f64| -> Option<f64> {
        let (tau2, df) = figs.pooled(stat)?;
        Some(t(df) * (tau2 * (1.0 / c_ref as f64 + 1.0 / c_patch as f64)).sqrt())
    };
    let mut per_bench = Vec::with_capacity(benches);
    let mut bench_logs = Vec::with_capacity(benches);
    for b in 0..benches {
        let stat = move |r: &[f64]| r[b];
        let l = figs.averaged(reference, &stat)?.0 - figs.averaged(patch, &stat)?.0;
        let h = spread(&stat)?;
        bench_logs.push(l);
        per_bench.push(Interval {
            estimate: l.exp(),
            lo: (l - h).exp(),
            hi: (l + h).exp(),
        });
    }
    // The combined figure's spread comes from the replicas' geometric means over benches
    // (for HM too: an approximation, exact with one bench).
    let h = spread(&gm)?;
    let estimate = match agg {
        Aggregate::Geometric => (ref_g - patch_g).exp(),
        Aggregate::Harmonic => {
            let n = bench_logs.len() as f64;
            n / bench_logs.iter().map(|l| (-l).exp()).sum::<f64>()
        }
    };
    Some(RatioInterval {
        overall: Interval {
            estimate,
            lo: estimate * (-h).exp(),
            hi: estimate * h.exp(),
        },
        per_bench,
        rounds: 0,
    })
}

// ---- distributions ------------------------------------------------------------------------

/// ln Γ(x), Lanczos approximation (g = 7, n = 9), for x > 0.
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction.
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(1.0 - x, b, a);
    }
    // Lentz's method.
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        for step in 0..2 {
            let num = if step == 0 {
                m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
            } else {
                -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
            };
            d = 1.0 + num * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = 1.0 + num / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f / a
}

/// P(T <= t) for Student's t with `df` degrees of freedom.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * incomplete_beta(df / (df + t * t), df / 2.0, 0.5);
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The p-quantile of Student's t (p in (0, 1)), by bisection on the CDF.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -student_t_quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while student_t_cdf(hi, df) < p && hi < 1e8 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if student_t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95%: t(0.975, df).
        for (df, want) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (3.0, 3.182),
            (4.0, 2.776),
            (6.0, 2.447),
            (8.0, 2.306),
            (10.0, 2.228),
            (30.0, 2.042),
            (1000.0, 1.962),
        ] {
            let got = student_t_quantile(0.975, df);
            assert!((got - want).abs() < 2e-3, "df {df}: {got} vs {want}");
        }
        assert!((student_t_quantile(0.95, 5.0) - 2.015).abs() < 2e-3);
        assert!((student_t_cdf(0.0, 7.0) - 0.5).abs() < 1e-12);
    }

    fn figs(rows: &[(&str, &[f64])]) -> ReplicaFigures {
        ReplicaFigures {
            log_costs: rows
                .iter()
                .map(|(v, xs)| (v.to_string(), xs.iter().map(|x| vec![x.ln()]).collect()))
                .collect(),
        }
    }

    #[test]
    fn interval_from_pooled_replica_spread() {
        // base at 2.0 in three containers, the patch at 1.0, each container a little off.
        let f = figs(&[
            ("base", &[2.0, 2.04, 1.96]),
            ("human", &[1.0, 1.02, 0.98]),
            ("s0", &[1.0, 0.98, 1.02]),
        ]);
        let iv = replica_interval(&f, "base", "s0", 1, Aggregate::Geometric, 0.95).unwrap();
        assert!((iv.overall.estimate - 2.0).abs() < 1e-3, "{iv:?}");
        assert!(iv.overall.lo < 2.0 && iv.overall.hi > 2.0);
        // The spread: τ² from 3 variants × 2 df; t(6) = 2.447.
        let d = |x: f64| x.ln();
        let dev: f64 = [[2.0, 2.04, 1.96], [1.0, 1.02, 0.98], [1.0, 0.98, 1.02]]
            .iter()
            .map(|r| {
                let m = r.iter().map(|x| d(*x)).sum::<f64>() / 3.0;
                r.iter().map(|x| (d(*x) - m).powi(2)).sum::<f64>()
            })
            .sum();
        let half = 2.447 * (dev / 6.0 * (2.0 / 3.0)).sqrt();
        assert!(((iv.overall.hi / iv.overall.estimate).ln() - half).abs() < 1e-3);
        // More spread between containers: a wider interval.
        let noisy = figs(&[
            ("base", &[2.0, 2.3, 1.7]),
            ("human", &[1.0, 1.15, 0.85]),
            ("s0", &[1.0, 0.85, 1.15]),
        ]);
        let wide = replica_interval(&noisy, "base", "s0", 1, Aggregate::Geometric, 0.95).unwrap();
        assert!(wide.overall.hi - wide.overall.lo > iv.overall.hi - iv.overall.lo);
        // One container each: no degree of freedom, no interval.
        let one = figs(&[("base", &[2.0]), ("s0", &[1.0])]);
        assert!(replica_interval(&one, "base", "s0", 1, Aggregate::Geometric, 0.95).is_none());
    }
}
