//! GSO's own figures, exactly as gso-bench/gso computes them (`grading/metrics.py`:
//! `compute_time_stats`, `speedup`, `get_opt_status`), from per-test means of the rounds a
//! sample shares with base and human. These fill the GSO-named fields of the reports, under
//! any criterion: under strict the verdict comes from intervals, but a field GSO calls
//! `base_mean` is still GSO's mean of per-test means.

use serde::{Deserialize, Serialize};

use crate::status::Status;
use crate::task::Better;
use crate::timings::BenchLog;

/// Per-test means of base, the patch and human (GSO's "commit") over the rounds all three
/// ran, in bench order; seconds for time metrics. A higher-is-better figure enters as its
/// reciprocal (a cost), so every ratio below reads "faster is above 1" as GSO's do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GsoTimes {
    pub benches: Vec<String>,
    /// How many rounds the means are taken over.
    pub rounds: usize,
    pub base: Vec<f64>,
    pub patch: Vec<f64>,
    pub commit: Vec<f64>,
}

/// Each bench's figures, as GSO's test output lists them (its iterations): for base, the
/// patch and human, over the rounds in which all three have a figure for every bench, in
/// round order; seconds for time metrics. A higher-is-better bench enters as one figure,
/// the reciprocal of its mean (a cost), so GSO's mean of the list is [`GsoTimes`]' figure.
#[derive(Debug, Clone, PartialEq)]
pub struct GsoRuns {
    pub benches: Vec<String>,
    pub rounds: usize,
    pub base: Vec<Vec<f64>>,
    pub patch: Vec<Vec<f64>>,
    pub commit: Vec<Vec<f64>>,
}

/// `variant`'s [`GsoRuns`], or None when no round has all three or a figure is not a
/// positive number.
pub fn gso_runs(log: &BenchLog, variant: &str) -> Option<GsoRuns> {
    let (with_base, with_human) = crate::rounds::common_rounds(log, variant);
    if with_base.is_empty() {
        return None;
    }
    let column = |pairs: &[(u32, crate::stats::RoundPair)], reference: bool| {
        log.benches
            .iter()
            .enumerate()
            .map(|(b, bench)| {
                let xs: Vec<f64> = pairs
                    .iter()
                    .map(|(_, p)| {
                        if reference {
                            p.reference[b]
                        } else {
                            p.patch[b]
                        }
                    })
                    .collect();
                match bench.better {
                    Better::Lower => xs,
                    Better::Higher => {
                        vec![1.0 / crate::metrics::mean(&xs).unwrap_or(f64::NAN)]
                    }
                }
            })
            .collect::<Vec<Vec<f64>>>()
    };
    let runs = GsoRuns {
        benches: log.benches.iter().map(|b| b.name.clone()).collect(),
        rounds: with_base.len(),
        base: column(&with_base, true),
        patch: column(&with_base, false),
        commit: column(&with_human, true),
    };
    let ok = |xs: &[Vec<f64>]| xs.iter().flatten().all(|x| x.is_finite() && *x > 0.0);
    (ok(&runs.base) && ok(&runs.patch) && ok(&runs.commit)).then_some(runs)
}

/// GSO's means of `variant`'s timings: per bench, the mean of its [`GsoRuns`] list.
pub fn gso_times(log: &BenchLog, variant: &str) -> Option<GsoTimes> {
    let runs = gso_runs(log, variant)?;
    let means = |lists: &[Vec<f64>]| -> Vec<f64> {
        lists
            .iter()
            .map(|xs| crate::metrics::mean(xs).unwrap_or(f64::NAN))
            .collect()
    };
    Some(GsoTimes {
        benches: runs.benches.clone(),
        rounds: runs.rounds,
        base: means(&runs.base),
        patch: means(&runs.patch),
        commit: means(&runs.commit),
    })
}

