//! A task's outcome on disk: each sample's folder and report, base's and human's logs.

use super::measure::BenchLog;
use super::variant::{Role, Variant, patch_file_text, static_check};
use super::{EvalContext, SampleInput};
use crate::events::emit;
use harness_core::events::Event;
use harness_core::patch::PatchCheck;
use harness_core::records::SampleReport;
use harness_core::stats::Decision;
use harness_core::status::Status;
use harness_core::task::Task;
use harness_core::verdict::judge;
use harness_store::confined::Confined;
use harness_store::run_folder::names;

/// Records the samples of a task that cannot be evaluated at all (its image does not
/// build, its source cannot be read): not the model's fault, except for patches that are
/// empty or rejected whatever the task.
pub fn report_broken_task(
    ctx: &EvalContext,
    task: &Task,
    image: &str,
    samples: &[SampleInput],
    status: Status,
    why: &str,
) -> Vec<SampleReport> {
    let mut reports = Vec::new();
    for s in samples {
        let mut v = Variant::new(
            &format!("s{}", s.index),
            Role::Sample(0),
            Some(patch_file_text(&s.prediction)),
        );
        let (status, detail) = match static_check(&s.prediction, task, None) {
            // Not attempted at all: whatever the patch, nothing of it was looked at.
            _ if status == Status::Skipped => (status, why.to_string()),
            PatchCheck::Empty => (Status::EmptyPatch, "the patch is empty".to_string()),
            PatchCheck::Rejected(why) => (Status::PatchRejected, why),
            PatchCheck::NotADiff(why) => (Status::PatchFailed, format!("not a diff: {why}")),
            PatchCheck::Ok(_) => (status, why.to_string()),
        };
        v.apply_log = format!("{status}: {detail}\n");
        let report = sample_report(ctx, task, image, s, &v, status, detail, None);
        finish_sample(ctx, task, s, &v, None, report, &mut reports);
    }
    reports
}

#[allow(clippy::too_many_arguments)]
pub(super) fn sample_report(
    ctx: &EvalContext,
    task: &Task,
    image: &str,
    s: &SampleInput,
    v: &Variant,
    status: Status,
    detail: String,
    measured: Option<(&BenchLog, f64)>,
) -> SampleReport {
    let mut secs = v.secs.clone();
    let mut judgement = None;
    let mut energy = None;
    if let Some((log, seconds)) = measured {
        secs.measure = seconds;
        if status == Status::Passed {
            judgement = Some(judge(log, &v.label, &ctx.rule));
            energy = log.energy(&v.label);
        }
    }
    let mut report = SampleReport {
        schema_version: harness_core::records::SCHEMA_VERSION,
        instance_id: task.id.clone(),
        model: ctx.model.clone(),
        model_name_or_path: s.prediction.model_name_or_path.clone(),
        sample: s.index,
        origin: s.prediction.origin.clone(),
        status,
        detail,
        apply_strategy: v.strategy.clone(),
        patch_sha256: s.prediction.patch_sha256(),
        image: image.to_string(),
        result_key: s.result_key.clone(),
        criterion: String::new(),
        opt_base: false,
        opt_commit: false,
        decision_base: Decision::No,
        decision_commit: Decision::No,
        inconclusive: false,
        opt_stats: None,
        intervals: None,
        bench_means: Vec::new(),
        gso_times: None,
        measured_rounds: 0,
        shared_with: v.shared_with.clone(),
        energy,
        fingerprint_id: ctx.fingerprint_id.clone(),
        seconds: secs,
        change: Some(harness_core::patch::change_size(s.prediction.patch_text())),
        agent: s.prediction.agent.clone(),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        finished_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        warnings: measured
            .map(|(log, _)| log.warnings.clone())
            .unwrap_or_default(),
    };
    harness_core::verdict::apply_to(&mut report, judgement.as_ref(), &ctx.rule);
    if report.inconclusive
        && let Some(why) = measured.and_then(|(log, _)| log.stopped_undecided.get(&v.label))
    {
        report.detail = why.clone();
    }
    report
}

pub(super) fn finish_sample(
    ctx: &EvalContext,
    task: &Task,
    s: &SampleInput,
    v: &Variant,
    log: Option<&BenchLog>,
    report: SampleReport,
    reports: &mut Vec<SampleReport>,
) {
    if let Err(e) = write_sample(&ctx.store, &s.dir, v, log, &report) {
        emit(
            &ctx.events,
            Event::Warn(format!(
                "{}/{}: cannot write results: {e:#}",
                task.id, s.index
            )),
        );
    }
    emit(
        &ctx.events,
        Event::SampleDone {
            instance: task.id.clone(),
            sample: s.index,
            status: report.status,
            opt_commit: report.opt_commit,
            speedup: report.opt_stats.as_ref().map(|st| st.gm_speedup_patch_base),
            cached: false,
        },
    );
    reports.push(report);
}

fn write_sample(
    store: &Confined,
    dir: &std::path::Path,
    v: &Variant,
    log: Option<&BenchLog>,
    report: &SampleReport,
) -> anyhow::Result<()> {
    store.create_dir_all(dir)?;
    // The old report goes first: a run killed half-way through leaves no finished-looking sample.
    store.remove(&dir.join(names::REPORT_JSON))?;
    store.write_atomic(
        &dir.join(names::PATCH_DIFF),
        v.patch.as_deref().unwrap_or("").as_bytes(),
    )?;
    store.write_atomic(&dir.join(names::APPLY_LOG), v.apply_log.as_bytes())?;
    store.write_atomic(&dir.join(names::BUILD_LOG), v.build_log.as_bytes())?;
    store.write_atomic(&dir.join(names::TEST_OUTPUT), v.test_log.as_bytes())?;
    match log.filter(|l| l.covers(&v.label)) {
        Some(log) => {
            let mut mine = log.clone();
            mine.sample_variant = Some(v.label.clone());
            store.write_json(&dir.join(names::BENCH_JSON), &mine)?;
            if !log.telemetry_lines.is_empty() {
                let mut text = log.telemetry_lines.join("\n");
                text.push('\n');
                store.write_atomic(&dir.join(names::TELEMETRY_JSONL), text.as_bytes())?;
            }
        }
        None => {
            store.remove(&dir.join(names::BENCH_JSON))?;
        }
    }
    store.write_json(&dir.join(names::REPORT_JSON), report)
}

pub(super) fn write_reference_logs(store: &Confined, dir: &std::path::Path, refs: &[Variant]) {
    for v in refs {
        let d = dir.join(&v.label);
        if store.create_dir_all(&d).is_err() {
            continue;
        }
        let status = match &v.failure {
            Some((s, detail)) => format!("{s}: {detail}\n"),
            None => "ok\n".into(),
        };
        let _ = store.write_atomic(&d.join(names::STATUS_TXT), status.as_bytes());
        let _ = store.write_atomic(&d.join(names::APPLY_LOG), v.apply_log.as_bytes());
        let _ = store.write_atomic(&d.join(names::BUILD_LOG), v.build_log.as_bytes());
        let _ = store.write_atomic(&d.join(names::TEST_OUTPUT), v.test_log.as_bytes());
    }
}
