//! Every integration test, in one binary (ripgrep's `tests/tests.rs`): one link of the
//! harness instead of one per file. Each module is one area, against the real Docker daemon
//! where it needs one: `cargo test --test integration gso::` runs one area,
//! `cargo test --test integration gso::a_faithful` one test.

mod common;

mod agent_batches;
mod agents;
mod batch;
mod boundary;
mod channels;
mod ci_status;
mod compare_runs;
mod disk_guard;
mod docker_retry;
mod examples;
mod faults;
mod git_source;
mod gpu;
mod gso;
mod hostile;
mod hostile_datasets;
mod html_report;
mod human_reference;
mod k8s;
mod measurement;
mod newcomer;
mod ops;
mod overrides;
mod papercuts;
mod partition;
mod real_agents;
mod run_store;
mod sharing;
mod simulated;
mod slurm;
mod telemetry;
mod trust;
mod view;
