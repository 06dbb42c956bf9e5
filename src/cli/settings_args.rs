//! The command line's spelling of the rule and budget (`core::settings::Settings`, one type
//! for the batch file, run.json and the result key): clap's flags, flattened into
//! `opt-at-k` and `local`, and the choices of `--criterion` and `--disk-check`.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use harness_core::criterion::Criterion;
use harness_core::disk::DiskCheck;
use harness_core::estimator::Estimator;
use harness_core::settings::Settings;

/// How samples are measured and judged.
#[derive(Debug, Clone, Copy, PartialEq, Args)]
pub struct SettingsArgs {
    /// Decision rule for opt_base / opt_commit.
    #[arg(long, value_parser = criterion_parser(), default_value_t = Criterion::STRICT)]
    pub criterion: Criterion,
    /// Seed of the bootstrap behind every confidence interval.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The figure strict takes of a variant's runs (per container): min (default), mean,
    /// median or pNN (a percentile). GSO's means under gso.
    #[arg(long)]
    pub estimator: Option<Estimator>,
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
    /// Timed repetitions of a bench in one exec under strict, the fastest taken (default:
    /// the task's measure.repetitions, else 3).
    #[arg(long)]
    pub repetitions: Option<u32>,
    /// opt_base needs round(GM speedup over base, 1) >= this.
    #[arg(long, default_value_t = 1.2)]
    pub min_speedup: f64,
    /// opt_commit needs HM of (human time / patch time) > this.
    #[arg(long, default_value_t = 0.95)]
    pub opt_thresh: f64,
    /// Multiply every timeout by this.
    #[arg(long, default_value_t = 1.0)]
    pub timeout_scale: f64,
}

impl From<SettingsArgs> for Settings {
    fn from(a: SettingsArgs) -> Settings {
        Settings {
            criterion: a.criterion,
            seed: a.seed,
            estimator: a.estimator,
            min_rounds: a.min_rounds,
            max_rounds: a.max_rounds,
            max_measure_seconds: a.max_measure_seconds,
            replicas: a.replicas,
            repetitions: a.repetitions,
            min_speedup: a.min_speedup,
            opt_thresh: a.opt_thresh,
            timeout_scale: a.timeout_scale,
        }
    }
}

/// `--criterion`: every criterion's strategy by its name, with its own line of help.
pub fn criterion_parser() -> impl TypedValueParser<Value = Criterion> {
    let values = Criterion::ALL
        .iter()
        .map(|c| PossibleValue::new(c.as_str()).help(c.help()));
    PossibleValuesParser::new(values).try_map(|s| s.parse::<Criterion>())
}

/// `--disk-check`: what a run does when its containers may not fit on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum DiskCheckArg {
    /// Refuse to start, naming the figures (the default).
    #[default]
    On,
    /// Say so as a warning and start anyway.
    Off,
}

impl From<DiskCheckArg> for DiskCheck {
    fn from(d: DiskCheckArg) -> DiskCheck {
        match d {
            DiskCheckArg::On => DiskCheck::On,
            DiskCheckArg::Off => DiskCheck::Off,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};
    use harness_core::rule::ESTIMATOR;

    fn from_flags(flags: &[&str]) -> Settings {
        let cmd = SettingsArgs::augment_args(clap::Command::new("t").no_binary_name(true));
        SettingsArgs::from_arg_matches(&cmd.try_get_matches_from(flags).unwrap())
            .unwrap()
            .into()
    }

    #[test]
    fn the_command_line_and_the_files_share_defaults_and_names() {
        assert_eq!(from_flags(&[]), Settings::default());
        let s = from_flags(&[
            "--criterion",
            "gso",
            "--estimator",
            "p10",
            "--max-rounds",
            "9",
            "--timeout-scale",
            "0.5",
        ]);
        // The batch file's keys are run.json's, and round-trip.
        let text =
            "criterion = \"gso\"\nestimator = \"p10\"\nmax_rounds = 9\ntimeout_scale = 0.5\n";
        let from_file: Settings = toml::from_str(text).unwrap();
        assert_eq!(from_file, s);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Settings>(&json).unwrap(), s);
        assert!(toml::from_str::<Settings>("sede = 1\n").is_err());
        assert_eq!(Settings::keys().len(), 11);
        assert!(Settings::keys().contains(&"max_measure_seconds".to_string()));
    }

    #[test]
    fn rule_budget_and_problems() {
        let s = from_flags(&["--min-rounds", "5", "--max-rounds", "3", "--replicas", "0"]);
        let problems: Vec<&str> = s.problems().iter().map(|(k, _)| *k).collect();
        assert_eq!(problems, ["replicas", "max_rounds"]);
        let d = Settings::default();
        assert_eq!(d.rule().estimator, ESTIMATOR);
        assert_eq!(d.rule().thresholds.min_speedup, 1.2);
        assert_eq!(d.budget().timeout_scale, 1.0);
    }
}
