//! The one reporter that owns the terminal: every event of a command goes through it, as
//! progress bars on a terminal, plain timestamped lines in CI and pipes.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::mpsc;

use crate::core::events::{Event, Verbosity};
use crate::core::status::Status;
use crate::core::text::for_terminal as show;

/// Bars on a terminal; plain lines when stderr is not one, in CI, or when asked.
pub fn spawn_reporter(
    verbosity: Verbosity,
    rx: mpsc::UnboundedReceiver<Event>,
) -> tokio::task::JoinHandle<()> {
    let plain = !std::io::stderr().is_terminal()
        || std::env::var_os("CI").is_some()
        || std::env::var("TERM").map(|t| t == "dumb").unwrap_or(true);
    if plain {
        tokio::spawn(plain_reporter(verbosity, rx))
    } else {
        tokio::spawn(bar_reporter(verbosity, rx))
    }
}

fn sample_line(
    instance: &str,
    sample: usize,
    status: Status,
    opt_commit: bool,
    speedup: Option<f64>,
    cached: bool,
) -> String {
    let speed = speedup
        .map(|s| format!(" {s:.2}x over base"))
        .unwrap_or_default();
    let opt = if opt_commit { " opt_commit" } else { "" };
    let cached = if cached { " (saved result)" } else { "" };
    format!("{instance}/{sample}: {status}{speed}{opt}{cached}")
}

async fn plain_reporter(verbosity: Verbosity, mut rx: mpsc::UnboundedReceiver<Event>) {
    let start = Instant::now();
    let mut done = 0usize;
    let mut total = 0usize;
    while let Some(e) = rx.recv().await {
        let t = start.elapsed().as_secs_f64();
        let line = match e {
            Event::Warn(m) => Some(format!("warning: {m}")),
            Event::Info(m) if verbosity != Verbosity::Quiet => Some(m),
            Event::Debug(m) if verbosity == Verbosity::Verbose => Some(m),
            Event::Planned {
                tasks,
                samples,
                cached,
                ..
            } if verbosity != Verbosity::Quiet => {
                total = samples;
                Some(format!(
                    "{tasks} tasks, {samples} samples ({cached} already done)"
                ))
            }
            Event::ImageReady {
                instance,
                tag,
                cached,
                seconds,
            } if verbosity != Verbosity::Quiet => Some(if cached {
                format!("{instance}: image {tag} (cached)")
            } else {
                format!("{instance}: built image {tag} in {seconds:.1} s")
            }),
            Event::Phase {
                instance,
                variant,
                phase,
            } if verbosity == Verbosity::Verbose => Some(format!("{instance}/{variant}: {phase}")),
            Event::Round {
                instance,
                round,
                rounds,
            } if verbosity == Verbosity::Verbose => {
                Some(format!("{instance}: round {round}/{rounds}"))
            }
            Event::SampleDone {
                instance,
                sample,
                status,
                opt_commit,
                speedup,
                cached,
            } if verbosity != Verbosity::Quiet => {
                done += 1;
                Some(format!(
                    "[{done}/{total}] {}",
                    sample_line(&instance, sample, status, opt_commit, speedup, cached)
                ))
            }
            _ => None,
        };
        if let Some(line) = line {
            // One event, one line: what a message carries from a container (a build's
            // output, a bench's name, an error) is shown, never obeyed.
            // A closed stderr must not stop the run.
            let _ = writeln!(std::io::stderr(), "[{t:7.1}s] {}", show(&line));
        }
    }
}

fn bar_style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// Three lines: samples done (elapsed, ETA), images ready, and what runs now.
async fn bar_reporter(verbosity: Verbosity, mut rx: mpsc::UnboundedReceiver<Event>) {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let samples = multi.add(ProgressBar::new(0));
    samples.set_style(bar_style(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} samples  ETA {eta}",
    ));
    let images = multi.add(ProgressBar::new(0));
    images.set_style(bar_style("  images       {bar:30} {pos}/{len}  {wide_msg}"));
    let phase = multi.add(ProgressBar::new_spinner());
    phase.set_style(bar_style("  now          {wide_msg}"));
    samples.enable_steady_tick(std::time::Duration::from_millis(120));
    while let Some(e) = rx.recv().await {
        match e {
            Event::Warn(m) => {
                let _ = multi.println(format!("warning: {}", show(&m)));
            }
            Event::Info(m) if verbosity != Verbosity::Quiet => {
                let _ = multi.println(show(&m));
            }
            Event::Debug(m) if verbosity == Verbosity::Verbose => {
                let _ = multi.println(show(&m));
            }
            Event::Planned {
                samples: n,
                images: i,
                ..
            } => {
                samples.set_length(n as u64);
                images.set_length(i as u64);
            }
            Event::ImageReady {
                instance,
                tag,
                cached,
                seconds,
            } => {
                images.inc(1);
                images.set_message(show(&if cached {
                    format!("{instance}: cached")
                } else {
                    format!("{instance}: built in {seconds:.0} s")
                }));
                if !cached && verbosity != Verbosity::Quiet {
                    let _ = multi.println(show(&format!(
                        "{instance}: built image {tag} in {seconds:.1} s"
                    )));
                }
            }
            Event::Phase {
                instance,
                variant,
                phase: p,
            } => {
                let line = show(&format!("{instance}/{variant}: {p}"));
                if verbosity == Verbosity::Verbose {
                    let _ = multi.println(&line);
                }
                phase.set_message(line);
            }
            Event::Round {
                instance,
                round,
                rounds,
            } => phase.set_message(show(&format!(
                "{instance}: measuring, round {round}/{rounds}"
            ))),
            Event::SampleDone {
                instance,
                sample,
                status,
                opt_commit,
                speedup,
                cached,
            } => {
                if cached {
                    // Saved results are not progress of this run: they would skew the ETA.
                    samples.inc(1);
                    samples.reset_eta();
                } else {
                    samples.inc(1);
                }
                if verbosity != Verbosity::Quiet {
                    let _ = multi.println(show(&sample_line(
                        &instance, sample, status, opt_commit, speedup, cached,
                    )));
                }
            }
            _ => {}
        }
    }
    phase.finish_and_clear();
    images.finish_and_clear();
    samples.finish_and_clear();
}
