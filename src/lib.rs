//! `harness`: evaluate agent patches that try to make software faster, in containers, and
//! compute Opt@K and pass@k over K samples.
//!
//! The floors are crates of this workspace, each depending only on those below it, so the
//! compiler keeps the order:
//! - [`telemetry`] (`harness-telemetry`): NVML sampling, a sealed leaf with an injectable clock;
//! - [`core`] (`harness-core`): the task model, the rule, statistics, verdicts, metrics and
//!   what a run records: plain data and pure decisions (no async runtime, command line,
//!   Docker or file system);
//! - [`store`] (`harness-store`): the run folder, task folders and prediction files on disk;
//! - [`sandbox`] (`harness-sandbox`): the Docker engine, the in-container programs and their
//!   protections, images, and the evaluation of one task in its containers;
//!
//! and this crate on top: [`app`], one module per command, the reports and the progress
//! reporter; [`cli`], clap's types and their mapping onto the commands.

pub use harness_core as core;
pub use harness_sandbox as sandbox;
pub use harness_store as store;
pub use harness_telemetry as telemetry;

pub mod app;
pub mod cli;