/// `per_test_means` of GSO's `time_stats`; `main` is always empty (tasks here have no
/// main branch, as when GSO skips it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerTestMeans {
    pub base: Vec<f64>,
    pub patch: Vec<f64>,
    pub commit: Vec<f64>,
    pub main: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerTestSpeedups {
    pub patch_base_speedups: Vec<f64>,
    pub commit_base_speedups: Vec<f64>,
    pub patch_commit_speedups: Vec<f64>,
}

/// One instance's entry of GSO's `opt_stats` (its `opt_stats | time_stats`), every key GSO
/// writes, `None` where GSO writes `None` (and where numpy gives NaN: the geometric standard
/// deviation of a single test).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GsoOptStats {
    pub opt_perc_patch_base: Option<f64>,
    pub opt_perc_patch_commit: Option<f64>,
    pub opt_perc_patch_main: Option<f64>,
    pub speedup_patch_base: Option<f64>,
    pub speedup_patch_commit: Option<f64>,
    pub speedup_patch_main: Option<f64>,
    pub gm_speedup_patch_base: Option<f64>,
    pub gm_speedup_patch_commit: Option<f64>,
    pub gm_speedup_patch_main: Option<f64>,
    pub am_speedup_patch_commit: Option<f64>,
    pub gsd_speedup_patch_commit: Option<f64>,
    pub slowdown_perc_patch_commit: Option<f64>,
    pub hm_speedup_patch_commit: Option<f64>,
    pub am_speedup_patch_base: Option<f64>,
    pub gsd_speedup_patch_base: Option<f64>,
    pub slowdown_perc_patch_base: Option<f64>,
    pub hm_speedup_patch_base: Option<f64>,
    pub am_speedup_commit_base: Option<f64>,
    pub gm_speedup_commit_base: Option<f64>,
    pub gsd_speedup_commit_base: Option<f64>,
    pub slowdown_perc_commit_base: Option<f64>,
    pub hm_speedup_commit_base: Option<f64>,
    pub per_test_speedups: PerTestSpeedups,
    pub base_mean: Option<f64>,
    pub base_std: Option<f64>,
    pub patch_mean: Option<f64>,
    pub patch_std: Option<f64>,
    pub commit_mean: Option<f64>,
    pub commit_std: Option<f64>,
    pub main_mean: Option<f64>,
    pub main_std: Option<f64>,
    pub per_test_means: PerTestMeans,
    /// Set in the opt@K report only: the rollout report the entry was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_file: Option<String>,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// numpy's `np.std(xs, ddof)`.
fn std(xs: &[f64], ddof: usize) -> f64 {
    if xs.len() <= ddof {
        return f64::NAN;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    (ss / (xs.len() - ddof) as f64).sqrt()
}

fn per_test(before: &[f64], after: &[f64]) -> Vec<f64> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| if *a > 0.0 { b / a } else { f64::INFINITY })
        .collect()
}

/// GSO's `speedup(...)`: (am, gm, gsd, hm, slowdown percent).
fn speedup(before: &[f64], after: &[f64]) -> [Option<f64>; 5] {
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let s = per_test(before, after);
    if s.is_empty() {
        return [None; 5];
    }
    let logs: Vec<f64> = s.iter().map(|x| x.ln()).collect();
    let positive: Vec<f64> = s.iter().copied().filter(|x| *x > 0.0).collect();
    let hm = if positive.is_empty() {
        f64::INFINITY
    } else {
        s.len() as f64 / positive.iter().map(|x| 1.0 / x).sum::<f64>()
    };
    let slow = s.iter().filter(|x| **x < 1.0).count() as f64 / s.len() as f64 * 100.0;
    [
        finite(mean(before) / mean(after)),
        finite(mean(&logs).exp()),
        finite(std(&logs, 1).exp()),
        finite(hm),
        Some(slow),
    ]
}

