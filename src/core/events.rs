//! Events from the runner (and every command that does long work) to the one reporter that
//! owns the terminal (`app::reporter`).

use tokio::sync::mpsc;

use crate::core::results::Status;

#[derive(Debug, Clone)]
pub enum Event {
    Info(String),
    Warn(String),
    /// Detail shown with `-v`.
    Debug(String),
    Planned {
        tasks: usize,
        samples: usize,
        cached: usize,
        /// Task images this run needs (built or found).
        images: usize,
    },
    ImageReady {
        instance: String,
        tag: String,
        cached: bool,
        seconds: f64,
    },
    Phase {
        instance: String,
        variant: String,
        phase: &'static str,
    },
    Round {
        instance: String,
        round: u32,
        rounds: u32,
    },
    SampleDone {
        instance: String,
        sample: usize,
        status: Status,
        opt_commit: bool,
        speedup: Option<f64>,
        cached: bool,
    },
}

pub type Events = mpsc::UnboundedSender<Event>;

/// Sends, ignoring a closed reporter: progress must never fail a run.
pub fn emit(events: &Events, e: Event) {
    let _ = events.send(e);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}
