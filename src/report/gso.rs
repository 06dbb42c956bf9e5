//! GSO-compatible report files: `summary`, `instance_sets` (`*_ids`), `opt_stats`,
//! `schema_version`, with this harness's extra statuses beside GSO's.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Summary;
use crate::results::Status;

fn ids(summary: &Summary, pred: impl Fn(&super::InstanceOutcome) -> bool) -> Vec<String> {
    summary
        .instances
        .iter()
        .filter(|i| pred(i))
        .map(|i| i.instance_id.clone())
        .collect()
}

/// `<model>.<run_id>.report.json`: best of the run's K samples per instance.
pub fn run_report(summary: &Summary) -> Value {
    let t = &summary.totals;
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    sets.insert(
        "completed_ids".into(),
        ids(summary, |i| {
            i.samples.iter().any(|s| s.status != Status::Error)
        }),
    );
    sets.insert(
        "incomplete_ids".into(),
        ids(summary, |i| {
            i.submitted > 0 && i.samples.iter().all(|s| s.status == Status::Error)
        }),
    );
    sets.insert("unsubmitted_ids".into(), ids(summary, |i| i.submitted == 0));
    // GPU tasks not attempted (--skip-gpu) are in no count, listed apart.
    sets.insert("skipped_ids".into(), summary.totals.skipped_ids.clone());
    for status in Status::ALL.into_iter().filter(|s| *s != Status::Skipped) {
        sets.insert(
            format!("{}_ids", status.as_str()),
            ids(summary, |i| i.best_status == Some(status)),
        );
    }
    sets.insert("opt_base_ids".into(), ids(summary, |i| i.opt_base));
    sets.insert("opt_commit_ids".into(), ids(summary, |i| i.opt_commit));
    sets.insert("inconclusive_ids".into(), ids(summary, |i| i.inconclusive));
    // GSO also reports improvement over the repository's main branch; tasks here have none.
    sets.insert("opt_main_ids".into(), Vec::new());
    sets.insert("not_run_ids".into(), t.not_run_ids.clone());

    let mut opt_stats = serde_json::Map::new();
    for inst in &summary.instances {
        if let Some(best) = inst.best
            && let Some(st) = inst.samples[best].opt_stats.as_ref()
        {
            let mut v = serde_json::to_value(st).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                m.insert("sample".into(), json!(inst.samples[best].sample));
                m.insert("opt_base".into(), json!(inst.samples[best].opt_base));
                m.insert("opt_commit".into(), json!(inst.samples[best].opt_commit));
                if let Some(iv) = &inst.samples[best].intervals {
                    m.insert(
                        "intervals".into(),
                        serde_json::to_value(iv).unwrap_or(Value::Null),
                    );
                }
            }
            opt_stats.insert(inst.instance_id.clone(), v);
        }
    }

    let count = |s: Status| t.by_status.get(s.as_str()).copied().unwrap_or(0);
    json!({
        "summary": {
            "total_instances": t.total_instances,
            "total_predictions": t.submitted_instances,
            "completed_instances": t.completed_instances,
            "incomplete_instances": sets["incomplete_ids"].len(),
            "passed_instances": count(Status::Passed),
            "base_failed_instances": count(Status::BaseFailed),
            "patch_failed_instances": count(Status::PatchFailed),
            "test_failed_instances": count(Status::TestFailed),
            "empty_patch_instances": count(Status::EmptyPatch),
            "error_instances": count(Status::Error),
            "build_failed_instances": count(Status::BuildFailed),
            "patch_rejected_instances": count(Status::PatchRejected),
            "timeout_instances": count(Status::Timeout),
            "oom_instances": count(Status::Oom),
            "opt_base": t.opt_base,
            "opt_commit": t.opt_commit,
            "opt_main": 0,
            "inconclusive_instances": t.inconclusive,
            "inconclusive_samples": t.inconclusive_samples,
            "skipped_instances": t.skipped_ids.len(),
        },
        "instance_sets": sets,
        "opt_stats": opt_stats,
        // A partial run (interrupted, or samples not run or ended `error`) says so: its
        // scores count what is missing as failures.
        "complete": t.complete,
        "interrupted": t.interrupted,
        "schema_version": 1,
        "harness": harness_block(summary),
    })
}

fn harness_block(summary: &Summary) -> Value {
    let info = &summary.info;
    json!({
        "model": info.model,
        "run_id": info.run_id,
        "k": info.k,
        "criterion": info.criterion,
        "thresholds": info.thresholds,
        "decision_rule": info.decision_rule,
        "budget": {
            "min_rounds": info.min_rounds,
            "max_rounds": info.max_rounds,
            "max_measure_seconds": info.max_measure_seconds,
        },
        "fingerprint": info.fingerprint,
        "dataset_digest": info.dataset_digest,
        "harness_version": info.harness_version,
    })
}

/// `<model>.opt@<K>.<run_id>.report.json`: the run report plus `k`, `score` and the
/// pass@k / opt@k curves.
pub fn opt_at_k_report(summary: &Summary) -> Value {
    let t = &summary.totals;
    let mut report = run_report(summary);
    if let Value::Object(m) = &mut report {
        if let Some(Value::Object(s)) = m.get_mut("summary") {
            s.insert("k".into(), json!(summary.info.k));
            s.insert("score".into(), json!(t.score));
        }
        m.insert("k".into(), json!(summary.info.k));
        m.insert("score".into(), json!(t.score));
        let curve = |xs: &[f64]| -> Value {
            xs.iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        format!("{}", i + 1),
                        json!(crate::metrics::python_round(v * 100.0, 2)),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        m.insert("pass_at_k".into(), curve(&t.pass_at_k));
        m.insert("opt_at_k".into(), curve(&t.opt_at_k));
        let ci = |xs: &[[f64; 2]]| -> Value {
            xs.iter()
                .enumerate()
                .map(|(i, [lo, hi])| {
                    (
                        format!("{}", i + 1),
                        json!([
                            crate::metrics::python_round(lo * 100.0, 2),
                            crate::metrics::python_round(hi * 100.0, 2)
                        ]),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        m.insert("pass_at_k_ci".into(), ci(&t.pass_at_k_ci));
        m.insert("opt_at_k_ci".into(), ci(&t.opt_at_k_ci));
    }
    report
}
