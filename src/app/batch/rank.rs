//! The entries' results and their ranking: plain functions over plain data (no Docker).

use std::path::Path;

use serde::Serialize;

use crate::app::batch::EntryPlan;

/// Where an entry got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Every sample has a result (its reports say `complete: true`).
    Complete,
    /// It ran but is incomplete (interrupted, or samples ended `error`): its figures count
    /// what is missing as failures.
    Partial,
    /// Its run stopped with an error before it had reports.
    Failed,
    /// The batch stopped before it.
    NotRun,
}

impl EntryState {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Complete => "complete",
            EntryState::Partial => "partial",
            EntryState::Failed => "failed",
            EntryState::NotRun => "not run",
        }
    }
}

/// An entry's figures, as its own reports give them: percents with two decimals, intervals
/// the reports' 95% bootstrap intervals over instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// Opt@K: the opt@K report's `score`.
    pub opt_at_k: f64,
    /// `opt_at_k_ci` at k = K (Opt@K is opt@k at k = K).
    pub opt_at_k_ci: [f64; 2],
    pub pass_at_1: f64,
    pub pass_at_1_ci: [f64; 2],
    /// pass@k at k = K.
    pub pass_at_k: f64,
    pub pass_at_k_ci: [f64; 2],
    pub opt_commit: usize,
    pub opt_base: usize,
    pub instances: usize,
    /// What its agents spent, when its predictions rows say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<crate::core::spend::SpendTotals>,
}

impl Figures {
    pub fn from_summary(summary: &crate::core::summary::Summary) -> Figures {
        let k = summary.info.k;
        let t = &summary.totals;
        let ci = |xs: &[[f64; 2]], k: usize| -> [f64; 2] {
            xs.get(k.wrapping_sub(1))
                .map(|[lo, hi]| {
                    [
                        crate::core::metrics::python_round(lo * 100.0, 2),
                        crate::core::metrics::python_round(hi * 100.0, 2),
                    ]
                })
                .unwrap_or([0.0, 0.0])
        };
        // As the opt@K report writes its curves.
        let pass = |k: usize| {
            t.pass_at_k
                .get(k.wrapping_sub(1))
                .map(|v| crate::core::metrics::python_round(v * 100.0, 2))
                .unwrap_or(0.0)
        };
        Figures {
            opt_at_k: crate::app::ci::value(summary, crate::app::ci::Metric::Opt, k).unwrap_or(0.0),
            opt_at_k_ci: ci(&t.opt_at_k_ci, k),
            pass_at_1: pass(1),
            pass_at_1_ci: ci(&t.pass_at_k_ci, 1),
            pass_at_k: pass(k),
            pass_at_k_ci: ci(&t.pass_at_k_ci, k),
            opt_commit: t.opt_commit,
            opt_base: t.opt_base,
            instances: t.total_instances,
            agents: t.agents.clone(),
        }
    }
}

/// One entry's outcome, as batch.json lists it.
#[derive(Debug, Clone, Serialize)]
pub struct EntryResult {
    /// Position in the config file (1-based).
    pub index: usize,
    pub label: String,
    pub model: String,
    pub run_id: String,
    /// The entry's run folder.
    pub run_dir: String,
    pub k: usize,
    pub dataset: String,
    /// The dataset's canonical path: two spellings of one folder compare equal.
    #[serde(skip)]
    pub dataset_key: String,
    /// The instances it covers (its Opt@K's denominator).
    pub instance_ids: Vec<String>,
    pub state: EntryState,
    /// Set by [`rank`]: entries compare only within their group (same dataset, instances
    /// and K).
    pub group: usize,
    /// Set by [`rank`]: 1 is best; equal figures share a rank; None for an entry that is
    /// not complete.
    pub rank: Option<usize>,
    pub figures: Option<Figures>,
    pub interrupted: Option<String>,
    pub not_run_ids: Vec<String>,
    pub error: Option<String>,
    pub report_files: Vec<String>,
    /// The exit code `opt-at-k` would have given this entry alone.
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fail_under: Vec<crate::app::ci::GateResult>,
    /// An agent entry's samples that gave no row (`instance/sample: why`): those that
    /// failed for an API reason are run again by the next run of the batch.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agent_failures: Vec<String>,
}

