//! A batch's agent x model entries: the agent (an `agents.toml` entry with a provider) told
//! to use the entry's model, run K times on each task (`harness agent run`'s resume and API
//! retries included) into `<batch>/agents/<entry>.predictions.jsonl`, before the entry is
//! evaluated like any other.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::{AgentEntry, EntryPlan};
use crate::app::agent::{Agent, AgentBatch, ModelAccess};
use crate::core::events::Verbosity;

/// The entry's agent, ready to run, and the instances it covers; an error when the agent
/// is unknown, has no provider (its model could not be chosen) or lacks a variable.
pub fn check(entry: &EntryPlan, a: &AgentEntry) -> Result<(Agent, Vec<String>)> {
    let access = ModelAccess {
        model_server: a.model_server.clone(),
        max_cost: a.max_cost,
        max_run_cost: None,
    };
    let mut agent = crate::app::agent::named(&a.agents_file, &a.name, &access)?;
    let Some(gateway) = agent.gateway.as_mut() else {
        bail!(
            "agent {} has no provider in {}: a batch chooses the model of an agent that \
             reaches it through the harness's gateway",
            a.name,
            a.agents_file.display()
        );
    };
    gateway.model = Some(a.model.clone());
    agent.rows_as = Some(entry.model.clone());
    crate::app::agent::secrets(&agent)?;
    let dataset = crate::store::dataset::Dataset::load(&entry.dataset)?;
    let (tasks, _) = dataset.select(&entry.instance_ids)?;
    Ok((agent, tasks.iter().map(|t| t.id.clone()).collect()))
}

/// Where an entry's agent writes its rows.
pub fn predictions_path(batch_dir: &Path, entry: &EntryPlan) -> PathBuf {
    batch_dir
        .join("agents")
        .join(format!("{}.predictions.jsonl", entry.run_id))
}

/// Runs the entry's agent on every sample its predictions file has no row of.
pub async fn make_predictions(
    entry: &EntryPlan,
    agent: &Agent,
    batch_dir: &Path,
    jobs: usize,
    verbosity: Verbosity,
) -> Result<AgentBatch> {
    let dataset = crate::store::dataset::Dataset::load(&entry.dataset)?;
    let (tasks, _) = dataset.select(&entry.instance_ids)?;
    let out = predictions_path(batch_dir, entry);
    let engine = crate::sandbox::docker::Engine::connect().await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let reporter = crate::app::reporter::spawn_reporter(verbosity, rx);
    let batch =
        crate::app::agent::run_batch(&engine, agent, &tasks, entry.k, jobs, batch_dir, &out, &tx)
            .await;
    drop(tx);
    let _ = reporter.await;
    batch
}
