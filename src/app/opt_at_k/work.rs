//! What a run has to do: its predictions, its folder, every sample keyed and checked against what is saved, run.json.

//! The main job: a validated plan in, a finished run folder and its summary out.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::app::plan::RunPlan;
use crate::core::events::Event;
use crate::core::records::{InputFile, RunInfo};
use crate::core::task::Task;
use crate::sandbox::docker::image::{image_tag, local_image_id};
use crate::sandbox::eval::{SampleInput, result_key};
use crate::sandbox::events::{Events, emit};
use crate::sandbox::source::{Material, materialize};
use crate::store::dataset::Dataset;
use crate::store::predictions::{LoadOptions, Prediction};
use crate::store::run_folder::{RunDir, names};

/// What a finished (or interrupted) run left.
use super::*;

pub(super) fn sha256_file(path: &std::path::Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// Everything a sample's result depends on besides task source, image and patch: the
/// measurement protocol, the rule and budget of the command line, every setting of the task
/// (`Task::evaluation_identity`) and the harness's own in-container files (`assets`), each
/// as canonical JSON. Fix a task's check or the harness's guard, and saved samples are
/// measured again rather than reused.
pub(super) fn measurement_settings(plan: &RunPlan, task: &Task) -> BTreeMap<&'static str, String> {
    let mut s = BTreeMap::new();
    s.insert("protocol", "interleaved-rotating-adaptive-v3".to_string());
    s.insert(
        "rule",
        serde_json::to_string(&plan.rule).unwrap_or_default(),
    );
    s.insert(
        "settings",
        serde_json::to_string(&plan.settings).unwrap_or_default(),
    );
    s.insert("task", task.evaluation_identity().to_string());
    s.insert("harness_assets", crate::sandbox::assets::digest());
    s
}

pub(super) struct TaskWork<'a> {
    pub(super) task: &'a Task,
    pub(super) material: Result<Material, String>,
    pub(super) image: String,
    pub(super) samples: Vec<SampleInput>,
}

/// Warnings about the input: shown as they come and kept for run.json.
pub(super) struct Warnings<'a> {
    pub(super) events: &'a Events,
    pub(super) all: Vec<String>,
}

impl Warnings<'_> {
    pub(super) fn push(&mut self, w: String) {
        emit(self.events, Event::Warn(w.clone()));
        self.all.push(w);
    }
}

