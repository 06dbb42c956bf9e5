//! The command line: clap's types, and their mapping onto the commands of `app` (each
//! command's own options; the rule and budget are `core::settings::Settings`, spelled as flags by `settings_args`).

mod args;
mod hints;
mod options;
mod settings_args;

pub use args::*;

use anyhow::Result;
use clap::Parser;

use crate::app::plan::{RawRunOptions, RunPlan};
use crate::core::events::Verbosity;

#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version = harness_sandbox::fingerprint::VERSION_LINE,
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
    /// Let task files name paths outside their own folder (`source.path`, `source.git`,
    /// `human.patch`, `[image] files`): only for a dataset you trust, since a task could
    /// otherwise read any file of this machine into its image.
    #[arg(long, global = true, env = "HARNESS_ALLOW_OUTSIDE_TASK_PATHS", action = clap::ArgAction::SetTrue, value_parser = clap::builder::FalseyValueParser::new())]
    pub allow_outside_task_paths: bool,
    /// A variable a task's `[env] pass` or an agent's `env` (agents.toml) may take from
    /// this environment (repeat it, or a comma-separated list in HARNESS_PASS_ENV): a dataset
    /// or an agents file only asks; without this no variable of yours reaches a container.
    #[arg(
        long = "pass-env",
        value_name = "NAME",
        global = true,
        env = "HARNESS_PASS_ENV",
        value_delimiter = ','
    )]
    pub pass_env: Vec<String>,
}

/// Parses the command line like clap's `Parser::parse`, except that a usage error exits 1
/// (bad input) rather than clap's 2, which is the exit code of a missed `--fail-under`
/// threshold. `--help` and `--version` exit 0. (The binary's `main` still calls
/// `Cli::parse()`: switching it to this function makes every usage error exit 1.)
pub fn parse_args() -> Cli {
    match hints::parse(std::env::args().collect()) {
        Ok(cli) => cli,
        Err(message) => {
            eprint!("{message}");
            std::process::exit(1);
        }
    }
}

/// Exit codes: 0 the run completed, 1 bad input or infrastructure failure (a sample ended
/// `error`), 2 a `--fail-under` threshold missed, 130 interrupted by SIGINT, 143 by SIGTERM
/// (the first that applies in the order 130/143, 1, 2).
pub async fn main_with(cli: Cli) -> i32 {
    crate::store::task_folder::allow_outside_paths(cli.allow_outside_task_paths);
    crate::core::task::allow_pass_env(cli.pass_env.clone());
    let verbosity = if cli.quiet {
        Verbosity::Quiet
    } else if cli.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    match dispatch(cli.command, verbosity).await {
        Ok(code) => match crate::app::stdout::failure() {
            // What was printed is not all of it (the files of a run are written whole).
            Some(why) => {
                eprintln!("error: standard output: {why}: what was printed is cut off");
                if code == 0 { 1 } else { code }
            }
            None => code,
        },
        Err(e) => {
            // An error can carry text from a container or a run folder: its lines are
            // kept, its control characters shown, never obeyed.
            eprintln!(
                "error: {}",
                crate::core::text::for_terminal_block(&format!("{e:#}"))
            );
            1
        }
    }
}

async fn dispatch(command: Command, verbosity: Verbosity) -> Result<i32> {
    use crate::app::*;
    match command {
        Command::OptAtK(a) => {
            let plan = opt_at_k_plan(&a, verbosity)?;
            opt_at_k::command(plan, &a.ci.options()).await
        }
        Command::Run(a) => batch::command(a.options(verbosity)).await,
        Command::Build(a) => build::command(a.options(), verbosity).await,
        Command::Report(a) => report::command(a.options(verbosity)),
        Command::Local(a) => local::command(a.options(), verbosity).await,
        Command::Tasks(TasksArgs {
            action: Some(TasksCommand::ImportGso(a)),
            ..
        }) => import_gso::command(a.options()),
        Command::Tasks(a) => tasks::command(&a.dataset, &a.results_dir, a.json),
        Command::Agent(AgentCommand::Run(a)) => agent::command(a.options(), verbosity).await,
        Command::Agent(AgentCommand::Models(a)) => {
            let ids = agent::models::list(&a.model_server, a.key.as_deref()).await?;
            if a.json {
                crate::outln!("{}", serde_json::to_string_pretty(&ids)?);
            } else {
                for id in &ids {
                    crate::outln!("{}", crate::core::text::for_terminal(id));
                }
            }
            Ok(0)
        }
        Command::Completions(a) => {
            let mut command = hints::command();
            let mut script = Vec::new();
            clap_complete::generate(a.shell, &mut command, "harness", &mut script);
            crate::out!("{}", String::from_utf8_lossy(&script));
            Ok(0)
        }
        Command::Man(a) => {
            std::fs::create_dir_all(&a.out)
                .map_err(|e| anyhow::anyhow!("{}: cannot make it: {e}", a.out.display()))?;
            clap_mangen::generate_to(hints::command(), &a.out)
                .map_err(|e| anyhow::anyhow!("{}: cannot write the pages: {e}", a.out.display()))?;
            crate::outln!("wrote the manual pages into {}", a.out.display());
            Ok(0)
        }
        Command::View(a) => view::command(a.options()).await,
        Command::Status(a) if a.run_dirs.is_empty() => status::list(&a.results_dir, a.json),
        Command::Status(a) => status::command(&a.run_dirs, a.json),
        Command::Slurm(SlurmCommand::Submit(a)) => slurm_submit(a),
        Command::K8s(K8sCommand::Manifest(a)) => k8s_manifest(a),
        Command::Compare(a) => compare::command(a.options(verbosity)),
        Command::Merge(a) => {
            merge::command(&a.run_dirs, &a.out, a.json, verbosity, &a.ci.options())
        }
        Command::Doctor(a) => {
            let o = doctor::DoctorOptions {
                nvml_lib: a.nvml_lib,
                require_gpu: a.require_gpu,
            };
            doctor::command(o, a.json).await
        }
        Command::Gpu(GpuCommand::Probe(a)) => gpu_probe::command(a.options(verbosity)).await,
        Command::Images(ImagesCommand::Gc(a)) => {
            let json = a.json;
            images::command(a.options(), json).await
        }
    }
}

