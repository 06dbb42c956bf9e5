//! The rounds of a bench log in which a variant and its reference both have a figure: what
//! every speedup is computed over.

use crate::stats::RoundPair;
use crate::timings::BenchLog;

/// Rounds in which `reference` and `variant` both have a valid figure for every bench, in
/// round order. Each comparison is paired on its own, so a run set aside for human does
/// not cost the comparison with base its round.
pub fn paired_rounds(log: &BenchLog, reference: &str, variant: &str) -> Vec<(u32, RoundPair)> {
    let variant = log.runs_of(variant);
    let mut rounds: Vec<u32> = log
        .runs
        .iter()
        .filter(|r| r.variant == variant)
        .map(|r| r.round)
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    let value = |v: &str, round: u32, bench: &str| {
        log.runs
            .iter()
            .find(|r| r.variant == v && r.round == round && r.bench == bench)
            .filter(|r| r.counts())
            .and_then(|r| r.value)
    };
    let mut out = Vec::new();
    for round in rounds {
        let mut pair = RoundPair {
            reference: vec![],
            patch: vec![],
        };
        let complete = log.benches.iter().all(|b| {
            match (
                value(reference, round, &b.name),
                value(variant, round, &b.name),
            ) {
                (Some(x), Some(y)) => {
                    pair.reference.push(x);
                    pair.patch.push(y);
                    true
                }
                _ => false,
            }
        });
        if complete {
            out.push((round, pair));
        }
    }
    out
}

/// Round pairs with the round number each came from.
pub type NumberedRounds = Vec<(u32, RoundPair)>;

/// GSO's rule compares means, so every mean of one verdict comes from the same rounds: those
/// in which base, human and the variant all have a figure for every bench. A sample decided
/// early under strict and regraded under gso is compared with base's runs of its own rounds,
/// not with base's later ones, and its interval is bootstrapped over the same rounds.
pub fn common_rounds(log: &BenchLog, variant: &str) -> (NumberedRounds, NumberedRounds) {
    let with_base = paired_rounds(log, "base", variant);
    let with_human = paired_rounds(log, "human", variant);
    let in_base: std::collections::BTreeSet<u32> = with_base.iter().map(|(r, _)| *r).collect();
    let in_human: std::collections::BTreeSet<u32> = with_human.iter().map(|(r, _)| *r).collect();
    (
        with_base
            .into_iter()
            .filter(|(r, _)| in_human.contains(r))
            .collect(),
        with_human
            .into_iter()
            .filter(|(r, _)| in_base.contains(r))
            .collect(),
    )
}
