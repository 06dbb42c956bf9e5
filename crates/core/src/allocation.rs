//! Where the next rounds of a strict measurement go: to the samples a few more rounds can
//! decide, with only the reference variants those samples still need.
//!
//! An interval's half-width shrinks about as 1/sqrt(rounds), so a comparison whose estimate
//! sits a distance d (in log units) from its threshold, with half-width h after n rounds,
//! needs about n (h/d)^2 rounds in all. A sample whose projection is far beyond what the
//! budget has left is stopped (`inconclusive`, saying why) rather than spending the budget
//! that the others, and the whole run's wall time, could use.

use crate::metrics::Thresholds;
use crate::stats::{Decision, Interval, decide};
use crate::verdict::Judgement;

/// A projection must exceed what fits by this factor before a sample is given up: the
/// projection is itself noisy, and stopping a sample that would have decided costs a
/// verdict, while running it on costs only time.
pub const GIVE_UP_FACTOR: f64 = 2.0;

/// The reference variants an undecided sample still needs measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    pub base: bool,
    pub human: bool,
}

impl Needs {
    pub fn any(&self) -> bool {
        self.base || self.human
    }
}

/// Which comparisons of a judgement are still open: base while opt_base is undecided;
/// human while the comparison with human is undecided and opt_commit is too.
pub fn needs(j: &Judgement, th: &Thresholds) -> Needs {
    let over_human_open = j
        .intervals
        .as_ref()
        .map(|iv| decide(&iv.hm_speedup_patch_commit, th.opt_thresh, false) == Decision::Undecided)
        .unwrap_or(true);
    Needs {
        base: j.opt_base == Decision::Undecided,
        human: j.opt_commit == Decision::Undecided && over_human_open,
    }
}

/// The references a round needs: those any open sample still needs; both while an open
/// sample has no judgement yet (`None`).
pub fn references_wanted<'a>(open: impl IntoIterator<Item = Option<&'a Needs>>) -> Needs {
    let mut wanted = Needs::default();
    for n in open {
        let n = n.copied().unwrap_or(Needs {
            base: true,
            human: true,
        });
        wanted.base |= n.base;
        wanted.human |= n.human;
    }
    wanted
}

/// Rounds in all one interval needs to leave `threshold`'s side it is not on yet, by the
/// 1/sqrt(n) rule; None when its estimate sits on the threshold (no number of rounds
/// decides it) or it has no width.
pub fn rounds_needed(iv: &Interval, threshold: f64, rounds: u32, width_scale: f64) -> Option<f64> {
    let (est, lo, hi) = (iv.estimate.ln(), iv.lo.ln(), iv.hi.ln());
    let distance = (est - threshold.ln()).abs();
    let half = width_scale * (hi - lo) / 2.0;
    if !(distance > 0.0 && half.is_finite() && half > 0.0) {
        return None;
    }
    Some(rounds as f64 * (half / distance).powi(2))
}

/// More rounds the sample needs for every open comparison to be decided: the largest
/// projection among them; None when one of them cannot be projected (no interval yet, or an
/// estimate on its threshold). `width_scale` (at most 1) is how much narrower the intervals
/// will be for reasons other than rounds: containers still to be added (a replicated
/// interval narrows as sqrt(1/containers)).
pub fn rounds_to_decide(j: &Judgement, th: &Thresholds, width_scale: f64) -> Option<f64> {
    let iv = j.intervals.as_ref()?;
    let open = needs(j, th);
    let mut most: f64 = 0.0;
    if open.base {
        most = most.max(rounds_needed(
            &iv.gm_speedup_patch_base,
            th.min_speedup,
            j.rounds_with_base.len() as u32,
            width_scale,
        )?);
    }
    if open.human {
        most = most.max(rounds_needed(
            &iv.hm_speedup_patch_commit,
            th.opt_thresh,
            j.rounds_with_human.len() as u32,
            width_scale,
        )?);
    }
    Some((most - j.rounds() as f64).max(0.0))
}

