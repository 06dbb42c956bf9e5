//! Regrading: every sample of a run folder judged again from its saved `bench.json` under
//! another decision rule, with no Docker. The rule used is recorded in run.json.

use anyhow::{Context, Result};

use crate::core::records::SampleReport;
use crate::core::rule::DecisionRule;
use crate::core::timings::BenchLog;
use crate::store::run_folder::{RunDir, names};

pub use crate::core::records::Regrading;

/// Judges every saved sample of `run` again under `rule`, rewrites its report.json and
/// run.json (never through a link: one anywhere in the run folder refuses the regrading
/// before anything is written). Samples that were not measured keep their status (their
/// verdict is "no").
pub fn regrade(run: &RunDir, rule: DecisionRule) -> Result<Regrading> {
    let store = run.store();
    let mut info = run.load_run_info()?;
    let model_dir = run.model_dir(&info.model);
    let mut samples = 0;
    let mut changed = 0;
    let mut rewrites = Vec::new();
    for id in &info.instance_ids {
        let dir = model_dir.join(id);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut folders: Vec<_> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.join(names::REPORT_JSON).is_file())
            .collect();
        folders.sort();
        for folder in folders {
            let path = folder.join(names::REPORT_JSON);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("{}: cannot read", path.display()))?;
            let mut report: SampleReport = serde_json::from_str(&text)
                .with_context(|| format!("{}: not a sample report", path.display()))?;
            let log: Option<BenchLog> =
                match std::fs::read_to_string(folder.join(names::BENCH_JSON)) {
                    Ok(t) => Some(serde_json::from_str(&t).with_context(|| {
                        format!(
                            "{}: unreadable timings",
                            folder.join(names::BENCH_JSON).display()
                        )
                    })?),
                    Err(_) => None,
                };
            let before = (report.opt_base, report.opt_commit, report.inconclusive);
            let judgement = log.as_ref().and_then(|log| {
                let label = log
                    .sample_variant
                    .clone()
                    .unwrap_or_else(|| format!("s{}", report.sample));
                log.covers(&label)
                    .then(|| crate::core::verdict::judge(log, &label, &rule))
            });
            if judgement.is_some() {
                samples += 1;
            }
            crate::core::verdict::apply_to(&mut report, judgement.as_ref(), &rule);
            if before != (report.opt_base, report.opt_commit, report.inconclusive) {
                changed += 1;
            }
            rewrites.push((path, report));
        }
    }
    // Every place is checked before anything is written: a link anywhere leaves the run
    // folder as it was, not half regraded.
    for (path, _) in &rewrites {
        store.check(path)?;
    }
    store.check(&run.run_json())?;
    for (path, report) in &rewrites {
        store.write_json(path, report)?;
    }
    let regrading = Regrading {
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        from: info.decision_rule,
        to: rule,
        samples,
        changed,
    };
    info.decision_rule = rule;
    info.regradings.push(regrading.clone());
    store.write_json(&run.run_json(), &info)?;
    Ok(regrading)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::criterion::Criterion;
    use crate::core::records::{ExpectedSample, PhaseSeconds, RunInfo};
    use crate::core::stats::Decision;
    use crate::core::status::Status;
    use crate::core::task::Better;
    use crate::core::timings::{BenchSetting, RunRecord, Schedule};
    use crate::store::run_folder::write_json;

    fn rule(criterion: Criterion) -> DecisionRule {
        DecisionRule {
            criterion,
            thresholds: crate::core::metrics::Thresholds::default(),
            seed: 0,
            confidence: 0.95,
            resamples: 200,
            estimator: crate::core::estimator::Estimator::Mean,
        }
    }

    /// A run folder with one measured sample: 12 rounds of base 1.0 s, human 0.5 s and a
    /// patch at 1/1.15 of base with 3% noise either side: GSO's rule says opt_base (numpy
    /// rounds 1.15 to 1.2), strict says no (the interval is below 1.2).
    /// Twelve rounds: base at 1.0 (wiggling 3% by round), human twice as fast, the sample
    /// about 1.15x base.
    fn timings() -> Vec<RunRecord> {
        let mut runs = Vec::new();
        for r in 0..12u32 {
            let wiggle = if r % 2 == 0 { 1.03 } else { 0.97 };
            for (v, x) in [("base", 1.0), ("human", 0.5), ("s0", wiggle / 1.15)] {
                let mut run = RunRecord::plain(v, "b", r, x);
                run.value = Some(if v == "base" { x * wiggle } else { x });
                runs.push(run);
            }
        }
        runs
    }

    fn run_folder(dir: &std::path::Path) -> RunDir {
        let run = RunDir {
            root: dir.to_path_buf(),
        };
        let runs = timings();
        let log = BenchLog {
            shared_code_only: Default::default(),
            schema_version: 1,
            instance_id: "t".into(),
            sample_variant: Some("s0".into()),
            variants: vec!["base".into(), "human".into(), "s0".into()],
            benches: vec![BenchSetting {
                name: "b".into(),
                command: "x".into(),
                warmups: 0,
                runs: 12,
                max_runs: 12,
                metric: "wall".into(),
                better: Better::Lower,
                timeout_s: 1.0,
                output_check: "stdout".into(),
            }],
            schedule: Schedule {
                criterion: Criterion::STRICT,
                warmup_rounds: 0,
                min_rounds: 12,
                max_rounds: 12,
                max_seconds: 60.0,
                cpuset: None,
                replicas: 1,
                repetitions: 1,
                max_replicas: 1,
            },
            rounds: vec![],
            runs,
            decided_after: Default::default(),
            stopped_undecided: Default::default(),
            dropped: Default::default(),
            stop_reason: String::new(),
            seconds: 0.0,
            shared: Default::default(),
            telemetry_lines: Vec::new(),
            warnings: Vec::new(),
            equivalence: Vec::new(),
        };
        let sample_dir = run.sample_dir("m", "t", 0);
        write_json(&sample_dir.join("bench.json"), &log).unwrap();
        let mut report = SampleReport {
            schema_version: 1,
            instance_id: "t".into(),
            model: "m".into(),
            model_name_or_path: "m".into(),
            sample: 0,
            origin: "p.jsonl:1".into(),
            status: Status::Passed,
            detail: String::new(),
            apply_strategy: Some("git apply".into()),
            patch_sha256: "x".into(),
            image: "img".into(),
            result_key: "k".into(),
            criterion: String::new(),
            opt_base: false,
            opt_commit: false,
            decision_base: Decision::No,
            decision_commit: Decision::No,
            inconclusive: false,
            opt_stats: None,
            intervals: None,
            bench_means: vec![],
            gso_times: None,
            measured_rounds: 0,
            shared_with: None,
            energy: None,
            fingerprint_id: "f".into(),
            seconds: PhaseSeconds::default(),
            change: None,
            agent: None,
            harness_version: "0".into(),
            finished_at: String::new(),
            warnings: Vec::new(),
        };
        let strict = rule(Criterion::STRICT);
        let j = crate::core::verdict::judge(&log, "s0", &strict);
        crate::core::verdict::apply_to(&mut report, Some(&j), &strict);
        write_json(&sample_dir.join("report.json"), &report).unwrap();
        let info = RunInfo {
            schema_version: 1,
            run_id: "r".into(),
            model: "m".into(),
            k: 1,
            command: vec![],
            dataset: "ds".into(),
            dataset_digest: "d".into(),
            instance_ids: vec!["t".into()],
            dataset_instance_ids: Vec::new(),
            predictions: vec![],
            settings: Default::default(),
            decision_rule: strict,
            jobs: 1,
            cpu_plan: Default::default(),
            fingerprint: Default::default(),
            fingerprint_id: "f".into(),
            harness_version: "0".into(),
            started_at: String::new(),
            finished_at: None,
            warnings: vec![],
            samples: Some(
                [(
                    "t".to_string(),
                    vec![ExpectedSample {
                        sample: 0,
                        patch_sha256: "x".into(),
                        result_key: "k".into(),
                    }],
                )]
                .into(),
            ),
            interrupted: None,
            regradings: vec![],
            partition: None,
            merged_from: vec![],
            hacked: None,
        };
        write_json(&run.run_json(), &info).unwrap();
        run
    }

    /// A run folder whose run.json claims a K no run has (and lists no samples, as an old
    /// one would) is refused when read, never looped over; the listing of a results folder
    /// goes on without it.
    #[test]
    fn a_run_json_with_an_impossible_k_is_refused_not_allocated() {
        let d = tempfile::tempdir().unwrap();
        run_folder(&d.path().join("good"));
        let bad = run_folder(&d.path().join("bad"));
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(bad.run_json()).unwrap()).unwrap();
        json["k"] = serde_json::json!(100_000_000u64);
        json.as_object_mut().unwrap().remove("samples");
        std::fs::write(bad.run_json(), json.to_string()).unwrap();
        let e = format!("{:#}", bad.load_run_info().unwrap_err());
        assert!(
            e.contains("k = 100000000 is not a K this harness runs"),
            "{e}"
        );
        let listed = crate::app::status::lines(d.path()).unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].run_dir.ends_with("good"));
    }

    #[test]
    fn regrading_under_both_criteria_from_a_saved_run_folder() {
        let d = tempfile::tempdir().unwrap();
        let run = run_folder(d.path());
        let load = || run.load_sample("m", "t", 0).unwrap();
        assert_eq!(
            load().decision_base,
            Decision::No,
            "strict: the interval is below 1.2"
        );

        let r = regrade(&run, rule(Criterion::GSO)).unwrap();
        assert_eq!((r.samples, r.changed), (1, 1));
        let s = load();
        assert_eq!(s.criterion, "gso");
        assert!(s.opt_base, "GSO: round(np.float64(1.15), 1) = 1.2 >= 1.2");
        assert!(!s.opt_commit, "HM vs human is far below 0.95");
        let info = run.load_run_info().unwrap();
        assert_eq!(info.decision_rule.criterion, Criterion::GSO);
        assert_eq!(info.regradings.len(), 1);
        assert_eq!(info.regradings[0].from.criterion, Criterion::STRICT);

        // Back to strict with a lower bar: decided yes.
        let mut low = rule(Criterion::STRICT);
        low.thresholds.min_speedup = 1.05;
        let r = regrade(&run, low).unwrap();
        assert_eq!(r.changed, 0, "opt_base stays yes");
        let s = load();
        assert_eq!(
            (s.criterion.as_str(), s.decision_base),
            ("strict", Decision::Yes)
        );
        assert_eq!(run.load_run_info().unwrap().regradings.len(), 2);
        // The reports regenerate from the regraded folder.
        let summary = crate::store::run_folder::summarise(&run).unwrap();
        assert_eq!(summary.totals.opt_base, 1);
    }
}
