//! GSO's own folder layout of a run, so GSO's tools read it as one of theirs (`cd gso`):
//! each rollout's predictions (`predictions/<rollout>.jsonl`) and, per rollout and
//! instance, what gsobench's `grade_instance` leaves in
//! `logs/run_evaluation/<run_id>/<rollout>/<instance>/`: `patch.diff`, `test_output.txt`
//! (GSO's eval.sh markers around every timed run of the rounds base, the patch and human
//! all ran, so GSO's `get_eval_report` regrades it) and `report.json` (GSO's per-instance
//! report, with this harness's verdict in `opt_base` / `opt_commit`).
//!
//! As in GSO: an empty patch has no instance folder (GSO does not evaluate it), a sample
//! that was not evaluated (`error`) has its patch and no report, an unsubmitted instance is
//! in no predictions file.

use serde_json::{Map, Value, json};

use super::{Exporter, ReportFile, Summary};
use crate::core::gso::{GsoCategory, GsoRuns, gso_opt_stats, gso_runs};
use crate::core::records::SampleReport;
use crate::core::status::Status;
use crate::store::run_folder::{RunDir, model_slug, names};

/// GSO's eval.sh markers (gsobench's `grading/evalscript.py`).
mod marker {
    pub const START_EVAL_PATCH: &str = "Applying patch...";
    pub const APPLY_PATCH_FAIL: &str = ">>>>> Patch Apply Failed";
    pub const APPLY_PATCH_PASS: &str = ">>>>> Applied Patch";
    pub const INSTALL_FAIL: &str = ">>>>> Init Failed";
    pub const INSTALL_PASS: &str = ">>>>> Init Succeeded";
    pub const TESTS_ERROR: &str = ">>>>> Tests Errored";
    pub const TESTS_PASSED: &str = ">>>>> Tests Passed";
    pub const TESTS_TIMEOUT: &str = ">>>>> Tests Timed Out";
}

/// The layout's files.
pub struct GsoLogs {
    pub run: RunDir,
}

/// The text a sample stands for in GSO's predictions file, or a note when the harness has
/// no copy (a sample not run yet: GSO counts a submitted patch with no report as `error`).
fn patch_text(run: &RunDir, model: &str, s: Option<&SampleReport>) -> String {
    let Some(s) = s else {
        return "# the harness has no copy of this patch: the sample was not run\n".into();
    };
    if s.status == Status::EmptyPatch {
        return String::new();
    }
    let path = run
        .sample_dir(model, &s.instance_id, s.sample)
        .join(names::PATCH_DIFF);
    std::fs::read_to_string(path).unwrap_or_else(|_| {
        "# the harness has no copy of this patch: the sample was not run\n".into()
    })
}

/// One section of timings, as GSO's eval.sh prints it (`>>>>> Test i`, then each run's
/// `Execution time: Xs`). Rust prints an f64 in full, without an exponent, so GSO's
/// `[\d\.]+` reads back the same number.
fn section(out: &mut String, start: &str, end: &str, lists: &[Vec<f64>]) {
    out.push_str(&format!(">>>>> Start {start} Output\n"));
    for (i, xs) in lists.iter().enumerate() {
        out.push_str(&format!(">>>>> Test {i}\n"));
        for x in xs {
            out.push_str(&format!("Execution time: {x}s\n"));
        }
    }
    out.push_str(&format!(">>>>> End {end} Output\n"));
}

/// A passed sample's test output: base, patch and commit (human) sections.
fn passed_output(runs: &GsoRuns) -> String {
    let mut out = String::from("Running performance test before patch...\n");
    out.push_str(&format!("{}\n", marker::START_EVAL_PATCH));
    out.push_str(&format!(
        "{}\nInstalling repo...\n{}\n",
        marker::APPLY_PATCH_PASS,
        marker::INSTALL_PASS
    ));
    out.push_str(&format!(
        "Running performance test after patch...\n{}\n",
        marker::TESTS_PASSED
    ));
    section(&mut out, "Base", "Base", &runs.base);
    section(&mut out, "Patch", "Patch", &runs.patch);
    out.push_str("Checking out commit...\n");
    section(&mut out, "Commit", "Commit", &runs.commit);
    out
}

/// The test output of a sample that did not pass, by where GSO's eval.sh would have
/// stopped.
fn failed_output(status: Status) -> String {
    let after_patch = |rest: &str| {
        format!(
            "{}\n{}\nInstalling repo...\n{rest}\n",
            marker::START_EVAL_PATCH,
            marker::APPLY_PATCH_PASS
        )
    };
    match status {
        Status::BaseFailed => format!(
            "Running performance test before patch...\n{}\n",
            marker::TESTS_ERROR
        ),
        Status::PatchFailed | Status::PatchRejected => {
            format!(
                "{}\n{}\n",
                marker::START_EVAL_PATCH,
                marker::APPLY_PATCH_FAIL
            )
        }
        Status::BuildFailed => after_patch(marker::INSTALL_FAIL),
        Status::Timeout => after_patch(&format!(
            "{}\nRunning performance test after patch...\n{}",
            marker::INSTALL_PASS,
            marker::TESTS_TIMEOUT
        )),
        _ => after_patch(&format!(
            "{}\nRunning performance test after patch...\n{}",
            marker::INSTALL_PASS,
            marker::TESTS_ERROR
        )),
    }
}