/// Why an undecided sample is not worth more rounds, if it is not: its projection exceeds
/// [`GIVE_UP_FACTOR`] times the rounds that still fit (by count and by time).
pub fn give_up(
    j: &Judgement,
    th: &Thresholds,
    rounds_that_fit: f64,
    width_scale: f64,
) -> Option<String> {
    let iv = j.intervals.as_ref()?;
    // An estimate exactly on a threshold: only a change of estimate can decide it.
    let more = rounds_to_decide(j, th, width_scale).unwrap_or(f64::INFINITY);
    if more <= GIVE_UP_FACTOR * rounds_that_fit {
        return None;
    }
    let projection = if more.is_finite() {
        format!("about {more:.0} more rounds")
    } else {
        "more rounds than any budget".to_string()
    };
    Some(format!(
        "stopped undecided after {} rounds with base and {} with human: its intervals (GM over \
         base {:.3} [{:.3}, {:.3}], HM vs human {:.3} [{:.3}, {:.3}]) would need {projection} \
         to be decided, and about {rounds_that_fit:.0} fit in what is left of the budget",
        j.rounds_with_base.len(),
        j.rounds_with_human.len(),
        iv.gm_speedup_patch_base.estimate,
        iv.gm_speedup_patch_base.lo,
        iv.gm_speedup_patch_base.hi,
        iv.hm_speedup_patch_commit.estimate,
        iv.hm_speedup_patch_commit.lo,
        iv.hm_speedup_patch_commit.hi,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::SpeedupIntervals;

    fn iv(est: f64, lo: f64, hi: f64) -> Interval {
        Interval {
            estimate: est,
            lo,
            hi,
        }
    }

    fn judgement(gm: Interval, hm: Interval, rounds: u32) -> Judgement {
        let th = Thresholds {
            min_speedup: 1.2,
            opt_thresh: 0.95,
        };
        let d = |x: &Interval, t: f64, inc: bool| decide(x, t, inc);
        let base = d(&gm, th.min_speedup, true);
        let human = d(&hm, th.opt_thresh, false);
        let commit = match (base, human) {
            (Decision::No, _) | (_, Decision::No) => Decision::No,
            (Decision::Yes, Decision::Yes) => Decision::Yes,
            _ => Decision::Undecided,
        };
        Judgement {
            rounds_with_base: (0..rounds).collect(),
            rounds_with_human: (0..rounds).collect(),
            bench_means: Vec::new(),
            stats: None,
            intervals: Some(SpeedupIntervals {
                confidence: 0.95,
                resamples: 10,
                seed: 0,
                rounds: rounds as usize,
                rounds_with_human: rounds as usize,
                gm_speedup_patch_base: gm,
                hm_speedup_patch_commit: hm,
                gm_speedup_patch_commit: hm,
                per_bench: Default::default(),
            }),
            opt_base: base,
            opt_commit: commit,
            gso_times: None,
        }
    }

    const TH: Thresholds = Thresholds {
        min_speedup: 1.2,
        opt_thresh: 0.95,
    };

    #[test]
    fn only_the_open_comparisons_need_their_reference() {
        // Clearly over base, undecided against human: human only.
        let j = judgement(iv(1.4, 1.3, 1.5), iv(1.0, 0.9, 1.1), 10);
        assert_eq!(
            needs(&j, &TH),
            Needs {
                base: false,
                human: true
            }
        );
        // Undecided over base, clearly as good as human: base only.
        let j = judgement(iv(1.25, 1.1, 1.4), iv(1.2, 1.1, 1.3), 10);
        assert_eq!(
            needs(&j, &TH),
            Needs {
                base: true,
                human: false
            }
        );
        // Decided both ways: nothing.
        let j = judgement(iv(1.5, 1.4, 1.6), iv(1.2, 1.1, 1.3), 10);
        assert!(!needs(&j, &TH).any());
    }

    #[test]
    fn base_and_human_run_only_while_an_open_sample_needs_them() {
        let human_only = Needs {
            base: false,
            human: true,
        };
        let base_only = Needs {
            base: true,
            human: false,
        };
        assert_eq!(references_wanted([Some(&human_only)]), human_only);
        assert_eq!(
            references_wanted([Some(&human_only), Some(&base_only)]),
            Needs {
                base: true,
                human: true
            }
        );
        assert_eq!(
            references_wanted([Some(&human_only), None]),
            Needs {
                base: true,
                human: true
            },
            "a sample not judged yet needs both"
        );
        assert!(
            !references_wanted([]).any(),
            "no open sample: no reference runs"
        );
    }

    #[test]
    fn projection_follows_the_square_root_rule() {
        // HM 1.0 with half-width ln(1.1) after 10 rounds, threshold 0.95 at distance
        // ln(1/0.95): (0.0953/0.0513)^2 * 10 = 34.5 rounds in all, 24.5 more.
        let j = judgement(iv(1.4, 1.3, 1.5), iv(1.0, 1.0 / 1.1, 1.1), 10);
        let more = rounds_to_decide(&j, &TH, 1.0).unwrap_or(f64::NAN);
        assert!((more - 24.5).abs() < 0.2, "{more}");
        assert!(give_up(&j, &TH, 20.0, 1.0).is_none(), "24.5 <= 2 x 20");
        let why = give_up(&j, &TH, 10.0, 1.0).unwrap_or_default();
        assert!(why.contains("about 25 more rounds"), "{why}");
        // With containers still to come (5 now, 11 at most) the interval will be narrower:
        // (0.0953 x sqrt(5/11) / 0.0513)^2 x 10 = 15.7 rounds in all, 5.7 more.
        let scale = (5.0f64 / 11.0).sqrt();
        let more = rounds_to_decide(&j, &TH, scale).unwrap_or(f64::NAN);
        assert!((more - 5.7).abs() < 0.2, "{more}");
        assert!(give_up(&j, &TH, 10.0, scale).is_none());
        // An estimate on its threshold is never projected to decide.
        let j = judgement(iv(1.4, 1.3, 1.5), iv(0.95, 0.9, 1.0), 10);
        assert_eq!(rounds_to_decide(&j, &TH, 1.0), None);
        assert!(give_up(&j, &TH, 1000.0, 1.0).is_some());
    }
}
