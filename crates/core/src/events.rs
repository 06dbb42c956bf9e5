//! Events from the runner (and every command that does long work) to the one reporter that
//! owns the terminal (`app::reporter`); the channel they travel on is `harness_sandbox::events`.

use crate::status::Status;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}