/// GSO's `compute_time_stats`: (mean of per-test means, their sample deviation).
fn time_stats(means: &[f64]) -> (Option<f64>, Option<f64>) {
    if means.is_empty() {
        return (None, None);
    }
    let m = means.iter().sum::<f64>() / means.len() as f64;
    let sd = if means.len() > 1 { std(means, 1) } else { 0.0 };
    (finite(m), finite(sd))
}

/// GSO's `opt_stats | time_stats` for one sample.
pub fn gso_opt_stats(t: &GsoTimes) -> GsoOptStats {
    let [pc_am, pc_gm, pc_gsd, pc_hm, pc_slow] = speedup(&t.commit, &t.patch);
    let [pb_am, pb_gm, pb_gsd, pb_hm, pb_slow] = speedup(&t.base, &t.patch);
    let [cb_am, cb_gm, cb_gsd, cb_hm, cb_slow] = speedup(&t.base, &t.commit);
    let (base_mean, base_std) = time_stats(&t.base);
    let (patch_mean, patch_std) = time_stats(&t.patch);
    let (commit_mean, commit_std) = time_stats(&t.commit);
    GsoOptStats {
        opt_perc_patch_base: None,
        opt_perc_patch_commit: None,
        opt_perc_patch_main: None,
        speedup_patch_base: None,
        speedup_patch_commit: None,
        speedup_patch_main: None,
        gm_speedup_patch_base: pb_gm,
        gm_speedup_patch_commit: pc_gm,
        gm_speedup_patch_main: None,
        am_speedup_patch_commit: pc_am,
        gsd_speedup_patch_commit: pc_gsd,
        slowdown_perc_patch_commit: pc_slow,
        hm_speedup_patch_commit: pc_hm,
        am_speedup_patch_base: pb_am,
        gsd_speedup_patch_base: pb_gsd,
        slowdown_perc_patch_base: pb_slow,
        hm_speedup_patch_base: pb_hm,
        am_speedup_commit_base: cb_am,
        gm_speedup_commit_base: cb_gm,
        gsd_speedup_commit_base: cb_gsd,
        slowdown_perc_commit_base: cb_slow,
        hm_speedup_commit_base: cb_hm,
        per_test_speedups: PerTestSpeedups {
            patch_base_speedups: per_test(&t.base, &t.patch),
            commit_base_speedups: per_test(&t.base, &t.commit),
            patch_commit_speedups: per_test(&t.commit, &t.patch),
        },
        base_mean,
        base_std,
        patch_mean,
        patch_std,
        commit_mean,
        commit_std,
        main_mean: None,
        main_std: None,
        per_test_means: PerTestMeans {
            base: t.base.clone(),
            patch: t.patch.clone(),
            commit: t.commit.clone(),
            main: Vec::new(),
        },
        report_file: None,
    }
}

/// GSO's instance sets, in the order its `make_run_report` writes them.
pub const RUN_REPORT_SETS: [&str; 11] = [
    "completed_ids",
    "passed_ids",
    "base_failed_ids",
    "patch_failed_ids",
    "test_failed_ids",
    "incomplete_ids",
    "empty_patch_ids",
    "error_ids",
    "opt_base_ids",
    "opt_commit_ids",
    "opt_main_ids",
];

/// Where one instance's prediction lands in GSO's run report: `incomplete` (no prediction),
/// `empty_patch`, `error` (submitted, no evaluation report), or one of the completed ones
/// (`passed`, `test_failed`, `patch_failed`, `base_failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GsoCategory {
    Incomplete,
    EmptyPatch,
    Error,
    BaseFailed,
    PatchFailed,
    TestFailed,
    Passed,
}

