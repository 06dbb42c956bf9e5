//! clap's types: every command's arguments, as the user types them (`mod.rs` maps them onto
//! the commands of `app`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::settings_args::{DiskCheckArg, SettingsArgs, criterion_parser};
use crate::app::ci::CiOptions;
use crate::core::criterion::Criterion;

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
    /// Models or runs side by side on the instances they share: per task who is faster
    /// (with an interval, from the saved timings), a ranking with the uncertainty of the
    /// ranks, pass@k/opt@k per run, and what differs between the runs (no Docker).
    Compare(CompareArgs),
    /// One task, found by a prefix of its base or human commit: base, human and one patch
    /// measured and judged three ways.
    Local(Box<LocalArgs>),
    /// List the dataset's tasks with their base and human commits (no Docker; a remote source
    /// is never fetched to list it).
    Tasks(TasksArgs),
    /// Agents named in agents.toml: `harness agent run` makes a predictions file.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// What a run folder holds: done, failed and left samples per model and task; with no
    /// folder named, every run under the results folder, one line each (no Docker).
    Status(StatusArgs),
    /// Shell completion for bash, zsh, fish, elvish or PowerShell, on stdout
    /// (`scripts/setup.sh` installs it).
    Completions(CompletionsArgs),
    /// Manual pages, one per command (`harness.1`, `harness-opt-at-k.1`, ...), into a folder
    /// (`scripts/setup.sh` installs them).
    Man(ManArgs),
    /// A run's page (report.html): opened in the desktop's browser, or served on a local
    /// address where there is none (no Docker).
    View(ViewArgs),
    /// Fan a run out over a Slurm cluster: an sbatch array job, one partition per element,
    /// and a merge job after it.
    #[command(subcommand)]
    Slurm(SlurmCommand),
    /// Fan a run out over a Kubernetes cluster: print an Indexed Job (one pod per
    /// partition) and a merge Job.
    #[command(subcommand)]
    K8s(K8sCommand),
    /// Put the folders of `opt-at-k --partition I/N` runs back together into one run folder
    /// and regenerate its reports (no Docker).
    Merge(MergeArgs),
    /// Check the Docker engine, disk, base image, NVIDIA runtime and NVML; say what to fix.
    Doctor(DoctorArgs),
    /// The harness's images: `harness images gc` removes those no task needs any more.
    #[command(subcommand)]
    Images(ImagesCommand),
    /// GPUs on this host: `harness gpu probe -- COMMAND` runs a command with the GPU
    /// telemetry around it (no Docker).
    #[command(subcommand)]
    Gpu(GpuCommand),
}

#[derive(Debug, Subcommand)]
pub enum GpuCommand {
    /// Run a command on this host (no container) with the NVML sampler around it; print and
    /// write as JSON what a timed GPU run records of it: per device power, energy (integrated,
    /// and by the driver's counter), clocks, utilisation, memory, temperature, throttling.
    /// Exits with the command's exit code.
    Probe(GpuProbeArgs),
}

#[derive(Debug, Args)]
pub struct GpuProbeArgs {
    /// Time between samples, in milliseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub interval_ms: u64,
    /// The GPUs to sample, by index or UUID (comma-separated; default: every GPU NVML lists).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Vec<crate::telemetry::DeviceSelector>,
    /// The NVML library to load (default: the driver's libnvidia-ml.so.1).
    #[arg(long, env = "HARNESS_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,
    /// Where the JSON report goes.
    #[arg(long, default_value = "gpu-probe.json")]
    pub out: PathBuf,
    /// Print the JSON report on stdout instead of the text.
    #[arg(long)]
    pub json: bool,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The batch's config file (TOML: name, parallelism, batch-wide options, [[entry]]
    /// tables; see the book, docs/src/commands/run.md).
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
    #[command(flatten)]
    pub disk: DiskArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run folders (evaluation_results/<run_id>), or folders holding run folders (a batch).
    #[arg(required = true)]
    pub run_dirs: Vec<PathBuf>,
    /// Also write the comparison as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the comparison as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Compare runs measured on different machines or under different criteria (refused
    /// otherwise: their timings and verdicts do not compare).
    #[arg(long)]
    pub allow_mixed: bool,
    /// The standard deviation of a run's log speedup between runs of the same code on one
    /// machine, added to every task's interval (measure yours with
    /// scripts/validate_compare.py; 0 gives the within-run interval alone, which calls
    /// identical code faster or slower far more often than 5%).
    #[arg(long, value_name = "SD", default_value_t = crate::core::compare::BETWEEN_RUN_SD, value_parser = between_run_sd)]
    pub between_run_sd: f64,
}

