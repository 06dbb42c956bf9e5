//! The measurement's budget rule: who runs a round, whether a run still fits before the
//! deadline, how many rounds a sample can still afford, and when more containers would
//! decide the open samples sooner than more rounds (see `core::allocation`).

use std::time::Instant;

use super::{Measurement, is_reference};
use harness_core::allocation::{self, Needs};

/// Containers added to a variant at a time when its open samples want more.
pub const GROW_STEP: usize = 3;

impl Measurement<'_> {
    /// Who runs this round: the samples still open, and base and human only while an open
    /// sample still needs them (before any judgement, both).
    pub(super) fn members(&self, left: &[usize]) -> Vec<usize> {
        let variants = self.input.variants;
        let open = left.iter().map(|&i| &variants[i].label).chain(
            self.input
                .shared
                .keys()
                .filter(|l| !self.p.dropouts.contains_key(*l) && !self.p.done.contains_key(*l)),
        );
        let wanted = allocation::references_wanted(open.map(|l| self.p.needs.get(l)));
        (0..variants.len())
            .filter(|&i| match variants[i].label.as_str() {
                "base" => wanted.base,
                "human" => wanted.human,
                _ => left.contains(&i),
            })
            .collect()
    }

    /// Median seconds one measured exec of this variant's bench took so far (the harness's
    /// own overhead included); from its warmups (one repetition each) times the repetitions
    /// before it was measured; None before it ran.
    pub(super) fn exec_seconds(&self, label: &str, bench: &str) -> Option<f64> {
        let median = |warmup: bool| {
            let mut secs: Vec<f64> = self
                .p
                .log
                .runs
                .iter()
                .filter(|r| r.variant == label && r.bench == bench && r.warmup == warmup)
                .filter_map(|r| r.exec_s)
                .collect();
            secs.sort_by(f64::total_cmp);
            secs.get(secs.len() / 2).copied()
        };
        median(false).or_else(|| median(true).map(|s| s * self.input.schedule.repetitions as f64))
    }

    /// Whether the variant's next run of this bench is expected to end before the deadline
    /// (a variant that has not run yet is given the benefit of the doubt).
    pub(super) fn fits(&self, label: &str, bench: &str) -> bool {
        let left = self
            .p
            .deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        self.exec_seconds(label, bench).is_none_or(|s| s <= left)
    }

    /// Rounds that still fit for a sample run with only the references it needs: by the
    /// round budget and by the time left at its runs' pace. None before every one of them ran.
    pub(super) fn rounds_that_fit(&self, label: &str, needs: Needs) -> Option<f64> {
        let source = self.p.log.runs_of(label).to_string();
        let mut per_round = 0.0;
        let refs = [("base", needs.base), ("human", needs.human)];
        for v in
            std::iter::once(source.as_str()).chain(refs.iter().filter(|(_, n)| *n).map(|(r, _)| *r))
        {
            for bench in &self.input.task.benches {
                per_round += self.exec_seconds(v, &bench.name)?;
            }
        }
        let schedule = &self.input.schedule;
        let by_count = (schedule.warmup_rounds + schedule.max_rounds).saturating_sub(self.p.round);
        let time_left = self
            .p
            .deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        Some((by_count as f64).min(time_left / per_round.max(1e-3)))
    }

    /// The container a variant's run goes to: in the warmup rounds the round's (each warmed
    /// once), then the one with the fewest measured runs (the lowest on a tie), so the
    /// containers added during a measurement are measured first.
    pub(super) fn replica_for(&self, p: &super::Participant<'_>) -> usize {
        let n = p.sandboxes.len().max(1);
        if self.p.round < self.input.schedule.warmup_rounds {
            return self.p.round as usize % n;
        }
        let mut counts = vec![0usize; n];
        for r in self
            .p
            .log
            .runs
            .iter()
            .filter(|r| r.variant == p.label && !r.warmup)
        {
            if let Some(c) = counts.get_mut(r.replica as usize) {
                *c += 1;
            }
        }
        (0..n).min_by_key(|&k| (counts[k], k)).unwrap_or(0)
    }

    /// How much narrower a sample's intervals can get from containers still to be added:
    /// sqrt(now / most) when the count may grow, else 1.
    pub(super) fn width_scale(&self, label: &str) -> f64 {
        let schedule = &self.input.schedule;
        let now = self
            .input
            .variants
            .iter()
            .find(|p| p.label == self.p.log.runs_of(label))
            .map(|p| p.sandboxes.len())
            .unwrap_or(1)
            .max(1);
        let most = schedule.max_replicas.max(schedule.replicas) as usize;
        if !schedule.criterion.adaptive() || now >= most {
            return 1.0;
        }
        (now as f64 / most as f64).sqrt()
    }

    /// The variants to give more containers before the next round, if any: under strict,
    /// when growth is allowed (the container count was not fixed by the task or the command
    /// line), an open sample with intervals has had every one of its containers measured at
    /// least twice (further rounds there re-measure the same containers' speed offsets, which
    /// is what keeps the intervals of equal code wide), and its rounds that still fit would
    /// give the new containers two runs each (they are measured first: `replica_for`).
    pub(super) fn wants_containers(&self, left: &[usize]) -> Option<Vec<String>> {
        let schedule = &self.input.schedule;
        if !schedule.criterion.adaptive() || schedule.max_replicas <= schedule.replicas {
            return None;
        }
        let variants = self.input.variants;
        let measured = self.p.round.saturating_sub(schedule.warmup_rounds);
        let mut open: Vec<String> = Vec::new();
        for &i in left {
            let p = &variants[i];
            let containers = p.sandboxes.len();
            let Some(needs) = self.p.needs.get(&p.label) else {
                continue;
            };
            let fit = self.rounds_that_fit(&p.label, *needs).unwrap_or(0.0);
            if containers < schedule.max_replicas as usize
                && measured as usize >= 2 * containers
                && fit >= (2 * GROW_STEP) as f64
            {
                open.push(p.label.clone());
            }
        }
        if open.is_empty() {
            return None;
        }
        let wanted = allocation::references_wanted(open.iter().map(|l| self.p.needs.get(l)));
        let max = schedule.max_replicas as usize;
        let mut labels: Vec<String> = variants
            .iter()
            .filter(|p| match p.label.as_str() {
                "base" => wanted.base,
                "human" => wanted.human,
                _ => open.contains(&p.label),
            })
            .filter(|p| p.sandboxes.len() < max)
            .map(|p| p.label.clone())
            .collect();
        labels.sort_by_key(|l| !is_reference(l));
        Some(labels)
    }
}