impl EntryResult {
    /// An entry with no outcome yet (not run).
    pub fn pending(e: &EntryPlan, run_dir: &Path, instance_ids: Vec<String>) -> EntryResult {
        EntryResult {
            index: e.index,
            label: e.label.clone(),
            model: e.model.clone(),
            run_id: e.run_id.clone(),
            run_dir: run_dir.display().to_string(),
            k: e.k,
            dataset: e.dataset.display().to_string(),
            dataset_key: std::fs::canonicalize(&e.dataset)
                .unwrap_or_else(|_| e.dataset.clone())
                .display()
                .to_string(),
            instance_ids,
            state: EntryState::NotRun,
            group: 0,
            rank: None,
            figures: None,
            interrupted: None,
            not_run_ids: Vec::new(),
            error: None,
            report_files: Vec::new(),
            exit_code: None,
            fail_under: Vec::new(),
            agent_failures: Vec::new(),
        }
    }
}

/// Entries that may be ranked against each other.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub group: usize,
    pub dataset: String,
    pub k: usize,
    pub instances: usize,
    /// Labels of its entries, in ranking order.
    pub entries: Vec<String>,
}

/// The entries in ranking order, their groups, and what a reader must know about the order.
#[derive(Debug, Clone, Serialize)]
pub struct Ranking {
    /// True when every entry is in one group.
    pub comparable: bool,
    pub groups: Vec<Group>,
    pub notes: Vec<String>,
    pub entries: Vec<EntryResult>,
}

fn same_group(a: &EntryResult, b: &EntryResult) -> bool {
    a.dataset_key == b.dataset_key && a.k == b.k && a.instance_ids == b.instance_ids
}

/// Orders entries: by group (same dataset, instances and K; groups in config order), then
/// complete entries by Opt@K, pass@K (both as printed), label; then partial entries (not
/// ranked: their figures count what is missing as failures), then failed and not-run ones.
pub fn rank(mut entries: Vec<EntryResult>) -> Ranking {
    entries.sort_by_key(|e| e.index);
    let mut groups = group(&mut entries);
    let class = |e: &EntryResult| match (e.state, &e.figures) {
        (EntryState::Complete, Some(_)) => 0,
        (EntryState::Partial, Some(_)) => 1,
        _ => 2,
    };
    let key = |e: &EntryResult| {
        e.figures
            .as_ref()
            .map(|f| (f.opt_at_k, f.pass_at_k))
            .unwrap_or((f64::NEG_INFINITY, f64::NEG_INFINITY))
    };
    entries.sort_by(|a, b| {
        a.group
            .cmp(&b.group)
            .then(class(a).cmp(&class(b)))
            .then_with(|| {
                let (oa, pa) = key(a);
                let (ob, pb) = key(b);
                ob.total_cmp(&oa).then(pb.total_cmp(&pa))
            })
            .then_with(|| a.label.cmp(&b.label))
            .then(a.index.cmp(&b.index))
    });
    for i in 0..entries.len() {
        entries[i].rank = if class(&entries[i]) == 0 {
            let mine = key(&entries[i]);
            let better = entries
                .iter()
                .filter(|o| o.group == entries[i].group && class(o) == 0)
                .filter(|o| {
                    let (oo, op) = key(o);
                    oo > mine.0 || (oo == mine.0 && op > mine.1)
                })
                .count();
            Some(better + 1)
        } else {
            None
        };
        let g = entries[i].group - 1;
        groups[g].entries.push(entries[i].label.clone());
    }

    let mut notes = notes(&groups, &entries);
    notes.extend(super::bests::notes(&groups, &entries));
    Ranking {
        comparable: groups.len() <= 1,
        groups,
        notes,
        entries,
    }
}