/// The predictions, the first K samples of each selected instance.
pub(super) fn read_predictions(
    plan: &RunPlan,
    dataset: &Dataset,
    tasks: &[&Task],
    warnings: &mut Warnings,
) -> Result<BTreeMap<String, BTreeMap<usize, Prediction>>> {
    let predictions = crate::store::predictions::load(
        &plan.predictions,
        &LoadOptions {
            model: plan.model.clone(),
            max_patch_bytes: crate::core::patch::MAX_PATCH_BYTES,
            rollout_per_file: plan.rollout_per_file,
        },
    )?;
    for w in &predictions.warnings {
        warnings.push(w.clone());
    }
    for (id, preds) in &predictions.by_instance {
        if !dataset.tasks.contains_key(id)
            && !dataset.invalid.contains_key(id)
            && let Some(first) = preds.values().next()
        {
            warnings.push(format!(
                "{}: unknown instance id {id:?} (not in dataset {}); its {} prediction(s) are ignored",
                first.origin,
                plan.dataset.display(),
                preds.len()
            ));
        }
    }
    if predictions.total() == 0 {
        bail!(
            "no usable prediction in {}",
            plan.predictions
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut chosen = BTreeMap::new();
    for task in tasks {
        let mut preds = predictions
            .by_instance
            .get(&task.id)
            .cloned()
            .unwrap_or_default();
        let beyond = preds.split_off(&plan.k);
        if !beyond.is_empty() {
            emit(
                warnings.events,
                Event::Debug(format!(
                    "{}: {} sample(s) with an index of {} or more not used",
                    task.id,
                    beyond.len(),
                    plan.k
                )),
            );
        }
        chosen.insert(task.id.clone(), preds);
    }
    if chosen.values().all(BTreeMap::is_empty) {
        // Every sample would be unsubmitted: a 0% run, most likely the wrong file or dataset.
        let named: Vec<String> = predictions
            .by_instance
            .iter()
            .take(5)
            .filter_map(|(id, p)| p.values().next().map(|r| format!("{id:?} ({})", r.origin)))
            .collect();
        bail!(
            "no prediction names a selected instance of dataset {} ({} selected); the predictions \
             name {}{}",
            plan.dataset.display(),
            tasks.len(),
            named.join(", "),
            if predictions.by_instance.len() > 5 {
                format!(" and {} more", predictions.by_instance.len() - 5)
            } else {
                String::new()
            }
        );
    }
    Ok(chosen)
}

/// The run folder, refusing one that holds another model's run.
pub(super) fn open_run_dir(plan: &RunPlan) -> Result<RunDir> {
    let run_dir = RunDir::new(&plan.results_root, &plan.run_id);
    if let Ok(previous) = run_dir.load_run_info()
        && previous.model != plan.model
    {
        bail!(
            "{}: this run folder holds model {:?}'s results, not {:?}'s; pick another --run-id",
            run_dir.root.display(),
            previous.model,
            plan.model
        );
    }
    if let Ok(previous) = run_dir.load_run_info() {
        let part = |p: Option<(usize, usize)>| match p {
            Some((i, n)) => format!("partition {i}/{n}"),
            None => "the whole selection".to_string(),
        };
        let before = previous.partition.as_ref().map(|p| (p.index, p.count));
        let now = plan.partition.map(|p| (p.index, p.count));
        if before != now {
            bail!(
                "{}: this run folder holds {} of its run, not {}; pick another --run-id",
                run_dir.root.display(),
                part(before),
                part(now)
            );
        }
    }
    // The run folder is made (or found) as a folder of the results folder, never a link.
    crate::store::confined::Confined::beneath(&plan.results_root).create_dir_all(&run_dir.root)?;
    Ok(run_dir)
}

/// A task's image build log in the run folder.
pub(super) fn build_log(run_dir: &RunDir, instance_id: &str) -> PathBuf {
    run_dir
        .root
        .join(names::IMAGES_DIR)
        .join(format!("{instance_id}.build.log"))
}

/// The folder of base's and human's logs for a task.
pub(super) fn reference_dir(run_dir: &RunDir, model: &str, instance_id: &str) -> PathBuf {
    run_dir
        .model_dir(model)
        .join(instance_id)
        .join(names::REFERENCE_DIR)
}

/// Refuses, before any container, a task whose places in the run folder hold a link: the
/// evaluation and the image build write there (each sample's folder, base's and human's
/// logs, the build log) by path, and a link on the way would take the write elsewhere.
fn refuse_links(
    run_dir: &RunDir,
    model: &str,
    instance_id: &str,
    samples: &[SampleInput],
) -> Result<()> {
    let store = run_dir.store();
    let reference = reference_dir(run_dir, model, instance_id);
    let files = [
        names::STATUS_TXT,
        names::APPLY_LOG,
        names::BUILD_LOG,
        names::TEST_OUTPUT,
    ];
    for variant in ["base", "human"] {
        for f in files {
            store.check(&reference.join(variant).join(f))?;
        }
    }
    for s in samples {
        for f in files.iter().skip(1).chain(&[
            names::PATCH_DIFF,
            names::BENCH_JSON,
            names::TELEMETRY_JSONL,
            names::REPORT_JSON,
        ]) {
            store.check(&s.dir.join(f))?;
        }
    }
    store.check(&build_log(run_dir, instance_id))
}

/// What there is to do.
pub(super) struct Planned<'a> {
    pub(super) work: Vec<TaskWork<'a>>,
    pub(super) total_samples: usize,
    pub(super) reused: usize,
    /// Saved samples, announced to progress once the total is known.
    pub(super) saved_done: Vec<Event>,
    pub(super) expected: BTreeMap<String, Vec<crate::core::records::ExpectedSample>>,
    pub(super) digests: Vec<String>,
}

/// Materialises every task, keys every sample, and reuses what is saved for the same task,
/// image, patch and settings on this machine.
pub(super) async fn plan_work<'a>(
    plan: &RunPlan,
    tasks: &[&'a Task],
    chosen: &BTreeMap<String, BTreeMap<usize, Prediction>>,
    machine: &Machine,
    run_dir: &RunDir,
    warnings: &mut Warnings<'_>,
) -> Result<Planned<'a>> {
    let cache_dir = plan.results_root.join(".cache");
    let fingerprint_id = &machine.fingerprint_id;
    let mut planned = Planned {
        work: Vec::new(),
        total_samples: 0,
        reused: 0,
        saved_done: Vec::new(),
        expected: BTreeMap::new(),
        digests: Vec::new(),
    };
    let mut other_machine = 0usize;
    for &task in tasks {
        let material = materialize(task, &cache_dir).map_err(|e| format!("{e:#}"));
        let (digest, image) = match &material {
            Ok(m) => {
                let base_id = local_image_id(&machine.engine, &task.base_image)
                    .await?
                    .unwrap_or_else(|| task.base_image.clone());
                (m.digest.clone(), image_tag(task, m, &base_id))
            }
            Err(e) => {
                warnings.push(format!("task {}: {e}", task.id));
                (String::from("unreadable"), String::from("none"))
            }
        };
        planned.digests.push(format!("{}={digest}", task.id));
        let settings = measurement_settings(plan, task);
        let mut samples = Vec::new();
        for (&index, pred) in &chosen[&task.id] {
            planned.total_samples += 1;
            let key = result_key(&digest, &image, &pred.patch_sha256(), &settings);
            planned.expected.entry(task.id.clone()).or_default().push(
                crate::core::records::ExpectedSample {
                    sample: index,
                    patch_sha256: pred.patch_sha256(),
                    result_key: key.clone(),
                },
            );
            let saved = run_dir.load_sample(&plan.model, &task.id, index);
            // A result measured on another machine (or by another harness build) is never
            // mixed in: the sample is measured again here.
            if let Some(s) = &saved
                && s.result_key == key
                && &s.fingerprint_id != fingerprint_id
            {
                other_machine += 1;
            }
            if let Some(saved) = saved
                && saved.result_key == key
                && &saved.fingerprint_id == fingerprint_id
                && !saved.status.retried_on_resume()
            {
                planned.reused += 1;
                planned.saved_done.push(Event::SampleDone {
                    instance: task.id.clone(),
                    sample: index,
                    status: saved.status,
                    opt_commit: saved.opt_commit,
                    speedup: saved.opt_stats.as_ref().map(|s| s.gm_speedup_patch_base),
                    cached: true,
                });
                continue;
            }
            let dir = run_dir.sample_dir(&plan.model, &task.id, index);
            samples.push(SampleInput {
                index,
                prediction: pred.clone(),
                dir,
                result_key: key,
            });
        }
        if !samples.is_empty() {
            refuse_links(run_dir, &plan.model, &task.id, &samples)?;
            planned.work.push(TaskWork {
                task,
                material,
                image,
                samples,
            });
        }
    }
    if other_machine > 0 {
        warnings.push(format!(
            "{other_machine} saved sample(s) in {} were measured on another machine or harness build \
             (fingerprint differs from {fingerprint_id}); measuring them again here rather than mixing",
            run_dir.root.display()
        ));
    }
    Ok(planned)
}

