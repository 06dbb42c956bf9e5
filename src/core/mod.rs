//! The floor everything stands on: what a task is, how a sample is judged, what a run
//! holds. Plain data and pure decisions; nothing here talks to Docker or imports from the
//! floors above (it may use the sealed `telemetry` leaf's data types).

pub mod allocation;
pub mod compare;
pub mod cpuset;
pub mod dataset;
pub mod digest;
pub mod disk;
pub mod events;
pub mod fingerprint;
pub mod glob;
pub mod gso;
pub mod metrics;
pub mod partition;
pub mod patch;
pub mod predictions;
pub mod replicated;
pub mod results;
pub mod rule;
pub mod secrets;
pub mod settings;
pub mod stats;
pub mod summary;
pub mod task;
pub mod text;
pub mod timings;
pub mod verdict;
