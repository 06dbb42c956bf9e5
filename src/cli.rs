//! The command line: flags parsed by clap, turned into plans, handed to the library.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use futures::StreamExt;

use crate::dataset::Dataset;
use crate::docker::Engine;
use crate::docker::image::{ensure_base_images, ensure_task_image};
use crate::events::Verbosity;
use crate::plan::{Criterion, RawRunOptions, RunPlan};
use crate::results::RunDir;

#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version,
    about = "Evaluate agent patches that make software faster: Opt@K and pass@k, measured in containers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Only warnings and the final summary.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Every phase of every variant.
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

/// Parses the command line like clap's `Parser::parse`, except that a usage error exits 1
/// (bad input) rather than clap's 2, which is the exit code of a missed `--fail-under`
/// threshold. `--help` and `--version` exit 0. (The binary's `main` still calls
/// `Cli::parse()`: switching it to this function makes every usage error exit 1.)
pub fn parse_args() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 1 } else { 0 });
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job: evaluate the first K samples of each instance for a model.
    #[command(name = "opt-at-k")]
    OptAtK(Box<OptAtKArgs>),
    /// A batch: many models x tasks x rollouts from one config file, in one folder; each
    /// entry an opt-at-k run, one after another, then a ranking of them.
    Run(Box<RunArgs>),
    /// Build (or confirm cached) the task images only.
    Build(BuildArgs),
    /// Regenerate every report of a run folder from its saved results (no Docker).
    Report(ReportArgs),
    /// One task, found by a prefix of its base or human commit: base, human and one patch
    /// measured and judged three ways.
    Local(Box<LocalArgs>),
    /// List the dataset's tasks with their base and human commits (no Docker).
    Tasks(TasksArgs),
    /// Agents named in agents.toml: `harness agent run` makes a predictions file.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// What a run folder holds: done, failed and left samples per model and task (no Docker).
    Status(StatusArgs),
    /// Put the folders of `opt-at-k --partition I/N` runs back together into one run folder
    /// and regenerate its reports (no Docker).
    Merge(MergeArgs),
    /// Check the Docker engine, disk, base image, NVIDIA runtime and NVML; say what to fix.
    Doctor(DoctorArgs),
    /// The harness's images: `harness images gc` removes those no task needs any more.
    #[command(subcommand)]
    Images(ImagesCommand),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The batch's config file (TOML: name, parallelism, batch-wide options, [[entry]]
    /// tables; see README, `harness run`).
    pub config: PathBuf,
    /// Where the batch folder goes: RESULTS_DIR/<name>/.
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    /// Print batch.json on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Exit 2 when an entry's figure is below a threshold: opt@k=X or pass@k=X (X percent,
    /// k from 1 to every entry's K). Repeatable; every entry is judged.
    #[arg(long, value_name = "METRIC@k=X")]
    pub fail_under: Vec<String>,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Run folders (evaluation_results/<run_id>), or folders holding run folders.
    #[arg(required = true)]
    pub run_dirs: Vec<PathBuf>,
    /// Print the counts as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The partition run folders, one per part (1/N ... N/N).
    #[arg(required = true)]
    pub run_dirs: Vec<PathBuf>,
    /// The merged run folder (its name is the merged run's id): new, empty, or an earlier
    /// merge of the same run, which is replaced.
    #[arg(long)]
    pub out: PathBuf,
    /// Print the machine-readable summary (JSON) on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ci: CiArgs,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The NVML library to load (default: the driver's libnvidia-ml.so.1).
    #[arg(long, env = "HARNESS_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,
    /// This host must run GPU tasks: no NVML or no NVIDIA runtime is a FAIL, not a WARN.
    #[arg(long)]
    pub require_gpu: bool,
    /// Print the checks as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Remove task images no task of the dataset needs any more, dangling images of the
    /// harness's builds and containers left by killed runs; report the space freed.
    Gc(GcArgs),
}