/// `harness k8s manifest`: the Indexed Job of a fanned-out run.
fn k8s_manifest(a: K8sManifestArgs) -> Result<i32> {
    let o = forwarded_opt_at_k(&a.opt_at_k, "k8s manifest")?;
    crate::app::k8s::command(crate::app::k8s::ManifestOptions {
        parts: a.parts,
        name: a.name,
        image: a.image,
        claim: a.claim,
        gpus_per_pod: a.gpus_per_pod,
        docker: a.docker,
        namespace: a.namespace,
        opt_at_k_args: a.opt_at_k,
        model: o.model,
        k: o.k,
    })
}

/// The plan of an `opt-at-k` run from its arguments.
fn opt_at_k_plan(a: &OptAtKArgs, verbosity: Verbosity) -> Result<RunPlan> {
    RunPlan::resolve(RawRunOptions {
        model: a.model.clone(),
        // GSO's `--prediction_paths`: one rollout a file, as with --rollout-per-file.
        predictions: if a.prediction_paths.is_empty() {
            a.predictions.clone()
        } else {
            a.prediction_paths.clone()
        },
        k: a.k,
        dataset: a.common.dataset.clone(),
        results_root: a.common.results_dir.clone(),
        run_id: a.common.run_id.clone(),
        instance_ids: a.common.instance_ids.clone(),
        jobs: a.common.jobs,
        settings: a.settings.into(),
        verbosity,
        json: a.json,
        gpu: a.gpu.options(),
        partition: a.common.partition.clone(),
        hacked_ids: a.hacked_ids.clone(),
        rollout_per_file: a.rollout_per_file || !a.prediction_paths.is_empty(),
        disk_check: a.disk.disk_check.into(),
        instance_timeout: a.timeout.map(std::time::Duration::from_secs),
    })
}

/// The opt-at-k options after `--` of a fan-out command, checked as opt-at-k would check
/// them before anything is written or submitted; --partition and --results-dir are the
/// fan-out's to set.
fn forwarded_opt_at_k(args: &[String], what: &str) -> Result<OptAtKArgs> {
    for flag in ["--partition", "--results-dir"] {
        if args
            .iter()
            .any(|x| x == flag || x.starts_with(&format!("{flag}=")))
        {
            anyhow::bail!(
                "{what}: {flag} is set for each partition; leave it out of the opt-at-k options"
            );
        }
    }
    let argv = ["harness", "opt-at-k"]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    let parsed = Cli::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{what}: the opt-at-k options after --: {e}"))?;
    match parsed.command {
        Command::OptAtK(o) => Ok(*o),
        _ => anyhow::bail!("{what}: the options after -- are not opt-at-k's"),
    }
}

/// `harness slurm submit`.
fn slurm_submit(a: SlurmSubmitArgs) -> Result<i32> {
    let o = forwarded_opt_at_k(&a.opt_at_k, "slurm submit")?;
    crate::app::slurm::submit(crate::app::slurm::SubmitOptions {
        nodes: a.nodes,
        out: a.out,
        gres: a.gres,
        partition_name: a.partition_name,
        sbatch_args: a.sbatch_args,
        opt_at_k_args: a.opt_at_k,
        model: o.model,
        k: o.k,
        dry_run: a.dry_run,
    })
}