/// Entries with the same dataset, instances and K are one group (numbered from 1, in
/// entry order): only they are ranked against each other.
fn group(entries: &mut [EntryResult]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut reps: Vec<usize> = Vec::new();
    for i in 0..entries.len() {
        let g = match reps
            .iter()
            .position(|&r| same_group(&entries[r], &entries[i]))
        {
            Some(g) => g,
            None => {
                reps.push(i);
                groups.push(Group {
                    group: groups.len() + 1,
                    dataset: entries[i].dataset.clone(),
                    k: entries[i].k,
                    instances: entries[i].instance_ids.len(),
                    entries: Vec::new(),
                });
                groups.len() - 1
            }
        };
        entries[i].group = g + 1;
    }
    groups
}

/// What a reader must know besides the ranks: groups that cannot be compared, leaders
/// whose intervals overlap, entries that are partial, failed or not run.
fn notes(groups: &[Group], entries: &[EntryResult]) -> Vec<String> {
    let mut notes = Vec::new();
    if groups.len() > 1 {
        let desc: Vec<String> = groups
            .iter()
            .map(|g| {
                format!(
                    "group {} (dataset {}, {} instance(s), K={}): {}",
                    g.group,
                    g.dataset,
                    g.instances,
                    g.k,
                    g.entries.join(", ")
                )
            })
            .collect();
        notes.push(format!(
            "not comparable across groups: entries are ranked only against entries with the same dataset, instances and K; {}",
            desc.join("; ")
        ));
    }
    for g in groups {
        let ranked: Vec<&EntryResult> = entries
            .iter()
            .filter(|e| e.group == g.group && e.rank.is_some())
            .collect();
        if let [first, second, ..] = ranked.as_slice()
            && let (Some(a), Some(b)) = (&first.figures, &second.figures)
            && a.opt_at_k_ci[0] <= b.opt_at_k_ci[1]
            && b.opt_at_k_ci[0] <= a.opt_at_k_ci[1]
        {
            notes.push(format!(
                "the Opt@{} intervals of {} and {} overlap: their order may not hold on another run",
                g.k, first.label, second.label
            ));
        }
    }
    for e in entries {
        match e.state {
            EntryState::Partial => notes.push(format!(
                "{} is partial ({}): not ranked; its figures count what did not run as failures — repeat the command to finish it",
                e.label,
                match &e.interrupted {
                    Some(sig) => format!("interrupted by {sig}"),
                    None => format!(
                        "{} instance(s) not run or ended `error`",
                        e.not_run_ids.len()
                    ),
                }
            )),
            EntryState::Failed => notes.push(format!(
                "{} failed: {}",
                e.label,
                e.error.as_deref().unwrap_or("unknown error")
            )),
            EntryState::NotRun => notes.push(format!(
                "{} was not run (the batch stopped before it)",
                e.label
            )),
            EntryState::Complete => {}
        }
    }
    notes
}