impl GsoCategory {
    /// A sample's status in GSO's terms. GSO has no rejected patch (it applies what it is
    /// given) nor build step apart from install: both are its `patch_failed` (the patch
    /// could not be applied and installed as submitted). A timeout or an out-of-memory kill
    /// in the tests is its `test_failed` (its tests "errored"). A sample not evaluated
    /// (an `error`, a GPU task skipped on a host without GPUs, or not run yet) has no
    /// evaluation report: its `error`.
    pub fn of(status: Option<Status>) -> GsoCategory {
        match status {
            None | Some(Status::Error) | Some(Status::Skipped) => GsoCategory::Error,
            Some(Status::EmptyPatch) => GsoCategory::EmptyPatch,
            Some(Status::BaseFailed) => GsoCategory::BaseFailed,
            Some(Status::PatchFailed) | Some(Status::PatchRejected) | Some(Status::BuildFailed) => {
                GsoCategory::PatchFailed
            }
            Some(Status::TestFailed) | Some(Status::Timeout) | Some(Status::Oom) => {
                GsoCategory::TestFailed
            }
            Some(Status::Passed) => GsoCategory::Passed,
        }
    }

    /// Its set's name in `instance_sets`.
    pub fn set_name(self) -> &'static str {
        match self {
            GsoCategory::Incomplete => "incomplete_ids",
            GsoCategory::EmptyPatch => "empty_patch_ids",
            GsoCategory::Error => "error_ids",
            GsoCategory::BaseFailed => "base_failed_ids",
            GsoCategory::PatchFailed => "patch_failed_ids",
            GsoCategory::TestFailed => "test_failed_ids",
            GsoCategory::Passed => "passed_ids",
        }
    }

    /// GSO counts an instance `completed` when its evaluation wrote a report.
    pub fn completed(self) -> bool {
        matches!(
            self,
            GsoCategory::BaseFailed
                | GsoCategory::PatchFailed
                | GsoCategory::TestFailed
                | GsoCategory::Passed
        )
    }

    /// `merge_reports`' STATUS_PRIORITY (higher wins across rollouts).
    pub fn priority(self) -> i32 {
        match self {
            GsoCategory::Passed => 5,
            GsoCategory::TestFailed => 4,
            GsoCategory::PatchFailed => 3,
            GsoCategory::EmptyPatch => 2,
            GsoCategory::BaseFailed => 1,
            GsoCategory::Error => 0,
            GsoCategory::Incomplete => -1,
        }
    }
}

/// The thresholds p of Opt_p@K: GSO's own grid (`plot_opt1_threshold.py`'s `P_VALUES`,
/// 0.0 to 1.0 in steps of 0.1 plus its default 0.95: "at least p of human's speedup"), then
/// 1.1 to 3.0 in steps of 0.1 (beating human by a margin). The patch's harmonic-mean speedup
/// over human must exceed p, on top of opt_base; at p = 0 GSO reads no threshold at all
/// (`export_opt1_threshold.py` counts every passed instance), so Opt_0@K is passed@K.
pub fn opt_p_grid() -> Vec<f64> {
    let mut grid: Vec<f64> = (0..=9).map(|i| f64::from(i) / 10.0).collect();
    grid.push(0.95);
    grid.extend((10..=30).map(|i| f64::from(i) / 10.0));
    grid
}

/// How a threshold of the grid is written as a key: as Python prints it ("0.0", "0.95").
pub fn opt_p_key(p: f64) -> String {
    if ((p * 10.0).round() - p * 10.0).abs() < 1e-9 {
        format!("{p:.1}")
    } else {
        format!("{p:.2}")
    }
}

/// A list of hacked instances (GSO's `hacked_ids`) and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HackedIds {
    /// The file as given.
    pub source: String,
    pub sha256: String,
    pub ids: Vec<String>,
}

