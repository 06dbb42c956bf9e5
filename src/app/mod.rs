//! The commands: one module each, over the core and the sandbox, and what they share (the
//! run plan, the progress reporter, the reports and CI outputs).

pub mod agent;
pub mod batch;
pub mod build;
pub mod ci;
pub mod compare;
pub mod doctor;
pub mod export;
pub mod fanout;
pub mod gateway;
pub mod gpu_probe;
pub mod images;
pub mod import_gso;
pub mod index_page;
pub mod k8s;
pub mod local;
pub mod merge;
pub mod opt_at_k;
pub mod plan;
pub mod report;
pub mod reporter;
pub mod run_state;
pub mod slurm;
pub mod status;
pub mod stdout;
pub mod table;
pub mod tasks;
pub mod view;

use std::path::PathBuf;

use anyhow::{Context, Result};

/// The harness's cache: `HARNESS_CACHE_DIR`, else `$XDG_CACHE_HOME/harness`, else
/// `~/.cache/harness`.
pub fn cache_root() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("HARNESS_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("harness"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("no HOME, XDG_CACHE_HOME or HARNESS_CACHE_DIR for the harness's cache")?;
    Ok(PathBuf::from(home).join(".cache/harness"))
}
