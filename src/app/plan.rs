//! Raw flags turned into a validated plan before any work starts.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::core::events::Verbosity;
use crate::core::rule::DecisionRule;
pub use crate::core::settings::{Budget, Settings};
use crate::store::run_folder::sanitize;

/// Everything `opt-at-k` needs, checked.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub model: String,
    pub predictions: Vec<PathBuf>,
    pub k: usize,
    pub dataset: PathBuf,
    pub results_root: PathBuf,
    pub run_id: String,
    pub instance_ids: Vec<String>,
    pub jobs: usize,
    /// The rule and budget as given (what run.json and the result key record).
    pub settings: Settings,
    /// How verdicts are reached (criterion, thresholds, seed, estimator), from `settings`.
    pub rule: DecisionRule,
    /// What every task's measurement may spend, over the task's own settings.
    pub budget: Budget,
    pub verbosity: Verbosity,
    pub json: bool,
    /// GPU devices, `--skip-gpu`, the NVML library and the telemetry rate.
    pub gpu: crate::sandbox::gpu::GpuOptions,
    /// The command line, for run.json.
    pub command: Vec<String>,
    /// `--partition I/N`: only this part of the selected tasks.
    pub partition: Option<crate::core::partition::Partition>,
    /// `--hacked-ids FILE`, read.
    pub hacked: Option<crate::core::gso::HackedIds>,
    /// `--rollout-per-file`.
    pub rollout_per_file: bool,
    /// `--disk-check`: refuse (or only warn) when the run's containers may not fit on disk.
    pub disk_check: crate::core::disk::DiskCheck,
    /// `--timeout`: the most one instance's evaluation may take (GSO's spelling).
    pub instance_timeout: Option<std::time::Duration>,
}

/// The flags as given.
#[derive(Debug, Clone)]
pub struct RawRunOptions {
    pub model: String,
    pub predictions: Vec<PathBuf>,
    pub k: usize,
    pub dataset: PathBuf,
    pub results_root: PathBuf,
    pub run_id: Option<String>,
    pub instance_ids: Vec<String>,
    pub jobs: Option<usize>,
    pub settings: Settings,
    pub verbosity: Verbosity,
    pub json: bool,
    pub gpu: crate::sandbox::gpu::GpuOptions,
    /// `--partition` as given ("I/N").
    pub partition: Option<String>,
    /// `--hacked-ids FILE`.
    pub hacked_ids: Option<PathBuf>,
    /// `--rollout-per-file`.
    pub rollout_per_file: bool,
    /// `--disk-check`.
    pub disk_check: crate::core::disk::DiskCheck,
    /// `--timeout SECONDS`.
    pub instance_timeout: Option<std::time::Duration>,
}

impl RunPlan {
    pub fn resolve(raw: RawRunOptions) -> Result<RunPlan> {
        if raw.model.trim().is_empty() {
            bail!("--model: must not be empty");
        }
        if raw.k == 0 {
            bail!("--k: must be at least 1");
        }
        if raw.k > crate::core::records::MAX_K {
            bail!("--k: at most {}", crate::core::records::MAX_K);
        }
        if raw.predictions.is_empty() {
            bail!("--predictions: at least one file is needed");
        }
        for p in &raw.predictions {
            if !p.is_file() {
                bail!("--predictions {}: no such file", p.display());
            }
        }
        if !raw.dataset.is_dir() {
            bail!("--dataset {}: not a folder", raw.dataset.display());
        }
        if let Some((key, why)) = raw.settings.problems().into_iter().next() {
            bail!("--{}: {why}", key.replace('_', "-"));
        }
        if !(raw.gpu.telemetry_hz.is_finite()
            && raw.gpu.telemetry_hz > 0.0
            && raw.gpu.telemetry_hz <= 1000.0)
        {
            bail!(
                "--telemetry-hz: {} is not a rate between 0 and 1000 samples per second",
                raw.gpu.telemetry_hz
            );
        }
        let partition = raw
            .partition
            .as_deref()
            .map(crate::core::partition::Partition::parse)
            .transpose()?;
        let jobs = raw.jobs.unwrap_or(1);
        if jobs == 0 {
            bail!("--jobs: must be at least 1");
        }
        // The default run id is a function of the command, so repeating a command resumes it.
        let run_id = match raw.run_id {
            Some(id) => {
                if id.is_empty() || sanitize(&id) != id {
                    bail!("--run-id {id:?}: use only letters, digits, '.', '_' and '-'");
                }
                id
            }
            // Each part in its own folder, so parts run side by side on one machine.
            None => {
                let id = |slug: String| match partition {
                    Some(p) => format!("{slug}-k{}-part{}of{}", raw.k, p.index, p.count),
                    None => format!("{slug}-k{}", raw.k),
                };
                let current = id(crate::store::run_folder::model_slug(&raw.model));
                // A run an earlier build started under the model's older folder name is
                // resumed where it is.
                let legacy = id(crate::store::run_folder::legacy_model_slug(&raw.model));
                if !raw.results_root.join(&current).exists()
                    && raw.results_root.join(&legacy).is_dir()
                {
                    legacy
                } else {
                    current
                }
            }
        };
        let mut predictions = raw.predictions;
        if raw.rollout_per_file {
            // File i is sample i, in GSO's order (`opt_at_k.py` natural-sorts its files, so
            // `run_10` comes after `run_9` whatever order the shell gave).
            predictions.sort_by_key(|p| crate::core::text::natural_key(&p.to_string_lossy()));
        }
        Ok(RunPlan {
            model: raw.model,
            predictions,
            k: raw.k,
            dataset: raw.dataset,
            results_root: raw.results_root,
            run_id,
            instance_ids: raw.instance_ids,
            jobs,
            settings: raw.settings,
            rule: raw.settings.rule(),
            budget: raw.settings.budget(),
            verbosity: raw.verbosity,
            json: raw.json,
            gpu: raw.gpu,
            command: std::env::args().collect(),
            partition,
            hacked: raw
                .hacked_ids
                .as_deref()
                .map(crate::store::inputs::load_hacked_ids)
                .transpose()?,
            rollout_per_file: raw.rollout_per_file,
            disk_check: raw.disk_check,
            instance_timeout: raw.instance_timeout,
        })
    }
}
