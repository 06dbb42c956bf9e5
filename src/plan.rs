//! Raw flags turned into a validated plan before any work starts.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::events::Verbosity;
use crate::metrics::Thresholds;
use crate::results::sanitize;
pub use crate::rule::Criterion;
use crate::rule::DecisionRule;

/// What the measurement may spend, from the command line over each task's own settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub min_rounds: Option<u32>,
    pub max_rounds: Option<u32>,
    /// None: the task's own `measure.max_seconds`.
    pub max_seconds: Option<f64>,
    pub timeout_scale: f64,
    /// Containers per variant (None: the task's, or the default).
    pub replicas: Option<u32>,
}

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
    /// How verdicts are reached (criterion, thresholds, seed, estimator).
    pub rule: DecisionRule,
    /// What every task's measurement may spend, over the task's own settings.
    pub budget: Budget,
    pub verbosity: Verbosity,
    pub json: bool,
    /// GPU devices, `--skip-gpu`, the NVML library and the telemetry rate.
    pub gpu: crate::gpu::GpuOptions,
    /// The command line, for run.json.
    pub command: Vec<String>,
    /// `--partition I/N`: only this part of the selected tasks.
    pub partition: Option<crate::partition::Partition>,
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
    pub timeout_scale: f64,
    pub min_speedup: f64,
    pub opt_thresh: f64,
    pub criterion: Criterion,
    pub seed: u64,
    pub estimator: Option<crate::rule::Estimator>,
    pub min_rounds: Option<u32>,
    pub max_rounds: Option<u32>,
    pub max_measure_seconds: Option<f64>,
    pub replicas: Option<u32>,
    pub verbosity: Verbosity,
    pub json: bool,
    pub gpu: crate::gpu::GpuOptions,
    /// `--partition` as given ("I/N").
    pub partition: Option<String>,
}

impl RunPlan {
    pub fn resolve(raw: RawRunOptions) -> Result<RunPlan> {
        if raw.model.trim().is_empty() {
            bail!("--model: must not be empty");
        }
        if raw.k == 0 {
            bail!("--k: must be at least 1");
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
        if !(raw.timeout_scale.is_finite() && raw.timeout_scale > 0.0) {
            bail!(
                "--timeout-scale: {} is not a positive number",
                raw.timeout_scale
            );
        }
        if !(raw.min_speedup.is_finite() && raw.min_speedup > 0.0) {
            bail!(
                "--min-speedup: {} is not a positive number",
                raw.min_speedup
            );
        }
        if !(raw.opt_thresh.is_finite() && raw.opt_thresh > 0.0) {
            bail!("--opt-thresh: {} is not a positive number", raw.opt_thresh);
        }
        if raw.min_rounds == Some(0) {
            bail!("--min-rounds: must be at least 1");
        }
        if let (Some(min), Some(max)) = (raw.min_rounds, raw.max_rounds)
            && max < min
        {
            bail!("--max-rounds {max} is below --min-rounds {min}");
        }
        if raw.replicas == Some(0) {
            bail!("--replicas: must be at least 1");
        }
        if raw.max_rounds == Some(0) {
            bail!("--max-rounds: must be at least 1");
        }
        if let Some(s) = raw.max_measure_seconds
            && !(s.is_finite() && s > 0.0)
        {
            bail!("--max-measure-seconds: {s} is not a positive number");
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
            .map(crate::partition::Partition::parse)
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
            None => match partition {
                Some(p) => format!(
                    "{}-k{}-part{}of{}",
                    crate::results::model_slug(&raw.model),
                    raw.k,
                    p.index,
                    p.count
                ),
                None => format!("{}-k{}", crate::results::model_slug(&raw.model), raw.k),
            },
        };
        Ok(RunPlan {
            model: raw.model,
            predictions: raw.predictions,
            k: raw.k,
            dataset: raw.dataset,
            results_root: raw.results_root,
            run_id,
            instance_ids: raw.instance_ids,
            jobs,
            rule: DecisionRule {
                criterion: raw.criterion,
                thresholds: Thresholds {
                    min_speedup: raw.min_speedup,
                    opt_thresh: raw.opt_thresh,
                },
                seed: raw.seed,
                confidence: crate::rule::CONFIDENCE,
                resamples: crate::rule::RESAMPLES,
                estimator: raw.estimator.unwrap_or(crate::rule::ESTIMATOR),
            },
            budget: Budget {
                min_rounds: raw.min_rounds,
                max_rounds: raw.max_rounds,
                max_seconds: raw.max_measure_seconds,
                timeout_scale: raw.timeout_scale,
                replicas: raw.replicas,
            },
            verbosity: raw.verbosity,
            json: raw.json,
            gpu: raw.gpu,
            command: std::env::args().collect(),
            partition,
        })
    }
}
