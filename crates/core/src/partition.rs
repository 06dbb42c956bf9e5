//! `--partition I/N`: the selected tasks split into N parts of about equal estimated cost,
//! the same way on every machine, so N runners (CI jobs) can share one run and `harness
//! merge` can put it back together.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::task::Task;

/// Part `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub index: usize,
    pub count: usize,
}

impl Partition {
    /// Reads `I/N`, 1 <= I <= N; errors name the flag.
    pub fn parse(text: &str) -> Result<Partition> {
        let bad = || {
            anyhow::anyhow!(
                "--partition {text:?}: expected I/N with 1 <= I <= N (e.g. 2/4 for the second of four parts)"
            )
        };
        let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Partition { index, count })
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What run.json of a partition run records, so that `harness merge` can check that the
/// parts belong together and that none is missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionInfo {
    pub index: usize,
    pub count: usize,
    /// Every instance the run selected before it was split: the merged run's instances.
    pub selected_instance_ids: Vec<String>,
    /// A hash of the files of every selected task's folder: partitions made from different
    /// versions of the dataset do not merge.
    pub selection_digest: String,
    /// `id=digest` of this part's tasks (source material digests), from which the merged
    /// run's `dataset_digest` is computed as a single run computes it.
    pub task_digests: Vec<String>,
}

/// Seconds charged to every task for its image (built or found cached) and containers.
const BUILD_SECONDS: u64 = 60;

/// Estimated cost of a task, in milliseconds: every variant (base, human and the samples)
/// runs every bench's warm-ups and runs, each charged at the bench's timeout (the task
/// author's bound on one run; what a run really takes is unknown before it runs), plus a
/// constant for the image and containers.
pub fn task_cost(task: &Task, samples: usize) -> u64 {
    let variants = 2 + samples as u64;
    let per_variant: u64 = task
        .benches
        .iter()
        .map(|b| {
            let runs = u64::from(b.warmups) + u64::from(b.runs);
            runs.saturating_mul(b.timeout.as_millis().min(u128::from(u64::MAX)) as u64)
        })
        .fold(0u64, u64::saturating_add);
    variants
        .saturating_mul(per_variant)
        .saturating_add(BUILD_SECONDS * 1000)
}

/// Greedy longest-first assignment: items by cost descending (ties by id ascending), each to
/// the part with the least cost so far (ties: the lowest index). Returns, for each item in
/// the order given, its part (1-based).
pub fn assign(items: &[(String, u64)], count: usize) -> Vec<usize> {
    let count = count.max(1);
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| {
        items[b]
            .1
            .cmp(&items[a].1)
            .then_with(|| items[a].0.cmp(&items[b].0))
    });
    let mut load = vec![0u64; count];
    let mut part = vec![0usize; items.len()];
    for i in order {
        let lightest = (0..count).min_by_key(|&p| (load[p], p)).unwrap_or(0);
        load[lightest] = load[lightest].saturating_add(items[i].1);
        part[i] = lightest + 1;
    }
    part
}

/// The tasks of part `p`, in the order given. `samples(id)` is how many samples of the
/// instance the run evaluates.
pub fn select<'a>(
    tasks: &[&'a Task],
    samples: impl Fn(&str) -> usize,
    p: Partition,
) -> Vec<&'a Task> {
    let items: Vec<(String, u64)> = tasks
        .iter()
        .map(|t| (t.id.clone(), task_cost(t, samples(&t.id))))
        .collect();
    let parts = assign(&items, p.count);
    tasks
        .iter()
        .zip(parts)
        .filter(|(_, part)| *part == p.index)
        .map(|(t, _)| *t)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn items(costs: &[(&str, u64)]) -> Vec<(String, u64)> {
        costs.iter().map(|(i, c)| (i.to_string(), *c)).collect()
    }

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            Partition::parse("2/4").unwrap(),
            Partition { index: 2, count: 4 }
        );
        assert_eq!(Partition::parse(" 1/1 ").unwrap().to_string(), "1/1");
        for bad in ["0/2", "3/2", "1/0", "1", "a/2", "1/2/3", "-1/2", ""] {
            let e = Partition::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--partition"), "{bad}: {e}");
        }
    }

    #[test]
    fn balanced_by_cost_not_count() {
        // One heavy task and four light ones: the heavy one is a part of its own.
        let it = items(&[("a", 10), ("b", 10), ("c", 10), ("d", 10), ("heavy", 40)]);
        let parts = assign(&it, 2);
        assert_eq!(parts, vec![2, 2, 2, 2, 1]);
        // Ties by id: equal costs go round-robin in id order.
        let it = items(&[("x", 5), ("w", 5), ("y", 5)]);
        assert_eq!(assign(&it, 3), vec![2, 1, 3]);
    }

    #[test]
    fn union_is_the_selection_without_overlap_and_the_split_is_stable() {
        let it: Vec<(String, u64)> = (0..23)
            .map(|i| (format!("task-{i:02}"), (i * 7919 % 13) as u64 * 1000 + 500))
            .collect();
        for count in [1, 2, 3, 5, 23, 30] {
            let parts = assign(&it, count);
            assert_eq!(parts, assign(&it, count), "same inputs, same split");
            let mut seen = BTreeSet::new();
            for p in 1..=count {
                for (i, _) in parts.iter().enumerate().filter(|(_, q)| **q == p) {
                    assert!(seen.insert(it[i].0.clone()), "{} twice", it[i].0);
                }
            }
            let all: BTreeSet<String> = it.iter().map(|(i, _)| i.clone()).collect();
            assert_eq!(seen, all, "count {count}");
            // Greedy longest-first: no part exceeds the mean by more than the largest item.
            let mut load = vec![0u64; count];
            for (i, p) in parts.iter().enumerate() {
                load[p - 1] += it[i].1;
            }
            let total: u64 = load.iter().sum();
            let largest = it.iter().map(|(_, c)| *c).max().unwrap();
            for l in &load {
                assert!(*l <= total / count as u64 + largest, "{load:?}");
            }
        }
        // More parts than tasks: the extra parts are empty, not an error.
        let parts = assign(&items(&[("a", 1), ("b", 2)]), 4);
        assert_eq!(parts, vec![2, 1]);
        assert!(assign(&[], 3).is_empty());
    }
}
