//! After each round: the protection held in every run, and every variant printed base's
//! answer.

use std::collections::{BTreeMap, BTreeSet};

use super::{Dropout, Participant, equivalence};
use crate::eval::guarded::{self, Snapshot};
use harness_core::status::Status;
use harness_core::task::{OutputCheck, Task};
use harness_core::timings::{BenchLog, finished_run};

/// After a round: the protection held in every run (a sample may make only the new watched
/// files base made), and every variant's bench printed base's answer.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_round(
    task: &Task,
    variants: &[Participant<'_>],
    log: &BenchLog,
    round: u32,
    bench_seeds: &[Vec<u64>],
    changes: &BTreeMap<String, Snapshot>,
    tails: &BTreeMap<(String, String), String>,
    base_created: &mut BTreeSet<String>,
    dropouts: &mut BTreeMap<String, Dropout>,
) {
    if let (Some(c), Some(base)) = (
        changes.get("base"),
        variants.iter().find(|p| p.label == "base"),
    ) {
        base_created.extend(guarded::created(c, &base.manifest));
    }
    for p in variants {
        let Some(c) = changes.get(&p.label) else {
            continue;
        };
        let reference = p.label == "base" || p.label == "human";
        let allowed = if reference {
            guarded::created(c, &p.manifest)
        } else {
            base_created.clone()
        };
        let found = guarded::violations(c, &p.manifest, &allowed);
        if !found.is_empty() && !dropouts.contains_key(&p.label) {
            dropouts.insert(
                p.label.clone(),
                Dropout {
                    status: if reference {
                        Status::TestFailed
                    } else {
                        Status::PatchRejected
                    },
                    detail: guarded::describe_violations(
                        &format!("while the bench ran (round {round}),"),
                        &found,
                    ),
                },
            );
        }
    }
    for (bench, seeds) in task.benches.iter().zip(bench_seeds) {
        let seed = seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        if matches!(bench.output_check, OutputCheck::Off { .. }) {
            continue;
        }
        let record = |label: &str| finished_run(&log.runs, round, label, &bench.name);
        let digest = |label: &str| record(label).and_then(|r| r.output_digest.clone());
        // A round base sat out (its comparisons were decided) checks against human's answer,
        // which matched base's in every round both ran: no sample run goes unchecked.
        let (reference, expected) = match (digest("base"), digest("human")) {
            (Some(d), _) => ("base", d),
            (None, Some(d)) => ("human", d),
            (None, None) => continue,
        };
        for p in variants.iter().filter(|p| p.label != reference) {
            if dropouts.contains_key(&p.label) {
                continue;
            }
            let Some(got) = digest(&p.label) else {
                continue;
            };
            if got == expected {
                continue;
            }
            let judged = record(reference).zip(record(&p.label));
            if judged.is_some_and(|(r, run)| {
                equivalence::equivalent(&log.equivalence, &bench.name, r, run)
            }) {
                continue;
            }
            let said = judged
                .and_then(|(r, run)| equivalence::refusal(&log.equivalence, &bench.name, r, run))
                .map(|why| format!("; {why}"))
                .unwrap_or_default();
            let what = match &bench.output_check {
                OutputCheck::File { path, .. } => format!("the file {path}"),
                _ => "its output".to_string(),
            };
            let hint = first_difference(
                tails.get(&(reference.to_string(), bench.name.clone())),
                tails.get(&(p.label.clone(), bench.name.clone())),
            );
            let detail = if p.label == "human" {
                format!(
                    "bench `{}`: human's {what} differs from base's in round {round} (seeds {seed}){hint}{said}; \
                     the output check needs a deterministic answer (lines to leave out: ignore_lines; \
                     or check_output = false with a reason)",
                    bench.name
                )
            } else {
                format!(
                    "bench `{}`: {what} differs from {reference}'s in round {round} (HARNESS_BENCH_SEED of its repetitions: {seed}){hint}{said}: \
                     the bench did not compute base's answer (it failed, exited early or printed a remembered one)",
                    bench.name
                )
            };
            dropouts.insert(
                p.label.clone(),
                Dropout {
                    status: Status::TestFailed,
                    detail,
                },
            );
        }
    }
}

/// ", first difference at line N: base `...`, this `...`", when the tails show it.
fn first_difference(base: Option<&String>, other: Option<&String>) -> String {
    let (Some(a), Some(b)) = (base, other) else {
        return String::new();
    };
    let cut = |s: &str| -> String {
        let s: String = s.chars().take(80).collect();
        s
    };
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i), lb.get(i));
        if x != y {
            return format!(
                ", first difference at line {}: base `{}`, this `{}`",
                i + 1,
                x.map(|s| cut(s)).unwrap_or_else(|| "(end)".into()),
                y.map(|s| cut(s)).unwrap_or_else(|| "(end)".into())
            );
        }
    }
    String::new()
}
