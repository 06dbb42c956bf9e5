//! `--partition I/N`: the selected tasks split into N parts of about equal estimated cost,
//! the same way on every machine, so N runners (CI jobs) can share one run and `harness
//! merge` can put it back together.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::core::task::Task;

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

/// A hash over every file (path and bytes) and symlink (path and target) in the folders of
/// the given tasks, in order.
pub fn selection_digest(tasks: &[&Task]) -> Result<String> {
    let mut h = Sha256::new();
    for t in tasks {
        h.update(format!("task {}\n", t.id).as_bytes());
        hash_tree(&t.dir, &t.dir, &mut h)?;
    }
    Ok(hex::encode(h.finalize()))
}

fn hash_tree(root: &Path, dir: &Path, h: &mut Sha256) -> Result<()> {
    let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("{}: cannot list", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let kind = e
            .file_type()
            .with_context(|| format!("{}: cannot stat", path.display()))?;
        if kind.is_symlink() {
            let target = std::fs::read_link(&path)
                .with_context(|| format!("{}: cannot read link", path.display()))?;
            h.update(format!("link {rel} {}\n", target.display()).as_bytes());
        } else if kind.is_dir() {
            h.update(format!("dir {rel}\n").as_bytes());
            hash_tree(root, &path, h)?;
        } else if kind.is_file() {
            let bytes =
                std::fs::read(&path).with_context(|| format!("{}: cannot read", path.display()))?;
            h.update(format!("file {rel} {}\n", hex::encode(Sha256::digest(&bytes))).as_bytes());
        } else {
            bail!("{}: neither a file, a folder nor a symlink", path.display());
        }
    }
    Ok(())
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

    fn task(root: &Path, id: &str, runs: u32, timeout: u32) -> Task {
        let dir = root.join(id);
        std::fs::create_dir_all(dir.join("repo")).unwrap();
        std::fs::write(dir.join("repo/bench.py"), "print(1)\n").unwrap();
        std::fs::write(dir.join("human.patch"), "").unwrap();
        let toml = format!(
            "[source]\npath = \"repo\"\n[human]\npatch = \"human.patch\"\n[test]\ncommand = \"true\"\n\
             [[bench]]\nname = \"b\"\ncommand = \"python3 bench.py\"\nwarmups = 1\nruns = {runs}\ntimeout = {timeout}\n"
        );
        std::fs::write(dir.join("task.toml"), toml).unwrap();
        Task::load(&dir).unwrap()
    }

    #[test]
    fn cost_from_the_task_file_and_samples() {
        let d = tempfile::tempdir().unwrap();
        let small = task(d.path(), "small", 4, 10);
        let big = task(d.path(), "big", 9, 60);
        // (1 warm-up + 4 runs) x 10 s x (2 + 3 variants) + the build constant.
        assert_eq!(task_cost(&small, 3), 5 * 10_000 * 5 + 60_000);
        assert!(task_cost(&small, 5) > task_cost(&small, 1));
        assert!(task_cost(&big, 1) > task_cost(&small, 5));
        let tasks = [&small, &big];
        let one = select(&tasks, |_| 1, Partition { index: 1, count: 2 });
        let two = select(&tasks, |_| 1, Partition { index: 2, count: 2 });
        assert_eq!(
            one.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["big"]
        );
        assert_eq!(
            two.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["small"]
        );
        let three = select(&tasks, |_| 1, Partition { index: 3, count: 3 });
        assert!(three.is_empty());

        let before = selection_digest(&tasks).unwrap();
        assert_eq!(before, selection_digest(&tasks).unwrap());
        std::fs::write(d.path().join("big/repo/bench.py"), "print(2)\n").unwrap();
        assert_ne!(before, selection_digest(&tasks).unwrap());
    }
}
