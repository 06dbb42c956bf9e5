//! `harness`: evaluate agent patches that try to make software faster, in containers, and
//! compute Opt@K and pass@k over K samples.
//!
//! The flow: flags ([`cli`]) → validated [`plan::RunPlan`] → [`runner`] → per-task
//! [`eval`] (docker, patch, measure) → [`results`] on disk → [`metrics`] → [`report`].
//! Progress goes as [`events::Event`]s to one reporter that owns the terminal.

pub mod agents;
pub mod batch;
pub mod ci;
pub mod cli;
pub mod commits;
pub mod cpuset;
pub mod dataset;
pub mod docker;
pub mod doctor;
pub mod eval;
pub mod events;
pub mod fingerprint;
pub mod gc;
pub mod gpu;
pub mod local;
pub mod merge;
pub mod metrics;
pub mod partition;
pub mod patch;
pub mod plan;
pub mod predictions;
pub mod protect;
pub mod regrade;
pub mod replicated;
pub mod report;
pub mod results;
pub mod rule;
pub mod runner;
pub mod source;
pub mod stats;
pub mod status;
pub mod task;
pub mod telemetry;
pub mod timings;
pub mod verdict;