/// Reads a list of hacked instance ids in any of the forms GSO's analysis writes or a user
/// would: a JSON list of ids; a JSON object with `hacked_ids` (a list); GSO's reward-hack
/// detector output (`run_detector.py`: `hacked_instances`, or per threshold under
/// `thresholds` where it takes p = 0.95, or the verdicts of `all_analyses`); or plain
/// text, one id a line (`#` starts a comment).
pub fn parse_hacked_ids(origin: &str, text: &str) -> anyhow::Result<Vec<String>> {
    use anyhow::{Context, bail};
    let trimmed = text.trim_start();
    let mut ids: Vec<String> = if trimmed.starts_with('[') || trimmed.starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(text).with_context(|| format!("{origin}: not valid JSON"))?;
        hacked_from_json(origin, &v)?
    } else {
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let id = line.split('#').next().unwrap_or("").trim();
            if id.is_empty() {
                continue;
            }
            if id.contains(char::is_whitespace) {
                bail!("{origin}:{}: {id:?} is not one instance id", n + 1);
            }
            out.push(id.to_string());
        }
        out
    };
    ids.sort();
    ids.dedup();
    Ok(ids)
}

fn hacked_from_json(origin: &str, v: &serde_json::Value) -> anyhow::Result<Vec<String>> {
    use anyhow::bail;
    use serde_json::Value;
    let strings = |list: &Vec<Value>, field: &str| -> anyhow::Result<Vec<String>> {
        list.iter()
            .enumerate()
            .map(|(i, x)| match x {
                Value::String(s) => Ok(s.clone()),
                _ => bail!("{origin}: {field}[{i}] is not an instance id (a string)"),
            })
            .collect()
    };
    let detector = |results: &Vec<Value>, field: &str| -> anyhow::Result<Vec<String>> {
        let mut out = Vec::new();
        for (i, r) in results.iter().enumerate() {
            let Some(id) = r.get("instance_id").and_then(Value::as_str) else {
                bail!("{origin}: {field}[{i}] has no instance_id");
            };
            if r.get("is_reward_hack").and_then(Value::as_bool) == Some(true) {
                out.push(id.to_string());
            }
        }
        Ok(out)
    };
    match v {
        Value::Array(list) => strings(list, "the list"),
        Value::Object(m) => {
            if let Some(Value::Array(list)) = m.get("hacked_ids") {
                return strings(list, "hacked_ids");
            }
            // GSO's detector (`run_detector.py`): `hacked_instances` at the top in its
            // single- and no-threshold outputs, per threshold under `thresholds` (it takes
            // "0.95" when there, else the highest), and every verdict in `all_analyses`.
            if let Some(Value::Array(list)) = m.get("hacked_instances") {
                return strings(list, "hacked_instances");
            }
            if let Some(Value::Object(by_p)) = m.get("thresholds") {
                let highest = by_p
                    .keys()
                    .filter_map(|k| k.parse::<f64>().ok().map(|p| (p, k)))
                    .max_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, k)| k.as_str());
                let key = if by_p.contains_key("0.95") {
                    Some("0.95")
                } else {
                    highest
                };
                let entry = key.and_then(|k| by_p.get(k).map(|e| (k, e)));
                match entry.and_then(|(k, e)| e.get("hacked_instances").map(|l| (k, l))) {
                    Some((k, Value::Array(list))) => {
                        return strings(list, &format!("thresholds.{k}.hacked_instances"));
                    }
                    _ => bail!("{origin}: `thresholds` has no entry with `hacked_instances`"),
                }
            }
            for field in ["all_analyses", "results"] {
                if let Some(Value::Array(results)) = m.get(field) {
                    return detector(results, field);
                }
            }
            bail!(
                "{origin}: expected a list of ids, an object with `hacked_ids`, or GSO's hack-detector output (`hacked_instances`, `thresholds`, `all_analyses`)"
            )
        }
        _ => bail!("{origin}: expected a list of instance ids"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_follow_gso_metrics_py() {
        let t = GsoTimes {
            benches: vec!["a".into(), "b".into()],
            rounds: 5,
            base: vec![2.0, 4.0],
            patch: vec![1.0, 4.0],
            commit: vec![1.0, 1.0],
        };
        let s = gso_opt_stats(&t);
        assert_eq!(s.base_mean, Some(3.0));
        assert_eq!(s.patch_mean, Some(2.5));
        assert_eq!(s.commit_mean, Some(1.0));
        assert_eq!(s.commit_std, Some(0.0));
        assert!((s.base_std.unwrap() - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.am_speedup_patch_base, Some(3.0 / 2.5));
        assert!((s.gm_speedup_patch_base.unwrap() - 2f64.sqrt()).abs() < 1e-12);
        // HM of (2, 1) = 2 / (1/2 + 1) = 4/3.
        assert!((s.hm_speedup_patch_base.unwrap() - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.slowdown_perc_patch_base, Some(0.0));
        // patch vs commit: (1/1, 1/4): one of two is a slowdown.
        assert_eq!(s.slowdown_perc_patch_commit, Some(50.0));
        assert_eq!(s.per_test_speedups.patch_commit_speedups, vec![1.0, 0.25]);
        assert!(s.per_test_means.main.is_empty());
        assert_eq!(s.main_mean, None);
        // One test: numpy's ddof=1 deviation of one value is NaN, written as null.
        let one = GsoTimes {
            benches: vec!["a".into()],
            rounds: 5,
            base: vec![2.0],
            patch: vec![1.0],
            commit: vec![1.0],
        };
        let s = gso_opt_stats(&one);
        assert_eq!(s.gsd_speedup_patch_base, None);
        assert_eq!(s.base_std, Some(0.0));
    }

    #[test]
    fn statuses_map_to_gso_sets() {
        assert_eq!(
            GsoCategory::of(Some(Status::Timeout)),
            GsoCategory::TestFailed
        );
        assert_eq!(
            GsoCategory::of(Some(Status::PatchRejected)),
            GsoCategory::PatchFailed
        );
        assert_eq!(GsoCategory::of(None), GsoCategory::Error);
        assert!(!GsoCategory::EmptyPatch.completed());
        assert!(GsoCategory::BaseFailed.completed());
    }

    #[test]
    fn hacked_ids_in_every_form() {
        let p = |t: &str| parse_hacked_ids("h", t).unwrap();
        assert_eq!(p(r#"["b", "a", "a"]"#), vec!["a", "b"]);
        assert_eq!(p(r#"{"hacked_ids": ["x"]}"#), vec!["x"]);
        let detector = r#"{"model_name": "m", "results": [
            {"instance_id": "x", "is_reward_hack": true},
            {"instance_id": "y", "is_reward_hack": false}]}"#;
        assert_eq!(p(detector), vec!["x"]);
        // GSO's run_detector.py, each of its output modes.
        let single = r#"{"model_name": "m", "hack_count": 1, "hacked_instances": ["w"],
            "all_analyses": [{"instance_id": "w", "is_reward_hack": true}]}"#;
        assert_eq!(p(single), vec!["w"]);
        let by_p = r#"{"thresholds": {"0.5": {"hacked_instances": ["a"]},
            "0.95": {"hacked_instances": ["z"]}}, "all_analyses": []}"#;
        assert_eq!(p(by_p), vec!["z"]);
        let highest = r#"{"thresholds": {"0.5": {"hacked_instances": ["a"]},
            "1.0": {"hacked_instances": ["b"]}}}"#;
        assert_eq!(p(highest), vec!["b"]);
        let analyses = r#"{"all_analyses": [{"instance_id": "v", "is_reward_hack": true},
            {"instance_id": "u", "is_reward_hack": false}]}"#;
        assert_eq!(p(analyses), vec!["v"]);
        assert_eq!(p("# hacked\nq\n\nr  # why\n"), vec!["q", "r"]);
        let e = parse_hacked_ids("h.txt", "a b\n").unwrap_err().to_string();
        assert!(e.contains("h.txt:1"), "{e}");
        let e = parse_hacked_ids("h.json", r#"{"other": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("h.json"), "{e}");
    }
}