/// The batch's exit code from its entries' own (opt-at-k's codes): 130/143 when a signal
/// stopped it, else 1 when an entry failed or had a sample end `error`, else 2 when a
/// `--fail-under` threshold was missed, else 0.
pub fn exit_code(entries: &[EntryResult], interrupted: Option<&str>) -> i32 {
    match interrupted {
        Some("SIGTERM") => return 143,
        Some(_) => return 130,
        None => {}
    }
    let codes: Vec<i32> = entries
        .iter()
        .map(|e| match e.state {
            EntryState::Failed => 1,
            _ => e.exit_code.unwrap_or(0),
        })
        .collect();
    for first in [143, 130] {
        if codes.contains(&first) {
            return first;
        }
    }
    if codes
        .iter()
        .any(|&c| c != 0 && c != crate::app::ci::EXIT_BELOW_THRESHOLD)
    {
        return 1;
    }
    if entries.iter().any(|e| e.fail_under.iter().any(|g| !g.met)) || codes.contains(&2) {
        return crate::app::ci::EXIT_BELOW_THRESHOLD;
    }
    if entries.iter().any(|e| e.state == EntryState::NotRun) {
        return 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::app::batch::{
        BATCH_SCHEMA_VERSION, BatchReport, EntryPlan, summary_markdown, terminal_table,
    };

    fn result(label: &str, k: usize, state: EntryState, opt: f64, pass: f64) -> EntryResult {
        let plan = EntryPlan {
            index: 0,
            model: label.into(),
            label: label.into(),
            run_id: label.into(),
            predictions: vec![],
            k,
            dataset: "tasks".into(),
            instance_ids: vec![],
            agent: None,
        };
        let mut r = EntryResult::pending(&plan, Path::new(label), vec!["a".into(), "b".into()]);
        r.state = state;
        r.exit_code = Some(0);
        if state != EntryState::NotRun && state != EntryState::Failed {
            r.figures = Some(Figures {
                opt_at_k: opt,
                opt_at_k_ci: [opt / 2.0, opt],
                pass_at_1: pass,
                pass_at_1_ci: [0.0, 100.0],
                pass_at_k: pass,
                pass_at_k_ci: [pass / 2.0, pass],
                opt_commit: 0,
                opt_base: 0,
                instances: 2,
                agents: None,
            });
        }
        r
    }

    fn indexed(mut rs: Vec<EntryResult>) -> Vec<EntryResult> {
        for (i, r) in rs.iter_mut().enumerate() {
            r.index = i + 1;
        }
        rs
    }

    fn order(r: &Ranking) -> Vec<(String, Option<usize>)> {
        r.entries
            .iter()
            .map(|e| (e.label.clone(), e.rank))
            .collect()
    }

    #[test]
    fn ranks_by_opt_then_pass_then_name_and_ties_share_a_rank() {
        let r = rank(indexed(vec![
            result("c", 3, EntryState::Complete, 50.0, 80.0),
            result("b", 3, EntryState::Complete, 50.0, 90.0),
            result("a", 3, EntryState::Complete, 50.0, 80.0),
            result("d", 3, EntryState::Complete, 75.0, 10.0),
        ]));
        assert!(r.comparable);
        assert_eq!(
            order(&r),
            vec![
                ("d".into(), Some(1)),
                ("b".into(), Some(2)),
                ("a".into(), Some(3)),
                ("c".into(), Some(3)),
            ]
        );
        assert_eq!(r.groups.len(), 1);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("intervals of d and b overlap")),
            "{:?}",
            r.notes
        );
        let apart = rank(indexed(vec![
            result("hi", 3, EntryState::Complete, 100.0, 100.0),
            result("lo", 3, EntryState::Complete, 0.0, 0.0),
        ]));
        assert!(apart.notes.is_empty(), "{:?}", apart.notes);
    }

    #[test]
    fn a_partial_entry_is_never_ranked_above_a_complete_one() {
        let r = rank(indexed(vec![
            result("low", 3, EntryState::Complete, 10.0, 20.0),
            result("part", 3, EntryState::Partial, 90.0, 90.0),
            result("gone", 3, EntryState::NotRun, 0.0, 0.0),
            result("bad", 3, EntryState::Failed, 0.0, 0.0),
        ]));
        assert_eq!(
            order(&r),
            vec![
                ("low".into(), Some(1)),
                ("part".into(), None),
                ("bad".into(), None),
                ("gone".into(), None),
            ]
        );
        let notes = r.notes.join("\n");
        assert!(
            notes.contains("part is partial") && notes.contains("not ranked"),
            "{notes}"
        );
        assert!(notes.contains("gone was not run"), "{notes}");
    }

    #[test]
    fn different_k_or_dataset_are_ranked_apart_and_said_to_be_incomparable() {
        let mut other = result("x", 3, EntryState::Complete, 100.0, 100.0);
        other.dataset = "tasks/_real".into();
        other.dataset_key = "/somewhere/tasks/_real".into();
        let r = rank(indexed(vec![
            result("k3", 3, EntryState::Complete, 25.0, 50.0),
            result("k1", 1, EntryState::Complete, 75.0, 75.0),
            result("k3b", 3, EntryState::Complete, 50.0, 50.0),
            other,
        ]));
        assert!(!r.comparable);
        assert_eq!(r.groups.len(), 3);
        assert_eq!(
            order(&r),
            vec![
                ("k3b".into(), Some(1)),
                ("k3".into(), Some(2)),
                ("k1".into(), Some(1)),
                ("x".into(), Some(1)),
            ]
        );
        assert_eq!(r.groups[0].entries, vec!["k3b", "k3"]);
        let notes = r.notes.join("\n");
        assert!(notes.contains("not comparable across groups"), "{notes}");
        assert!(notes.contains("K=1): k1"), "{notes}");
        // The table shows the group column when there are several.
        let report = BatchReport {
            schema_version: BATCH_SCHEMA_VERSION,
            name: "b".into(),
            config: "c.toml".into(),
            batch_dir: "out/b".into(),
            started_at: String::new(),
            finished_at: None,
            complete: true,
            interrupted: None,
            exit_code: 0,
            comparable: r.comparable,
            groups: r.groups.clone(),
            notes: r.notes.clone(),
            entries: r.entries.clone(),
        };
        let t = terminal_table(&report);
        assert!(t.starts_with("group  rank  entry"), "{t}");
        assert!(t.contains("50.00% [25.00, 50.00]"), "{t}");
        assert!(summary_markdown(&report).contains("| group | rank | entry |"));
    }

    #[test]
    fn exit_codes_follow_opt_at_k() {
        let ok = result("a", 1, EntryState::Complete, 1.0, 1.0);
        assert_eq!(exit_code(std::slice::from_ref(&ok), None), 0);
        assert_eq!(exit_code(std::slice::from_ref(&ok), Some("SIGINT")), 130);
        assert_eq!(exit_code(std::slice::from_ref(&ok), Some("SIGTERM")), 143);
        let mut err = result("b", 1, EntryState::Partial, 1.0, 1.0);
        err.exit_code = Some(1);
        let failed = result("c", 1, EntryState::Failed, 0.0, 0.0);
        let mut gated = ok.clone();
        gated.exit_code = Some(2);
        assert_eq!(exit_code(&[ok.clone(), err.clone()], None), 1);
        assert_eq!(exit_code(&[ok.clone(), failed], None), 1);
        assert_eq!(exit_code(&[gated.clone(), ok.clone()], None), 2);
        assert_eq!(exit_code(&[gated, err], None), 1);
    }

    #[test]
    fn agent_entries_are_also_ordered_by_time_tokens_and_dollars_unknown_cost_apart() {
        let spend =
            |seconds: f64, tokens: u64, cost: Option<f64>| crate::core::spend::SpendTotals {
                samples: 2,
                requests: tokens / 100,
                input_tokens: tokens,
                cost_usd: cost,
                unknown_cost_samples: usize::from(cost.is_none()),
                agent_seconds: seconds,
                ..Default::default()
            };
        let mut entries = Vec::new();
        for (label, s) in [
            ("fast", spend(10.0, 9000, Some(0.9))),
            ("lean", spend(50.0, 1000, Some(0.5))),
            ("cheap", spend(40.0, 5000, Some(0.1))),
            ("unpriced", spend(90.0, 8000, None)),
        ] {
            let mut r = result(label, 1, EntryState::Complete, 50.0, 50.0);
            if let Some(f) = r.figures.as_mut() {
                f.agents = Some(s);
            }
            entries.push(r);
        }
        let notes = rank(indexed(entries)).notes;
        let has = |text: &str| notes.iter().any(|n| n.contains(text));
        assert!(
            has("fastest: fast (its agents' wall time 10 s)"),
            "{notes:?}"
        );
        assert!(
            has("most efficient: lean (1000 tokens in 10 requests)"),
            "{notes:?}"
        );
        assert!(
            has("cheapest: cheap ($0.1000); the cost of unpriced is unknown"),
            "{notes:?}"
        );
    }
}
