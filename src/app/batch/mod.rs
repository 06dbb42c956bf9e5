//! `harness run CONFIG.toml`: a batch of models x tasks x rollouts from one config file, in
//! one folder. Each entry is an `opt-at-k` run (through the same plan as `opt-at-k`) in
//! `<results_dir>/<name>/<entry>/`; after the last, `batch.json` and `summary.md` rank them.
//!
//! - `config`: the file read and checked into a [`BatchPlan`] (nothing runs when it is wrong);
//! - `rank`: plain functions over the entries' results (no Docker);
//! - `report`: batch.json and the tables;
//! - `run`: the command.

mod agents;
mod bests;
mod config;
mod html;
mod problems;
mod rank;
mod report;
mod run;

pub use config::{AgentEntry, BatchPlan, EntryPlan, load, parse, preflight};
pub use rank::{EntryResult, EntryState, Figures, Group, Ranking, exit_code, rank};
pub use report::{BatchReport, summary_markdown, terminal_table};
pub use run::{BatchOptions, command};

/// batch.json's format version.
pub const BATCH_SCHEMA_VERSION: u32 = 1;

/// File names the batch writes beside the entries' run folders: no entry may take them
/// (`agents` holds its agent entries' predictions and logs).
const RESERVED: [&str; 4] = ["batch.json", "summary.md", "report.html", "agents"];