fn between_run_sd(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!("{text:?} is not a standard deviation in [0, 1)")),
    }
}

#[derive(Debug, Subcommand)]
pub enum SlurmCommand {
    /// Write the array job (element I runs `opt-at-k --partition I/N`) and the merge job
    /// (`--dependency=afterany`) into the fan-out folder, submit both, print their ids.
    Submit(SlurmSubmitArgs),
}

#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// Print the manifest (YAML): an Indexed Job whose pod I runs `opt-at-k --partition
    /// I+1/N` against a Docker engine, results on a shared claim, and a merge Job.
    Manifest(K8sManifestArgs),
}

#[derive(Debug, Args)]
pub struct K8sManifestArgs {
    /// Partitions, one pod each.
    #[arg(long)]
    pub parts: usize,
    /// The Job's name (lowercase letters, digits, '-'); the merge Job is NAME-merge.
    #[arg(long, default_value = "harness-fanout")]
    pub name: String,
    /// An image with the harness binary on PATH (and the dataset and predictions at the
    /// paths the options give).
    #[arg(long)]
    pub image: String,
    /// A ReadWriteMany PersistentVolumeClaim for the results (mounted at /results).
    #[arg(long)]
    pub claim: String,
    /// `nvidia.com/gpu` per pod (0: CPU tasks).
    #[arg(long, default_value_t = 0)]
    pub gpus_per_pod: u32,
    /// The Docker engine: `socket` (the node's, by hostPath) or `dind` (a privileged
    /// docker:dind sidecar).
    #[arg(long, default_value = "socket")]
    pub docker: crate::app::k8s::DockerMode,
    #[arg(long)]
    pub namespace: Option<String>,
    /// opt-at-k's options, after `--` (without --partition and --results-dir).
    #[arg(last = true, required = true)]
    pub opt_at_k: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SlurmSubmitArgs {
    /// Array elements, one partition each, each on its node's Docker engine.
    #[arg(long)]
    pub nodes: usize,
    /// The fan-out folder, on a file system every node shares: the scripts, the logs,
    /// `parts/` (one run folder per part) and the merged run.
    #[arg(long)]
    pub out: PathBuf,
    /// Generic resources per element, e.g. `gpu:1` (sbatch --gres).
    #[arg(long)]
    pub gres: Option<String>,
    /// The Slurm partition (queue) to submit to (sbatch --partition).
    #[arg(long)]
    pub partition_name: Option<String>,
    /// Another sbatch option for the array job, e.g. `--sbatch-arg=--time=02:00:00`;
    /// repeat for more.
    #[arg(long = "sbatch-arg", allow_hyphen_values = true)]
    pub sbatch_args: Vec<String>,
    /// Write the scripts and fanout.json, submit nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// opt-at-k's options, after `--` (without --partition and --results-dir, which each
    /// element gets).
    #[arg(last = true, required = true)]
    pub opt_at_k: Vec<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Run folders (evaluation_results/<run_id>), or folders holding run folders. None:
    /// every run under --results-dir, one line each.
    pub run_dirs: Vec<PathBuf>,
    /// Where the runs are, when no run folder is named.
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    /// Print the counts as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The folder the pages go to (made if missing).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A run (or batch) folder; none: the index page of every run under --results-dir.
    pub run_dir: Option<PathBuf>,
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    /// Serve the folder even where a browser could be opened.
    #[arg(long)]
    pub serve: bool,
    /// The address to serve on. A loopback address (the default) answers this machine
    /// only; on a remote machine keep it and forward the port (`ssh -L
    /// 8000:127.0.0.1:8000 HOST`). Another (0.0.0.0) also answers other machines, each
    /// opening the page by the address it reached.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// The port (0: any free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
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
    /// Write the run as JUnit XML to FILE: one test case per sample (see docs/src/ci.md).
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
    pub fn options(&self) -> CiOptions {
        CiOptions {
            junit: self.junit.clone(),
            fail_under: self.fail_under.clone(),
            markdown: self.markdown.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Run an agent on tasks (in containers of their images) and save its patches as a
    /// predictions file for opt-at-k.
    Run(AgentRunArgs),
    /// List the models an OpenAI-compatible server offers (GET /v1/models): a local
    /// Ollama or vLLM, a proxy; for a batch's agent x model entries.
    Models(AgentModelsArgs),
}

#[derive(Debug, Args)]
pub struct AgentModelsArgs {
    /// The server, e.g. http://127.0.0.1:11434 (Ollama).
    #[arg(long)]
    pub model_server: String,
    /// The environment variable holding the server's key, when it needs one.
    #[arg(long)]
    pub key: Option<String>,
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
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
    /// Runs per task (sample 0..N-1). Samples the predictions file already holds a row of
    /// are not run again; one whose agent failed for an API reason has no row, so running
    /// the same command again retries it.
    #[arg(long, default_value_t = 1)]
    pub samples: usize,
    /// Agent runs side by side (each in its own container, with its own gateway).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    /// The predictions file to write (default: RESULTS_DIR/agents/AGENT.predictions.jsonl,
    /// where `harness local --agent` finds it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How an agent with a provider reaches its model (through the harness's gateway).
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// Where the gateway forwards the agent's requests instead of its provider: any server
    /// speaking the provider's API (a local Ollama, a company proxy), e.g.
    /// http://127.0.0.1:11434. The provider's key is added when its variable is set.
    #[arg(long, value_name = "URL")]
    pub model_server: Option<String>,
    /// Dollars one sample's agent may spend (by the price table in agents.toml); its
    /// requests are refused once spent, and the sample says so.
    #[arg(long, value_name = "DOLLARS")]
    pub max_cost: Option<f64>,
    /// Dollars the whole run's agents may spend: each sample's agent may spend what is
    /// left, and once it is spent no further sample starts (each is named; the next run
    /// with a budget runs it).
    #[arg(long, value_name = "DOLLARS")]
    pub max_run_cost: Option<f64>,
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
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(long, default_value = "tasks")]
    pub dataset: PathBuf,
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    #[command(flatten)]
    pub settings: SettingsArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
    #[command(flatten)]
    pub disk: DiskArgs,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TasksArgs {
    #[arg(long, default_value = "tasks")]
    pub dataset: PathBuf,
    /// Where sources fetched from git are cached.
    #[arg(long, default_value = "evaluation_results")]
    pub results_dir: PathBuf,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(subcommand)]
    pub action: Option<TasksCommand>,
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// GSO's dataset rows (the Hugging Face dataset's Parquet file, JSON Lines or a JSON
    /// list) as task folders, one per row, each on GSO's prebuilt instance image.
    #[command(name = "import-gso")]
    ImportGso(ImportGsoArgs),
}

#[derive(Debug, Args)]
pub struct ImportGsoArgs {
    /// The rows: GSO's dataset as its Parquet file (`.parquet`), JSON Lines or a JSON list.
    pub rows: PathBuf,
    /// Where the task folders go (a dataset for --dataset).
    #[arg(long)]
    pub out: PathBuf,
    /// The images' name prefix: `<prefix>.<arch>.<instance_id lowercased>:<tag>`.
    #[arg(long, default_value = "gso.eval")]
    pub image_prefix: String,
    /// Run the tasks without network (GSO's tests download their data: only for tests
    /// whose data is in the image).
    #[arg(long)]
    pub no_network: bool,
    /// Cores per container.
    #[arg(long, default_value_t = 2.0)]
    pub cpus: f64,
    /// Memory per container.
    #[arg(long, default_value = "8g")]
    pub memory: String,
}

#[derive(Debug, Args)]
pub struct OptAtKArgs {
    /// Model name used in reports and folder names (`--model_name`, GSO's spelling).
    #[arg(long, alias = "model_name")]
    pub model: String,
    /// Predictions file (JSONL or JSON); repeat for K files, file order = sample index.
    #[arg(long, required_unless_present = "prediction_paths")]
    pub predictions: Vec<PathBuf>,
    /// GSO's and ISO-Bench's spelling: rollout files after one flag, each one rollout of
    /// --model (as --rollout-per-file), in natural order (`run_2` before `run_10`), the
    /// first --k of them, as their opt_at_k.py takes them.
    #[arg(long = "prediction_paths", num_args = 1.., conflicts_with = "predictions")]
    pub prediction_paths: Vec<PathBuf>,
    /// The most one instance's evaluation may take, in seconds (GSO's `--timeout`): its
    /// base, human and samples, every container and round, from its first container to
    /// its last bench (its image's build and the wait for cores not counted; a wait for
    /// another task's image build or for disk room is). Past it the instance's containers
    /// are removed and its samples not yet saved end `error` (the run's limit, not a
    /// sample's outcome: repeating the command runs them again). Each phase keeps its own
    /// timeout (`timeout`, the code's). Default: no limit beyond those.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// Each --predictions file is one rollout of --model whatever `model_name_or_path` its
    /// rows give (GSO's rollout files, `<model>-run_1`, `<model>-run_2`, ...): file i is
    /// sample i, and the GSO rollout reports keep each file's name.
    #[arg(long)]
    pub rollout_per_file: bool,
    /// Samples per instance to evaluate.
    #[arg(long)]
    pub k: usize,
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Print the machine-readable summary (JSON) on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Instances whose optimisation was judged a reward hack (GSO's `hacked_ids`: a JSON
    /// list, `{"hacked_ids": [...]}`, GSO's hack-detector output, or one id a line): the
    /// reports give the hack-adjusted score beside the raw one.
    #[arg(long)]
    pub hacked_ids: Option<PathBuf>,
    #[command(flatten)]
    pub ci: CiArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
    #[command(flatten)]
    pub disk: DiskArgs,
}

/// The disk check before a run's containers start.
#[derive(Debug, Clone, Args)]
pub struct DiskArgs {
    /// Before starting containers, compare what they will write (the harness's files and
    /// the patch in every container that may exist at once, installs as measured here
    /// before, and room for one install in flight up to its resources.disk) with the free
    /// space of Docker's data root and the results folder; during the run each install
    /// starts only with room for its whole resources.disk. `on` refuses a run that may not
    /// fit, `off` says so, starts anyway and lets installs start without room.
    #[arg(long, value_enum, default_value = "on", env = "HARNESS_DISK_CHECK")]
    pub disk_check: DiskCheckArg,
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
    #[arg(long, default_value_t = crate::sandbox::gpu::DEFAULT_TELEMETRY_HZ)]
    pub telemetry_hz: f64,
}

impl GpuArgs {
    pub fn options(&self) -> crate::sandbox::gpu::GpuOptions {
        crate::sandbox::gpu::GpuOptions {
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
    /// command resumes its run). Also `--run_id`.
    #[arg(long, alias = "run_id")]
    pub run_id: Option<String>,
    /// Only these instances (space or comma separated). Also `--instance_ids`.
    #[arg(long, alias = "instance_ids", num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Tasks prepared at once (measurements never overlap).
    #[arg(long)]
    pub jobs: Option<usize>,
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
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
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
    #[arg(long, value_parser = criterion_parser())]
    pub criterion: Option<Criterion>,
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
    pub estimator: Option<crate::core::estimator::Estimator>,
    /// Instances judged reward hacks (see opt-at-k --hacked-ids); kept in run.json for
    /// later reports.
    #[arg(long)]
    pub hacked_ids: Option<PathBuf>,
    #[command(flatten)]
    pub ci: CiArgs,
}
