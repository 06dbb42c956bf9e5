//! Each command's arguments as the options its `app` module takes: the one place a flag
//! meets the command that uses it.

use super::args::*;
use crate::app::*;
use crate::core::events::Verbosity;

impl RunArgs {
    pub(super) fn options(self, verbosity: Verbosity) -> batch::BatchOptions {
        batch::BatchOptions {
            config: self.config,
            results_dir: self.results_dir,
            json: self.json,
            fail_under: self.fail_under,
            gpu: self.gpu.options(),
            disk_check: self.disk.disk_check.into(),
            verbosity,
        }
    }
}

impl BuildArgs {
    pub(super) fn options(self) -> build::BuildOptions {
        build::BuildOptions {
            dataset: self.dataset,
            instance_ids: self.instance_ids,
            force: self.force,
            jobs: self.jobs,
            results_dir: self.results_dir,
            json: self.json,
        }
    }
}

impl ReportArgs {
    pub(super) fn options(self, verbosity: Verbosity) -> report::ReportOptions {
        report::ReportOptions {
            run_dir: self.run_dir,
            json: self.json,
            allow_mixed_machines: self.allow_mixed_machines,
            regrade: report::RuleOverrides {
                criterion: self.criterion,
                min_speedup: self.min_speedup,
                opt_thresh: self.opt_thresh,
                seed: self.seed,
                estimator: self.estimator,
            },
            hacked_ids: self.hacked_ids,
            ci: self.ci.options(),
            verbosity,
        }
    }
}

impl LocalArgs {
    pub(super) fn options(self) -> local::LocalOptions {
        local::LocalOptions {
            commit: self.commit,
            patch: self.patch,
            predictions: self.predictions,
            agent: self.agent,
            agents: self.agents,
            model_access: self.model.options(),
            dataset: self.dataset,
            results_dir: self.results_dir,
            settings: self.settings.into(),
            gpu: self.gpu.options(),
            disk_check: self.disk.disk_check.into(),
            json: self.json,
        }
    }
}

impl ImportGsoArgs {
    pub(super) fn options(self) -> import_gso::ImportOptions {
        import_gso::ImportOptions {
            rows: self.rows,
            out: self.out,
            image_prefix: self.image_prefix,
            network: !self.no_network,
            cpus: self.cpus,
            memory: self.memory,
        }
    }
}

impl AgentRunArgs {
    pub(super) fn options(self) -> agent::AgentRunOptions {
        agent::AgentRunOptions {
            agent: self.agent,
            agents: self.agents,
            dataset: self.dataset,
            instance_ids: self.instance_ids,
            samples: self.samples,
            jobs: self.jobs,
            results_dir: self.results_dir,
            out: self.out,
            model_access: self.model.options(),
            json: self.json,
        }
    }
}

impl ModelArgs {
    pub(super) fn options(self) -> agent::ModelAccess {
        agent::ModelAccess {
            model_server: self.model_server,
            max_cost: self.max_cost,
            max_run_cost: self.max_run_cost,
        }
    }
}

impl ViewArgs {
    pub(super) fn options(self) -> view::ViewOptions {
        view::ViewOptions {
            run_dir: self.run_dir,
            results_dir: self.results_dir,
            serve: self.serve,
            bind: self.bind,
            port: self.port,
        }
    }
}

impl CompareArgs {
    pub(super) fn options(self, verbosity: Verbosity) -> compare::CompareOptions {
        compare::CompareOptions {
            run_dirs: self.run_dirs,
            html: self.html,
            json: self.json,
            allow_mixed: self.allow_mixed,
            between_run_sd: self.between_run_sd,
            quiet: verbosity == Verbosity::Quiet,
        }
    }
}

impl GpuProbeArgs {
    pub(super) fn options(self, verbosity: Verbosity) -> gpu_probe::ProbeOptions {
        gpu_probe::ProbeOptions {
            command: self.command,
            interval: std::time::Duration::from_millis(self.interval_ms),
            gpus: (!self.gpus.is_empty()).then_some(self.gpus),
            nvml_lib: self.nvml_lib,
            out: self.out,
            json: self.json,
            quiet: verbosity == Verbosity::Quiet,
        }
    }
}

impl GcArgs {
    pub(super) fn options(self) -> images::GcOptions {
        images::GcOptions {
            dataset: self.dataset,
            cache_dir: self.results_dir.join(".cache"),
            dry_run: self.dry_run,
            all_tasks: self.all_tasks,
        }
    }
}