/// GSO's `get_eval_report` entry for a sample: its flags, and for a passed one the times
/// of the test output, `time_stats` and `opt_stats`; `opt_base`/`opt_commit` are this
/// harness's verdict.
fn instance_report(s: &SampleReport, runs: Option<&GsoRuns>) -> Value {
    let category = GsoCategory::of(Some(s.status));
    let mut r = json!({
        "patch_is_None": false,
        "patch_exists": true,
        "base_successfully_run": category != GsoCategory::BaseFailed,
        "patch_successfully_applied": matches!(category, GsoCategory::TestFailed | GsoCategory::Passed),
        "test_passed": category == GsoCategory::Passed,
        "base_times": null,
        "patch_times": null,
        "commit_times": null,
        "main_times": null,
        "opt_base": false,
        "opt_commit": false,
        "opt_main": false,
        "time_stats": {},
        "opt_stats": {},
    });
    let (Some(runs), Some(times)) = (runs, s.gso_times.as_ref()) else {
        return r;
    };
    r["base_times"] = json!(runs.base);
    r["patch_times"] = json!(runs.patch);
    r["commit_times"] = json!(runs.commit);
    r["opt_base"] = json!(s.opt_base);
    r["opt_commit"] = json!(s.opt_base && s.opt_commit);
    // GSO's opt_stats and time_stats are one map in its run report; apart here.
    const TIME_KEYS: [&str; 9] = [
        "base_mean",
        "base_std",
        "patch_mean",
        "patch_std",
        "commit_mean",
        "commit_std",
        "main_mean",
        "main_std",
        "per_test_means",
    ];
    if let Ok(Value::Object(mut all)) = serde_json::to_value(gso_opt_stats(times)) {
        all.remove("report_file");
        let time_stats: Map<String, Value> = TIME_KEYS
            .iter()
            .filter_map(|k| all.remove(*k).map(|v| (k.to_string(), v)))
            .collect();
        r["time_stats"] = Value::Object(time_stats);
        r["opt_stats"] = Value::Object(all);
    }
    r
}

/// One rollout's files: its predictions and each evaluated instance's folder.
fn rollout_files(
    run: &RunDir,
    summary: &Summary,
    i: usize,
    name: &str,
    out: &mut Vec<ReportFile>,
) -> anyhow::Result<()> {
    let model = &summary.info.model;
    let slug = model_slug(name);
    let base = format!(
        "{}/logs/run_evaluation/{}/{slug}",
        names::GSO_DIR,
        summary.info.run_id
    );
    let mut predictions = String::new();
    for inst in &summary.instances {
        if i >= inst.submitted {
            continue;
        }
        let sample = inst.samples.iter().find(|s| s.sample == i);
        let patch = patch_text(run, model, sample);
        let row = json!({"instance_id": inst.instance_id, "model_name_or_path": name, "model_patch": patch});
        predictions.push_str(&format!("{row}\n"));
        if patch.is_empty() {
            continue;
        }
        let dir = format!("{base}/{}", inst.instance_id);
        out.push(ReportFile {
            name: format!("{dir}/{}", names::PATCH_DIFF),
            bytes: patch.into_bytes(),
        });
        let Some(s) = sample.filter(|s| GsoCategory::of(Some(s.status)).completed()) else {
            continue;
        };
        let runs = if s.passed() {
            sample_runs(run, model, s)
        } else {
            None
        };
        // A passed sample without its timings has nothing GSO could grade.
        if s.passed() && runs.is_none() {
            continue;
        }
        let output = match &runs {
            Some(r) => passed_output(r),
            None => failed_output(s.status),
        };
        out.push(ReportFile {
            name: format!("{dir}/{}", names::TEST_OUTPUT),
            bytes: output.into_bytes(),
        });
        let report = json!({ inst.instance_id.clone(): instance_report(s, runs.as_ref()) });
        let mut text = serde_json::to_string_pretty(&report)?;
        text.push('\n');
        out.push(ReportFile {
            name: format!("{dir}/{}", names::REPORT_JSON),
            bytes: text.into_bytes(),
        });
    }
    out.push(ReportFile {
        name: format!("{}/predictions/{slug}.jsonl", names::GSO_DIR),
        bytes: predictions.into_bytes(),
    });
    Ok(())
}

fn sample_runs(run: &RunDir, model: &str, s: &SampleReport) -> Option<GsoRuns> {
    let (log, label) = crate::store::run_folder::sample_bench_log(run, model, s)?;
    gso_runs(&log, &label)
}

impl Exporter for GsoLogs {
    fn files(&self, summary: &Summary) -> anyhow::Result<Vec<ReportFile>> {
        if !summary.info.decision_rule.criterion.gso_reports() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for (i, name) in super::gso::rollout_names(summary).iter().enumerate() {
            rollout_files(&self.run, summary, i, name, &mut out)?;
        }
        Ok(out)
    }
}
