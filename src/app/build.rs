//! `harness build`: the task images, built or confirmed cached, `--jobs` at a time; progress
//! through the reporter, one line per task on stdout.

use std::path::PathBuf;

use anyhow::Result;
use futures::StreamExt;

use crate::app::reporter::spawn_reporter;
use crate::core::dataset::Dataset;
use crate::core::events::{Event, Events, Verbosity, emit};
use crate::core::task::Task;
use crate::sandbox::docker::Engine;
use crate::sandbox::docker::image::{ensure_base_images, ensure_task_image};

/// What `harness build` is asked.
pub struct BuildOptions {
    pub dataset: PathBuf,
    pub instance_ids: Vec<String>,
    /// Rebuild even when an image with the same inputs exists.
    pub force: bool,
    pub jobs: usize,
    /// Where build logs go (under images/) and sources are cached.
    pub results_dir: PathBuf,
}

pub async fn command(o: BuildOptions, verbosity: Verbosity) -> Result<i32> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let reporter = spawn_reporter(verbosity, rx);
    let result = build(&o, &tx).await;
    drop(tx);
    let _ = reporter.await;
    result
}

async fn build(o: &BuildOptions, events: &Events) -> Result<i32> {
    let dataset = Dataset::load(&o.dataset)?;
    let (tasks, warnings) = dataset.select(&o.instance_ids)?;
    for w in warnings {
        emit(events, Event::Warn(w));
    }
    let engine = Engine::connect().await?;
    ensure_base_images(&engine, &tasks, events).await?;
    let failures: usize = futures::stream::iter(tasks.iter().map(|task| one(&engine, o, task)))
        .buffer_unordered(o.jobs.max(1))
        .collect::<Vec<usize>>()
        .await
        .into_iter()
        .sum();
    Ok(if failures > 0 { 1 } else { 0 })
}

/// One task's image: 0 when it is there, 1 when it failed.
async fn one(engine: &Engine, o: &BuildOptions, task: &Task) -> usize {
    let cache = o.results_dir.join(".cache");
    let log = o
        .results_dir
        .join("images")
        .join(format!("{}.build.log", task.id));
    let result = async {
        let material = crate::sandbox::source::materialize(task, &cache)?;
        ensure_task_image(engine, task, &material, &log, o.force, None).await
    }
    .await;
    match result {
        Ok(img) if img.cached => {
            crate::outln!("{}: {} (cached)", task.id, img.tag);
            0
        }
        Ok(img) => {
            crate::outln!(
                "{}: {} (built in {:.1} s, log {})",
                task.id,
                img.tag,
                img.build_seconds,
                img.log_path.display()
            );
            0
        }
        Err(e) => {
            // A failed build's error can quote the build's own output.
            eprintln!(
                "error: {}: {}",
                task.id,
                crate::core::text::for_terminal_block(&format!("{e:#}"))
            );
            1
        }
    }
}
