//! `harness`: evaluate agent patches that try to make software faster, in containers, and
//! compute Opt@K and pass@k over K samples.
//!
//! Four floors, each importing only from its own and those below it (checked by
//! `scripts/import_graph.py --check`, which CI runs):
//! - [`telemetry`]: NVML sampling, a sealed leaf with an injectable clock;
//! - [`core`]: the task model, the rule, statistics, verdicts, metrics, timings, results and
//!   the events a run emits — plain data and pure decisions, no Docker;
//! - [`sandbox`]: the Docker wrapper, the in-container assets and protections, images, and
//!   the evaluation of one task in its containers;
//! - [`app`]: one module per command, the reports and the progress reporter;
//!
//! and [`cli`] on top: clap's types and their mapping onto the commands.

pub mod app;
pub mod cli;
pub mod core;
pub mod sandbox;
pub mod telemetry;
