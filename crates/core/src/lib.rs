//! `harness-core`, the floor everything stands on: what a task is, how a sample is judged,
//! what a run records. Plain data and pure decisions: no Docker, no async runtime, no
//! command line, and no file read or written (its `Cargo.toml` lists no tokio, clap or
//! bollard; what needs the disk asks through a trait, as `task::TaskFolder` and
//! `summary::SavedSamples`). It may use the sealed `harness-telemetry` leaf's data types.

pub mod allocation;
pub mod compare;
pub mod cpu_plan;
pub mod criterion;
pub mod digest;
pub mod disk;
pub mod estimator;
pub mod events;
pub mod fingerprint;
pub mod glob;
pub mod gso;
pub mod metrics;
pub mod partition;
pub mod patch;
pub mod records;
pub mod replicated;
pub mod rounds;
pub mod rule;
pub mod secrets;
pub mod settings;
pub mod spend;
pub mod stats;
pub mod status;
pub mod summary;
pub mod task;
pub mod text;
pub mod timings;
pub mod verdict;
