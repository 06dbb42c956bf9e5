//! The images a task's containers run on: the image of its tree (the human's containers),
//! and for a prebuilt image the one of base's and the samples' containers, made from it.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use harness_core::task::Task;

use super::Engine;
use super::image::{TaskImage, ensure_tree_image, prebuilt};
use crate::source::Material;

/// Builds the task's image unless an image with its tag exists (or `force`), and its
/// samples' image. The build output goes to `log_path`; a failed build's error carries its
/// last lines.
pub async fn ensure_task_image(
    engine: &Engine,
    task: &Task,
    material: &Material,
    log_path: &Path,
    force: bool,
    cpuset: Option<&str>,
) -> Result<TaskImage> {
    let mut image = ensure_tree_image(engine, task, material, log_path, force, cpuset).await?;
    if prebuilt(task) {
        let started = Instant::now();
        image.sample_tag =
            super::derived::ensure_sample_image(engine, task, &image.tag, log_path).await?;
        image.build_seconds += started.elapsed().as_secs_f64();
    }
    Ok(image)
}
