//! The command line as clap builds it, plus what a newcomer's usage errors need: negative
//! numbers read as values (so `--min-speedup -1` is judged as a number, not an unknown
//! flag), and `harness run` given opt-at-k's options pointed at `opt-at-k`.

use clap::{CommandFactory, FromArgMatches};

use super::Cli;

/// The command line as the binary parses it (completions and manual pages are made from it).
pub(super) fn command() -> clap::Command {
    negatives_are_values(Cli::command())
}

/// The parsed command line, or the usage error to print.
pub(super) fn parse(argv: Vec<String>) -> Result<Cli, String> {
    let command = command();
    let matches = match command.clone().try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => {
            if e.use_stderr() {
                return Err(with_hint(&e, &argv, &command));
            }
            // --help, --version: clap prints them, and the exit is 0.
            let _ = e.print();
            std::process::exit(0);
        }
    };
    Cli::from_arg_matches(&matches).map_err(|e| e.render().to_string())
}

fn negatives_are_values(command: clap::Command) -> clap::Command {
    command
        .mut_args(|a| {
            if !a.is_positional() && a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(negatives_are_values)
}

/// clap's message, or a plainer one where clap's tip would mislead.
fn with_hint(e: &clap::Error, argv: &[String], command: &clap::Command) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let rendered = e.render().to_string();
    let subcommand = argv.iter().skip(1).find(|a| !a.starts_with('-'));
    if e.kind() != ErrorKind::UnknownArgument || subcommand.map(String::as_str) != Some("run") {
        return rendered;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return rendered;
    };
    let flag = arg.split('=').next().unwrap_or(arg).trim_start_matches('-');
    let opt_at_k_takes_it = command
        .find_subcommand("opt-at-k")
        .is_some_and(|c| c.get_arguments().any(|a| a.get_long() == Some(flag)));
    if !opt_at_k_takes_it {
        return rendered;
    }
    format!(
        "error: `harness run` takes a batch config file (harness run CONFIG.toml), not --{flag}\n\n  \
         tip: to evaluate one model's predictions, did you mean `harness opt-at-k --{flag} ...`?\n\n\
         For more information, try 'harness run --help' or 'harness opt-at-k --help'.\n"
    )
}