/// run.json as the run starts.
pub(super) fn run_info(
    plan: &RunPlan,
    tasks: &[&Task],
    machine: &Machine,
    planned: &Planned,
    warnings: Vec<String>,
    partition: Option<crate::core::partition::PartitionInfo>,
    dataset_ids: &[String],
) -> Result<RunInfo> {
    Ok(RunInfo {
        schema_version: crate::core::records::SCHEMA_VERSION,
        run_id: plan.run_id.clone(),
        model: plan.model.clone(),
        k: plan.k,
        command: plan.command.clone(),
        dataset: plan.dataset.display().to_string(),
        dataset_digest: hex::encode(Sha256::digest(planned.digests.join("\n").as_bytes())),
        instance_ids: tasks.iter().map(|t| t.id.clone()).collect(),
        dataset_instance_ids: dataset_ids.to_vec(),
        predictions: plan
            .predictions
            .iter()
            .map(|p| {
                Ok(InputFile {
                    path: p.display().to_string(),
                    sha256: sha256_file(p)?,
                })
            })
            .collect::<Result<_>>()?,
        settings: plan.settings,
        decision_rule: plan.rule,
        jobs: plan.jobs,
        cpu_plan: machine.cpu_plan.clone(),
        fingerprint: machine.fingerprint.clone(),
        fingerprint_id: machine.fingerprint_id.clone(),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        finished_at: None,
        warnings,
        samples: Some(planned.expected.clone()),
        interrupted: None,
        regradings: Vec::new(),
        hacked: plan.hacked.clone(),
        partition: partition.map(|p| crate::core::partition::PartitionInfo {
            task_digests: planned.digests.clone(),
            ..p
        }),
        merged_from: Vec::new(),
    })
}
