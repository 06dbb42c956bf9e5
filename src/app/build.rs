//! `harness build`: the task images, built or confirmed cached, `--jobs` at a time; progress
//! through the reporter, one line per task on stdout.

use std::path::PathBuf;

use anyhow::Result;
use futures::StreamExt;

use crate::app::reporter::spawn_reporter;
use crate::core::events::{Event, Verbosity};
use crate::core::task::Task;
use crate::sandbox::docker::Engine;
use crate::sandbox::docker::image::ensure_base_images;
use crate::sandbox::docker::task_images::ensure_task_image;
use crate::sandbox::events::{Events, emit};
use crate::store::dataset::Dataset;

/// What `harness build` is asked.
pub struct BuildOptions {
    pub dataset: PathBuf,
    pub instance_ids: Vec<String>,
    /// Rebuild even when an image with the same inputs exists.
    pub force: bool,
    pub jobs: usize,
    /// Where build logs go (under images/) and sources are cached.
    pub results_dir: PathBuf,
    /// The images as JSON on stdout instead of a line each.
    pub json: bool,
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
    let images: Vec<serde_json::Value> =
        futures::stream::iter(tasks.iter().map(|task| one(&engine, o, task)))
            .buffer_unordered(o.jobs.max(1))
            .collect()
            .await;
    let failures = images.iter().filter(|i| !i["error"].is_null()).count();
    if o.json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "images": images }))?
        );
    }
    Ok(if failures > 0 { 1 } else { 0 })
}

/// One task's image, as `--json` has it (`error` set when it failed); said on the terminal
/// unless `--json`.
async fn one(engine: &Engine, o: &BuildOptions, task: &Task) -> serde_json::Value {
    let cache = o.results_dir.join(".cache");
    let log = o
        .results_dir
        .join(crate::store::run_folder::names::IMAGES_DIR)
        .join(format!("{}.build.log", task.id));
    let result = async {
        // The build writes its log by path: nothing on the way may be a link.
        crate::store::confined::Confined::beneath(&o.results_dir).check(&log)?;
        let material = crate::sandbox::source::materialize(task, &cache)?;
        ensure_task_image(engine, task, &material, &log, o.force, None).await
    }
    .await;
    match result {
        Ok(img) => {
            if o.json {
            } else if img.cached {
                crate::outln!("{}: {} (cached)", task.id, img.tag);
            } else {
                crate::outln!(
                    "{}: {} (built in {:.1} s, log {})",
                    task.id,
                    img.tag,
                    img.build_seconds,
                    img.log_path.display()
                );
            }
            serde_json::json!({"instance_id": task.id, "image": img.tag, "cached": img.cached,
                "build_seconds": img.build_seconds, "log": img.log_path, "error": null})
        }
        Err(e) => {
            // A failed build's error can quote the build's own output.
            eprintln!(
                "error: {}: {}",
                task.id,
                crate::core::text::for_terminal_block(&format!("{e:#}"))
            );
            serde_json::json!({"instance_id": task.id, "error": format!("{e:#}")})
        }
    }
}
