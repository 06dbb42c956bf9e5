//! A fan-out seen as one run: the partition runs of one opt-at-k run (`--partition I/N`,
//! from CI jobs, a Slurm array or Kubernetes pods) grouped, and every part 1..N said to be
//! done, failed, unfinished or missing. Used by `harness status` and `harness merge` on a
//! folder that holds the parts.

use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use super::run_state::RunStatus;
use crate::store::run_folder::RunDir;

/// Where each part of one fanned-out run stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FanoutStatus {
    pub model: String,
    pub k: usize,
    pub parts: usize,
    /// Complete: every sample has a result that is not `error`.
    pub done: Vec<usize>,
    /// Ended with samples that are `error` or not run: rerun the part (it resumes).
    pub failed: Vec<usize>,
    /// No recorded end: still running, or stopped without a word (killed).
    pub unfinished: Vec<usize>,
    /// No run folder yet: not started, or it failed before writing one.
    pub missing: Vec<usize>,
}

/// The fan-outs among `runs`: partition runs grouped by model, K and part count.
pub fn fanouts(runs: &[RunStatus]) -> Vec<FanoutStatus> {
    let mut out: Vec<FanoutStatus> = Vec::new();
    for r in runs {
        let Some([index, count]) = r.partition else {
            continue;
        };
        let pos = match out
            .iter()
            .position(|f| f.model == r.model && f.k == r.k && f.parts == count)
        {
            Some(p) => p,
            None => {
                out.push(FanoutStatus {
                    model: r.model.clone(),
                    k: r.k,
                    parts: count,
                    ..FanoutStatus::default()
                });
                out.len() - 1
            }
        };
        let f = &mut out[pos];
        if r.complete && r.finished {
            f.done.push(index);
        } else if r.finished {
            f.failed.push(index);
        } else {
            f.unfinished.push(index);
        }
    }
    for f in &mut out {
        for list in [&mut f.done, &mut f.failed, &mut f.unfinished] {
            list.sort_unstable();
            list.dedup();
        }
        let seen: Vec<usize> = f
            .done
            .iter()
            .chain(&f.failed)
            .chain(&f.unfinished)
            .copied()
            .collect();
        f.missing = (1..=f.parts).filter(|i| !seen.contains(i)).collect();
    }
    out
}

fn list(xs: &[usize]) -> String {
    if xs.is_empty() {
        "-".into()
    } else {
        xs.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The lines `harness status` prints for a fan-out.
pub fn render(f: &FanoutStatus) -> String {
    let mut out = format!(
        "fan-out of {} (K={}), {} parts: done {}; failed {}; running or stopped {}; missing {}\n",
        crate::core::text::for_terminal(&f.model),
        f.k,
        f.parts,
        list(&f.done),
        list(&f.failed),
        list(&f.unfinished),
        list(&f.missing)
    );
    if f.done.len() == f.parts {
        out.push_str("every part is done: harness merge can put them together\n");
    } else if !f.failed.is_empty() || !f.missing.is_empty() {
        out.push_str("rerun the failed or missing parts (the same command with --partition I/N resumes; under Slurm: sbatch --array=I <fan-out>/slurm/array.sbatch)\n");
    }
    out
}

/// The partition run folders the arguments name: a run folder as it is, a folder without
/// run.json that holds partition runs (a fan-out) as those runs (a merged run beside them
/// is not one), anything else as it is (merge names what is wrong with it).
pub fn partition_folders(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for d in dirs {
        if d.join(crate::store::run_folder::names::RUN_JSON).is_file() {
            out.push(d.clone());
            continue;
        }
        let parts: Vec<PathBuf> = super::run_state::run_folders(d)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| {
                RunDir { root: p.clone() }
                    .load_run_info()
                    .is_ok_and(|i| i.partition.is_some())
            })
            .collect();
        if parts.is_empty() {
            // Not a fan-out: merge says what is wrong with it as a run folder.
            out.push(d.clone());
        } else {
            out.extend(parts);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(index: usize, count: usize, complete: bool, finished: bool) -> RunStatus {
        RunStatus {
            run_dir: PathBuf::from(format!("p{index}")),
            run_id: format!("m-k1-part{index}of{count}"),
            model: "m".into(),
            k: 1,
            totals: Default::default(),
            finished_instances: 0,
            interrupted: None,
            complete,
            expected_unknown: false,
            partition: Some([index, count]),
            finished,
            instances: Vec::new(),
        }
    }

    #[test]
    fn every_part_is_done_failed_unfinished_or_missing() {
        let runs = vec![
            part(1, 4, true, true),
            part(2, 4, false, true),
            part(4, 4, false, false),
        ];
        let f = &fanouts(&runs)[0];
        assert_eq!((f.done.clone(), f.failed.clone()), (vec![1], vec![2]));
        assert_eq!(
            (f.unfinished.clone(), f.missing.clone()),
            (vec![4], vec![3])
        );
        assert!(render(f).contains("missing 3"), "{}", render(f));
        let all = fanouts(&[part(1, 2, true, true), part(2, 2, true, true)]);
        assert!(render(&all[0]).contains("every part is done"));
    }
}