#[derive(Debug, Args)]
pub struct GcArgs {
    #[arg(long, default_value = "tasks")]
    pub dataset: PathBuf,
    /// Where sources fetched from git are cached.
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    /// Say what would be removed and about how much space it would free; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also remove the images of tasks that are not in the dataset (other datasets' tasks,
    /// deleted tasks).
    #[arg(long)]
    pub all_tasks: bool,
    /// Print what was done as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// CI outputs of a run (opt-at-k and report).
#[derive(Debug, Clone, Args)]
pub struct CiArgs {
    /// Write the run as JUnit XML to FILE: one test case per sample (see README, CI outputs).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Exit 2 when a figure is below a threshold: opt@K=X or pass@k=X (X percent, k from 1
    /// to the run's K; opt@K at k = K is Opt@K). Repeatable.
    /// (Read as text and checked by the harness, so a malformed one is bad input: exit 1.)
    #[arg(long, value_name = "METRIC@k=X")]
    pub fail_under: Vec<String>,
    /// Append the run's summary (summary.md, plus the thresholds' outcomes) to FILE, e.g.
    /// `--markdown "$GITHUB_STEP_SUMMARY"` for a GitHub Actions job summary.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

impl CiArgs {
    /// The `--fail-under` thresholds, checked against the run's K.
    pub fn gates(&self, k_run: usize) -> Result<Vec<crate::ci::FailUnder>> {
        let gates = self
            .fail_under
            .iter()
            .map(|g| {
                g.parse::<crate::ci::FailUnder>()
                    .map_err(|e| anyhow::anyhow!("--fail-under {e}"))
            })
            .collect::<Result<Vec<_>>>()?;
        crate::ci::check_k(&gates, k_run)?;
        Ok(gates)
    }
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Run an agent on tasks (in containers of their images) and save its patches as a
    /// predictions file for opt-at-k.
    Run(AgentRunArgs),
}

#[derive(Debug, Args)]
pub struct AgentRunArgs {
    /// The agent's name in agents.toml.
    #[arg(long)]
    pub agent: String,
    #[arg(long, default_value = "agents.toml")]
    pub agents: PathBuf,
    #[arg(long, default_value = "tasks")]
    pub dataset: PathBuf,
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Runs per task (sample 0..N-1).
    #[arg(long, default_value_t = 1)]
    pub samples: usize,
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    /// The predictions file to write (default: RESULTS_DIR/agents/AGENT.predictions.jsonl,
    /// where `harness local --agent` finds it).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LocalArgs {
    /// A prefix (4 hex digits at least) of the task's base or human commit; `harness tasks`
    /// lists them.
    #[arg(long)]
    pub commit: String,
    /// The patch to judge (a unified diff).
    #[arg(long, conflicts_with = "predictions")]
    pub patch: Option<PathBuf>,
    /// Take the patch from this predictions file: the task's row whose model_name_or_path is
    /// --agent.
    #[arg(long, requires = "agent")]
    pub predictions: Option<PathBuf>,
    /// The agent whose patch is judged: its rows in --predictions, else its saved patch
    /// (from `harness agent run`), else the agent is run on the task now. With --patch, the
    /// name the results go under.
    #[arg(long)]
    pub agent: Option<String>,
    /// Where agents are named (for --agent without a saved patch).
    #[arg(long, default_value = "agents.toml")]
    pub agents: PathBuf,
    #[arg(long, default_value = "tasks")]
    pub dataset: PathBuf,
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    #[arg(long, default_value_t = 1.0)]
    pub timeout_scale: f64,
    #[command(flatten)]
    pub rule: RuleArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

#[derive(Debug, Args)]
pub struct TasksArgs {
    #[arg(long, default_value = "tasks")]
    pub dataset: PathBuf,
    /// Where sources fetched from git are cached.
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
}

impl From<CriterionArg> for Criterion {
    fn from(c: CriterionArg) -> Criterion {
        match c {
            CriterionArg::Strict => Criterion::Strict,
            CriterionArg::Gso => Criterion::Gso,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CriterionArg {
    /// GSO's thresholds applied to the 95% confidence interval, rounds added until decided.
    Strict,
    /// GSO's rule applied to means (reproduces published numbers).
    Gso,
}

#[derive(Debug, Args)]
pub struct OptAtKArgs {
    /// Model name used in reports and folder names.
    #[arg(long)]
    pub model: String,
    /// Predictions file (JSONL or JSON); repeat for K files, file order = sample index.
    #[arg(long, required = true)]
    pub predictions: Vec<PathBuf>,
    /// Samples per instance to evaluate.
    #[arg(long)]
    pub k: usize,
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub rule: RuleArgs,
    /// Print the machine-readable summary (JSON) on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ci: CiArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// How samples are measured and judged (opt-at-k and local).
#[derive(Debug, Clone, Args)]
pub struct RuleArgs {
    /// Decision rule for opt_base / opt_commit.
    #[arg(long, value_enum, default_value = "strict")]
    pub criterion: CriterionArg,
    /// Seed of the bootstrap behind every confidence interval.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The figure strict takes of a variant's runs (per container): min (default), mean,
    /// median or pNN (a percentile). GSO's means under gso.
    #[arg(long)]
    pub estimator: Option<crate::rule::Estimator>,
    /// Measured rounds at least, for every task (default: the most `runs` of its benches).
    #[arg(long)]
    pub min_rounds: Option<u32>,
    /// Measured rounds at most under strict (default: the most `max_runs` of its benches).
    /// Strict needs 5 paired rounds for an interval: below that nothing is decided.
    #[arg(long)]
    pub max_rounds: Option<u32>,
    /// Wall-time budget of each task's measurement (default: the task's measure.max_seconds).
    #[arg(long)]
    pub max_measure_seconds: Option<f64>,
    /// Containers per variant under strict (default: the task's measure.replicas, else 5).
    #[arg(long)]
    pub replicas: Option<u32>,
    /// opt_base needs round(GM speedup over base, 1) >= this.
    #[arg(long, default_value_t = 1.2)]
    pub min_speedup: f64,
    /// opt_commit needs HM of (human time / patch time) > this.
    #[arg(long, default_value_t = 0.95)]
    pub opt_thresh: f64,
}

/// GPU tasks and their telemetry.
#[derive(Debug, Clone, Args)]
pub struct GpuArgs {
    /// The GPUs (NVML device indices) the harness may hand to GPU tasks, e.g. `0,2`
    /// (default: every GPU NVML lists).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Option<Vec<u32>>,
    /// When this host cannot run GPU tasks, mark them `skipped` (reported apart, in no
    /// score) instead of `error`.
    #[arg(long)]
    pub skip_gpu: bool,
    /// The NVML library to load (default: the driver's libnvidia-ml.so.1).
    #[arg(long, env = "HARNESS_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,
    /// GPU telemetry samples per second while a bench run is timed.
    #[arg(long, default_value_t = crate::gpu::DEFAULT_TELEMETRY_HZ)]
    pub telemetry_hz: f64,
}

impl GpuArgs {
    pub fn options(&self) -> crate::gpu::GpuOptions {
        crate::gpu::GpuOptions {
            allowed: self.gpus.clone(),
            skip: self.skip_gpu,
            nvml_lib: self.nvml_lib.clone(),
            telemetry_hz: self.telemetry_hz,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Dataset folder: one folder per task with a task.toml.
    #[arg(long, default_value = "tasks")]
    pub dataset: PathBuf,
    /// Run folder name under the results folder (default: <model>-k<K>; repeating a
    /// command resumes its run).
    #[arg(long)]
    pub run_id: Option<String>,
    /// Only these instances (space or comma separated).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Tasks prepared at once (measurements never overlap).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Multiply every timeout by this.
    #[arg(long, default_value_t = 1.0)]
    pub timeout_scale: f64,
    /// Where run folders go.
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    /// Run only part I of N of the selected instances (split by estimated cost, the same on
    /// every machine); `harness merge` puts the parts back together.
    #[arg(long, value_name = "I/N")]
    pub partition: Option<String>,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    #[arg(long, default_value = "tasks")]
    pub dataset: PathBuf,
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Rebuild even when an image with the same inputs exists.
    #[arg(long)]
    pub force: bool,
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Where build logs go (under images/).
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run folder (evaluation_results/<run_id>).
    pub run_dir: PathBuf,
    #[arg(long)]
    pub json: bool,
    /// Report even when samples were measured on different machines (they are listed).
    #[arg(long)]
    pub allow_mixed_machines: bool,
    /// Judge every sample again from its saved timings under this criterion (no Docker).
    #[arg(long, value_enum)]
    pub criterion: Option<CriterionArg>,
    /// With regrading: opt_base needs round(GM speedup over base, 1) >= this.
    #[arg(long)]
    pub min_speedup: Option<f64>,
    /// With regrading: opt_commit needs HM of (human time / patch time) > this.
    #[arg(long)]
    pub opt_thresh: Option<f64>,
    /// With regrading: the bootstrap seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// With regrading: the figure strict takes of a variant's runs (min, mean, median, pNN).
    #[arg(long)]
    pub estimator: Option<crate::rule::Estimator>,
    #[command(flatten)]
    pub ci: CiArgs,
}

/// Exit codes: 0 the run completed, 1 bad input or infrastructure failure (a sample ended
/// `error`), 2 a `--fail-under` threshold missed, 130 interrupted by SIGINT, 143 by SIGTERM
/// (the first that applies in the order 130/143, 1, 2).
pub async fn main_with(cli: Cli) -> i32 {
    let verbosity = if cli.quiet {
        Verbosity::Quiet
    } else if cli.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    let result = match cli.command {
        Command::OptAtK(a) => opt_at_k(*a, verbosity).await,
        Command::Run(a) => run_batch(*a, verbosity).await,
        Command::Build(a) => build(a).await,
        Command::Report(a) => report(a),
        Command::Local(a) => local(*a, verbosity).await,
        Command::Tasks(a) => tasks(a),
        Command::Agent(AgentCommand::Run(a)) => agent_run(a).await,
        Command::Status(a) => status(a),
        Command::Merge(a) => merge(a),
        Command::Doctor(a) => doctor(a).await,
        Command::Images(ImagesCommand::Gc(a)) => images_gc(a).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

/// The plan of an `opt-at-k` run from its arguments: the one conversion that `opt-at-k`
/// and each entry of `harness run` go through.
fn opt_at_k_plan(a: &OptAtKArgs, verbosity: Verbosity) -> Result<RunPlan> {
    RunPlan::resolve(RawRunOptions {
        model: a.model.clone(),
        predictions: a.predictions.clone(),
        k: a.k,
        dataset: a.common.dataset.clone(),
        results_root: a.common.results_dir.clone(),
        run_id: a.common.run_id.clone(),
        instance_ids: a.common.instance_ids.clone(),
        jobs: a.common.jobs,
        timeout_scale: a.common.timeout_scale,
        min_speedup: a.rule.min_speedup,
        opt_thresh: a.rule.opt_thresh,
        criterion: a.rule.criterion.into(),
        seed: a.rule.seed,
        estimator: a.rule.estimator,
        min_rounds: a.rule.min_rounds,
        max_rounds: a.rule.max_rounds,
        max_measure_seconds: a.rule.max_measure_seconds,
        replicas: a.rule.replicas,
        verbosity,
        json: a.json,
        gpu: a.gpu.options(),
        partition: a.common.partition.clone(),
    })
}

async fn opt_at_k(a: OptAtKArgs, verbosity: Verbosity) -> Result<i32> {
    let gates = a.ci.gates(a.k)?;
    let plan = opt_at_k_plan(&a, verbosity)?;
    let outcome = crate::runner::opt_at_k(&plan).await?;
    let gates = ci_outputs(&a.ci, &gates, &outcome.summary)?;
    if plan.json {
        let mut summary = crate::report::json_summary(&outcome.summary);
        if let serde_json::Value::Object(m) = &mut summary {
            if !a.ci.fail_under.is_empty() {
                m.insert("fail_under".into(), serde_json::to_value(&gates)?);
            }
            m.insert(
                "invocation".into(),
                serde_json::json!({
                    "evaluated_samples": outcome.evaluated,
                    "reused_samples": outcome.reused,
                    "images_built": outcome.images_built,
                    "interrupted": outcome.interrupted,
                    "complete": outcome.summary.totals.complete,
                    "report_files": outcome.report_files,
                }),
            );
        }
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", crate::report::terminal_summary(&outcome.summary));
        println!("results: {}", outcome.run_dir.root.display());
    }
    eprint!("{}", crate::ci::describe(&gates));
    Ok(match exit_code(&outcome) {
        0 => crate::ci::exit_code(&gates),
        code => code,
    })
}

/// `--junit` and `--fail-under` of a finished (or interrupted) run: writes the JUnit file,
/// judges the thresholds.
fn ci_outputs(
    ci: &CiArgs,
    gates: &[crate::ci::FailUnder],
    summary: &crate::report::Summary,
) -> Result<Vec<crate::ci::GateResult>> {
    if let Some(path) = &ci.junit {
        crate::results::write_atomic(path, crate::report::junit_xml(summary).as_bytes())
            .with_context(|| format!("--junit {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    let judged = crate::ci::judge(summary, gates);
    if let Some(path) = &ci.markdown {
        let mut text = crate::report::summary_markdown(summary);
        if !judged.is_empty() {
            text.push_str("\n## Thresholds\n\n");
            for line in crate::ci::describe(&judged).lines() {
                text.push_str(&format!("- {}\n", line.trim()));
            }
        }
        text.push('\n');
        // Appended, not replaced: a CI job summary collects every step's text.
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .with_context(|| format!("--markdown {}: cannot append", path.display()))?;
        eprintln!("appended the summary to {}", path.display());
    }
    Ok(judged)
}

fn merge(a: MergeArgs) -> Result<i32> {
    // `--fail-under` is checked against K before anything is written (the merge checks
    // that every part has the first one's K).
    let first_k = a
        .run_dirs
        .first()
        .and_then(|d| RunDir { root: d.clone() }.load_run_info().ok().map(|i| i.k));
    let gates = a.ci.gates(first_k.unwrap_or(usize::MAX))?;
    let merged = crate::merge::merge(&a.run_dirs, &a.out, std::env::args().collect())?;
    let summary = &merged.summary;
    crate::ci::check_k(&gates, summary.info.k)?;
    let gates = ci_outputs(&a.ci, &gates, summary)?;
    if !summary.totals.complete {
        eprintln!(
            "warning: the merged run is incomplete (a partition was interrupted or has samples \
             not run): {}",
            summary.totals.not_run_ids.join(", ")
        );
    }
    if a.json {
        let mut json = crate::report::json_summary(summary);
        if let serde_json::Value::Object(m) = &mut json
            && !a.ci.fail_under.is_empty()
        {
            m.insert("fail_under".into(), serde_json::to_value(&gates)?);
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", crate::report::terminal_summary(summary));
        for f in &merged.report_files {
            println!("wrote {}", f.display());
        }
    }
    eprint!("{}", crate::ci::describe(&gates));
    Ok(crate::ci::exit_code(&gates))
}

fn status(a: StatusArgs) -> Result<i32> {
    let runs = crate::status::status_of(&a.run_dirs)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "runs": runs }))?
        );
    } else {
        let text: Vec<String> = runs.iter().map(crate::status::render).collect();
        print!("{}", text.join("\n"));
    }
    Ok(0)
}

async fn doctor(a: DoctorArgs) -> Result<i32> {
    let checks = crate::doctor::diagnose(&crate::doctor::DoctorOptions {
        nvml_lib: a.nvml_lib,
        require_gpu: a.require_gpu,
    })
    .await;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "checks": checks }))?
        );
    } else {
        print!("{}", crate::doctor::render(&checks));
    }
    Ok(crate::doctor::exit_code(&checks))
}

async fn images_gc(a: GcArgs) -> Result<i32> {
    let engine = Engine::connect().await?;
    let report = crate::gc::gc(
        &engine,
        &crate::gc::GcOptions {
            dataset: a.dataset,
            cache_dir: a.results_dir.join(".cache"),
            dry_run: a.dry_run,
            all_tasks: a.all_tasks,
        },
    )
    .await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::gc::render(&report));
    }
    Ok(if report.failures.is_empty() { 0 } else { 1 })
}

async fn local(a: LocalArgs, verbosity: Verbosity) -> Result<i32> {
    let dataset = Dataset::load(&a.dataset)?;
    let cache = a.results_dir.join(".cache");
    let found = crate::local::find_task(&dataset, &cache, &a.commit)?;
    let model = a.agent.clone().unwrap_or_else(|| "local".to_string());
    // One folder per commit prefix, a run per model in it (a run folder holds one model).
    let local_root = a
        .results_dir
        .join(format!("local-{}", a.commit.to_ascii_lowercase()));
    let run_id = crate::results::model_slug(&model);
    let source = match (&a.patch, &a.predictions, &a.agent) {
        (Some(p), _, _) => crate::local::PatchSource::File(p.clone()),
        (None, Some(p), _) => crate::local::PatchSource::Predictions(p.clone()),
        (None, None, None) => anyhow::bail!(
            "give the patch: --patch FILE, --predictions FILE --agent NAME, or --agent NAME"
        ),
        (None, None, Some(agent)) => {
            let saved = crate::local::saved_patches(&a.results_dir, agent);
            if crate::local::has_row(&saved, agent, &found.task_id) {
                eprintln!(
                    "using {agent}'s saved patch for {} from {}",
                    found.task_id,
                    saved.display()
                );
                crate::local::PatchSource::Predictions(saved)
            } else {
                let agents = crate::agents::load(&a.agents)?;
                let spec = agents.get(agent).with_context(|| {
                    format!(
                        "{}: no agent named {agent:?} (agents there: {})",
                        a.agents.display(),
                        agents.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                })?;
                eprintln!(
                    "no saved patch of {agent} for {}: running the agent now",
                    found.task_id
                );
                let task = &dataset.tasks[&found.task_id];
                let engine = Engine::connect().await?;
                let out = local_root.join(&run_id).join("agent.predictions.jsonl");
                let batch = crate::agents::run_batch(
                    &engine,
                    spec,
                    &[task],
                    1,
                    &a.results_dir,
                    &out,
                    &|m| eprintln!("{m}"),
                )
                .await?;
                if let Some(f) = batch.failures.first() {
                    anyhow::bail!("agent {agent} gave no patch: {f}");
                }
                crate::local::PatchSource::Predictions(batch.predictions)
            }
        }
    };
    let predictions = crate::local::predictions_file(
        &found,
        &source,
        &model,
        &local_root.join(&run_id),
        &a.results_dir,
    )?;
    let plan = RunPlan::resolve(RawRunOptions {
        model: model.clone(),
        predictions: vec![predictions],
        k: 1,
        dataset: a.dataset,
        results_root: local_root,
        run_id: Some(run_id),
        instance_ids: vec![found.task_id.clone()],
        jobs: Some(1),
        timeout_scale: a.timeout_scale,
        min_speedup: a.rule.min_speedup,
        opt_thresh: a.rule.opt_thresh,
        criterion: a.rule.criterion.into(),
        seed: a.rule.seed,
        estimator: a.rule.estimator,
        min_rounds: a.rule.min_rounds,
        max_rounds: a.rule.max_rounds,
        max_measure_seconds: a.rule.max_measure_seconds,
        replicas: a.rule.replicas,
        verbosity,
        json: false,
        gpu: a.gpu.options(),
        partition: None,
    })?;
    let outcome = crate::runner::opt_at_k(&plan).await?;
    print!(
        "{}",
        crate::local::three_way(&found, &model, &outcome.summary)
    );
    println!("results: {}", outcome.run_dir.root.display());
    Ok(exit_code(&outcome))
}

async fn agent_run(a: AgentRunArgs) -> Result<i32> {
    let agents = crate::agents::load(&a.agents)?;
    let agent = agents.get(&a.agent).with_context(|| {
        format!(
            "{}: no agent named {:?} (agents there: {})",
            a.agents.display(),
            a.agent,
            agents.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    if a.samples == 0 {
        anyhow::bail!("--samples: must be at least 1");
    }
    let dataset = Dataset::load(&a.dataset)?;
    let (tasks, warnings) = dataset.select(&a.instance_ids)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| crate::local::saved_patches(&a.results_dir, &a.agent));
    let engine = Engine::connect().await?;
    let batch = crate::agents::run_batch(
        &engine,
        agent,
        &tasks,
        a.samples,
        &a.results_dir,
        &out,
        &|m| eprintln!("{m}"),
    )
    .await?;
    println!(
        "{} patch(es) of {} written to {}",
        batch.runs.len(),
        a.agent,
        batch.predictions.display()
    );
    for f in &batch.failures {
        eprintln!("no patch: {f}");
    }
    Ok(if batch.failures.is_empty() { 0 } else { 1 })
}

fn tasks(a: TasksArgs) -> Result<i32> {
    let dataset = Dataset::load(&a.dataset)?;
    print!(
        "{}",
        crate::local::task_listing(&dataset, &a.results_dir.join(".cache"))
    );
    Ok(if dataset.invalid.is_empty() { 0 } else { 1 })
}

/// 130 after SIGINT, 143 after SIGTERM, 1 when a sample ended `error` (infrastructure:
/// repeat the command to retry it), 0 otherwise, whatever the model scored.
fn exit_code(outcome: &crate::runner::RunOutcome) -> i32 {
    match outcome.interrupted {
        Some("SIGTERM") => 143,
        Some(_) => 130,
        None => {
            let errors = outcome
                .summary
                .instances
                .iter()
                .flat_map(|i| i.samples.iter())
                .filter(|s| s.status == crate::results::Status::Error)
                .count();
            if errors > 0 {
                eprintln!(
                    "{errors} sample(s) ended `error` (not the model's fault): repeat the command to run them again"
                );
                1
            } else {
                0
            }
        }
    }
}

async fn build(a: BuildArgs) -> Result<i32> {
    let dataset = Dataset::load(&a.dataset)?;
    let (tasks, warnings) = dataset.select(&a.instance_ids)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let engine = Engine::connect().await?;
    ensure_base_images(&engine, &tasks, &|m| eprintln!("{m}")).await?;
    let cache = a.results_dir.join(".cache");
    let failures = futures::stream::iter(tasks.iter().map(|task| {
        let engine = &engine;
        let cache = &cache;
        let logs = a.results_dir.join("images");
        async move {
            let result = async {
                let material = crate::source::materialize(task, cache)?;
                ensure_task_image(
                    engine,
                    task,
                    &material,
                    &logs.join(format!("{}.build.log", task.id)),
                    a.force,
                    None,
                )
                .await
            }
            .await;
            match result {
                Ok(img) if img.cached => {
                    println!("{}: {} (cached)", task.id, img.tag);
                    0
                }
                Ok(img) => {
                    println!(
                        "{}: {} (built in {:.1} s, log {})",
                        task.id,
                        img.tag,
                        img.build_seconds,
                        img.log_path.display()
                    );
                    0
                }
                Err(e) => {
                    eprintln!("error: {}: {e:#}", task.id);
                    1
                }
            }
        }
    }))
    .buffer_unordered(a.jobs.max(1))
    .collect::<Vec<i32>>()
    .await
    .into_iter()
    .sum::<i32>();
    Ok(if failures > 0 { 1 } else { 0 })
}

fn report(a: ReportArgs) -> Result<i32> {
    let run = RunDir {
        root: a.run_dir.clone(),
    };
    let gates = if a.ci.fail_under.is_empty() {
        Vec::new()
    } else {
        a.ci.gates(run.load_run_info()?.k)?
    };
    if a.criterion.is_some()
        || a.min_speedup.is_some()
        || a.opt_thresh.is_some()
        || a.seed.is_some()
        || a.estimator.is_some()
    {
        let old = run.load_run_info()?.decision_rule;
        let rule = crate::rule::DecisionRule {
            criterion: match a.criterion {
                Some(CriterionArg::Strict) => Criterion::Strict,
                Some(CriterionArg::Gso) => Criterion::Gso,
                None => old.criterion,
            },
            thresholds: crate::metrics::Thresholds {
                min_speedup: a.min_speedup.unwrap_or(old.thresholds.min_speedup),
                opt_thresh: a.opt_thresh.unwrap_or(old.thresholds.opt_thresh),
            },
            seed: a.seed.unwrap_or(old.seed),
            estimator: a.estimator.unwrap_or(old.estimator),
            ..old
        };
        for (flag, v) in [
            ("--min-speedup", rule.thresholds.min_speedup),
            ("--opt-thresh", rule.thresholds.opt_thresh),
        ] {
            if !(v.is_finite() && v > 0.0) {
                anyhow::bail!("{flag}: {v} is not a positive number");
            }
        }
        let r = crate::regrade::regrade(&run, rule)?;
        eprintln!(
            "regraded {} measured sample(s) from their saved timings under criterion {} (min_speedup {}, opt_thresh {}, seed {}); {} changed verdict",
            r.samples,
            rule.criterion.as_str(),
            rule.thresholds.min_speedup,
            rule.thresholds.opt_thresh,
            rule.seed,
            r.changed
        );
    }
    let summary = crate::report::summarise(&run)
        .with_context(|| format!("{}: cannot summarise", a.run_dir.display()))?;
    let mixed = crate::report::mixed_fingerprints(&summary);
    if !mixed.is_empty() {
        if !a.allow_mixed_machines {
            anyhow::bail!(
                "{}: {} sample(s) were measured on another machine or harness build than run.json's ({}): {}\n\
                 rerun them here (repeat the run command), or pass --allow-mixed-machines to report anyway",
                a.run_dir.display(),
                mixed.len(),
                summary.info.fingerprint_id,
                mixed.join(", ")
            );
        }
        eprintln!(
            "warning: reporting samples from other machines: {}",
            mixed.join(", ")
        );
    }
    let files = crate::report::write_all(&run, &summary)?;
    let gates = ci_outputs(&a.ci, &gates, &summary)?;
    if a.json {
        let mut json = crate::report::json_summary(&summary);
        if let serde_json::Value::Object(m) = &mut json
            && !a.ci.fail_under.is_empty()
        {
            m.insert("fail_under".into(), serde_json::to_value(&gates)?);
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", crate::report::terminal_summary(&summary));
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    eprint!("{}", crate::ci::describe(&gates));
    Ok(crate::ci::exit_code(&gates))
}

/// Options as opt-at-k has them when none is given on its command line: clap's own
/// defaults, so a batch entry and a bare `opt-at-k` never drift apart.
fn clap_defaults<T: clap::Args + clap::FromArgMatches>() -> Result<T> {
    let cmd = T::augment_args(clap::Command::new("defaults").no_binary_name(true));
    let matches = cmd
        .try_get_matches_from(std::iter::empty::<std::ffi::OsString>())
        .context("the defaults of opt-at-k's options")?;
    T::from_arg_matches(&matches).context("the defaults of opt-at-k's options")
}

/// The `opt-at-k` arguments of one batch entry: its own model, predictions, K, dataset and
/// instances, the batch-wide settings over opt-at-k's defaults, its run folder inside the
/// batch folder.
fn entry_args(
    batch: &crate::batch::BatchPlan,
    entry: &crate::batch::EntryPlan,
    batch_dir: &std::path::Path,
    gpu: &GpuArgs,
) -> Result<OptAtKArgs> {
    let s = &batch.settings;
    let mut rule: RuleArgs = clap_defaults()?;
    if let Some(c) = s.criterion {
        rule.criterion = match c {
            Criterion::Strict => CriterionArg::Strict,
            Criterion::Gso => CriterionArg::Gso,
        };
    }
    rule.seed = s.seed.unwrap_or(rule.seed);
    rule.estimator = s.estimator.or(rule.estimator);
    rule.min_rounds = s.min_rounds.or(rule.min_rounds);
    rule.max_rounds = s.max_rounds.or(rule.max_rounds);
    rule.max_measure_seconds = s.max_measure_seconds.or(rule.max_measure_seconds);
    rule.replicas = s.replicas.or(rule.replicas);
    rule.min_speedup = s.min_speedup.unwrap_or(rule.min_speedup);
    rule.opt_thresh = s.opt_thresh.unwrap_or(rule.opt_thresh);
    let mut common: CommonArgs = clap_defaults()?;
    common.dataset = entry.dataset.clone();
    common.run_id = Some(entry.run_id.clone());
    common.instance_ids = entry.instance_ids.clone();
    common.jobs = Some(batch.jobs);
    common.timeout_scale = s.timeout_scale.unwrap_or(common.timeout_scale);
    common.results_dir = batch_dir.to_path_buf();
    Ok(OptAtKArgs {
        model: entry.model.clone(),
        predictions: entry.predictions.clone(),
        k: entry.k,
        common,
        rule,
        json: false,
        ci: clap_defaults()?,
        gpu: gpu.clone(),
    })
}

/// `harness run CONFIG.toml`: every entry checked first (nothing runs when one is wrong),
/// then run one after another (measurements never overlap), then ranked.
async fn run_batch(a: RunArgs, verbosity: Verbosity) -> Result<i32> {
    use crate::batch::{EntryResult, EntryState};
    let batch = crate::batch::load(&a.config)?;
    let gates = a
        .fail_under
        .iter()
        .map(|g| {
            g.parse::<crate::ci::FailUnder>()
                .map_err(|e| anyhow::anyhow!("--fail-under {e}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let batch_dir = a.results_dir.join(&batch.name);
    let mut problems = Vec::new();
    let mut prepared = Vec::new();
    for entry in &batch.entries {
        let checked = (|| -> Result<(RunPlan, Vec<String>)> {
            crate::ci::check_k(&gates, entry.k)?;
            let plan = opt_at_k_plan(&entry_args(&batch, entry, &batch_dir, &a.gpu)?, verbosity)?;
            let ids = crate::batch::preflight(entry)?;
            Ok((plan, ids))
        })();
        match checked {
            Ok((plan, ids)) => {
                let result = EntryResult::pending(entry, &batch_dir.join(&entry.run_id), ids);
                prepared.push((entry, plan, result));
            }
            Err(e) => problems.push(format!("{}: {e:#}", entry.describe())),
        }
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "{}: {} problem(s), nothing was run:\n  {}",
            a.config.display(),
            problems.len(),
            problems.join("\n  ")
        );
    }
    std::fs::create_dir_all(&batch_dir)
        .with_context(|| format!("{}: cannot create", batch_dir.display()))?;
    // From here a Ctrl-C or SIGTERM no longer ends the process: the entry running stops
    // (keeping what it finished) and no further entry starts.
    crate::runner::watch_signals();
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let total = prepared.len();
    let mut results = Vec::new();
    let mut interrupted: Option<&'static str> = None;
    for (n, (entry, plan, mut result)) in prepared.into_iter().enumerate() {
        if interrupted.is_none() {
            interrupted = crate::runner::interrupted();
        }
        if interrupted.is_some() {
            results.push(result);
            continue;
        }
        let quiet = matches!(verbosity, Verbosity::Quiet);
        if !quiet {
            eprintln!(
                "[{}/{total}] {} (model {}, K={}, {} instance(s)) -> {}",
                n + 1,
                entry.label,
                entry.model,
                entry.k,
                result.instance_ids.len(),
                result.run_dir
            );
        }
        match crate::runner::opt_at_k(&plan).await {
            Ok(outcome) => {
                let summary = &outcome.summary;
                result.state = if summary.totals.complete {
                    EntryState::Complete
                } else {
                    EntryState::Partial
                };
                result.figures = Some(crate::batch::Figures::from_summary(summary));
                result.interrupted = outcome.interrupted.map(str::to_string);
                result.not_run_ids = summary.totals.not_run_ids.clone();
                result.report_files = outcome
                    .report_files
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                result.exit_code = Some(exit_code(&outcome));
                result.fail_under = crate::ci::judge(summary, &gates);
                if let Some(f) = &result.figures
                    && !quiet
                {
                    eprintln!(
                        "[{}/{total}] {}: Opt@{} {:.2}%{}, pass@1 {:.2}%",
                        n + 1,
                        entry.label,
                        entry.k,
                        f.opt_at_k,
                        if summary.totals.complete {
                            ""
                        } else {
                            " (partial)"
                        },
                        f.pass_at_1
                    );
                }
                for line in crate::ci::describe(&result.fail_under).lines() {
                    eprintln!("{}: {line}", entry.label);
                }
                interrupted = outcome.interrupted.or_else(crate::runner::interrupted);
            }
            Err(e) => {
                eprintln!("error: {}: {e:#}", entry.describe());
                result.state = EntryState::Failed;
                result.error = Some(format!("{e:#}"));
                result.exit_code = Some(1);
                interrupted = crate::runner::interrupted();
            }
        }
        results.push(result);
    }
    let ranking = crate::batch::rank(results);
    let code = crate::batch::exit_code(&ranking.entries, interrupted);
    let report = crate::batch::BatchReport {
        schema_version: crate::batch::BATCH_SCHEMA_VERSION,
        name: batch.name.clone(),
        config: a.config.display().to_string(),
        batch_dir: batch_dir.display().to_string(),
        started_at,
        finished_at: Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        complete: ranking
            .entries
            .iter()
            .all(|e| e.state == EntryState::Complete),
        interrupted: interrupted.map(str::to_string),
        exit_code: code,
        comparable: ranking.comparable,
        groups: ranking.groups,
        notes: ranking.notes,
        entries: ranking.entries,
    };
    crate::results::write_json(&batch_dir.join("batch.json"), &report)?;
    crate::results::write_atomic(
        &batch_dir.join("summary.md"),
        crate::batch::summary_markdown(&report).as_bytes(),
    )?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::batch::terminal_table(&report));
        println!("results: {}", batch_dir.display());
    }
    Ok(code)
}
