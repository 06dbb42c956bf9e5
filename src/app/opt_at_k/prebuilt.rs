//! The prebuilt images the run's tasks stand on (`source.image`, GSO's instance images),
//! there before any container of the run starts. One that is missing is pulled where the
//! engine can reach a registry (a GSO instance image from `slimshetty/gso:` and retagged,
//! as GSO's own harness does); what is still missing ends the run with each image named
//! and the command that gets it, instead of every sample of those tasks failing later.

use anyhow::{Result, bail};

use super::work::TaskWork;
use crate::core::events::Event;
use crate::core::task::Source;
use crate::sandbox::docker::Engine;
use crate::sandbox::docker::image::{image_present, pull, tag};
use crate::sandbox::events::{Events, emit};

/// GSO's registry name of a local GSO instance image (`gso.eval.<arch>.<id>:<tag>` is
/// `slimshetty/gso:gso.eval.<arch>.<id>` there: GSO's `remote_instance_image_key`).
pub fn gso_remote(image: &str) -> Option<String> {
    let (name, _tag) = image.rsplit_once(':').unwrap_or((image, "latest"));
    (name.starts_with("gso.eval.") && !name.contains('/')).then(|| format!("slimshetty/gso:{name}"))
}

/// The commands that get `image` onto an engine.
fn how_to_get(image: &str) -> String {
    match gso_remote(image) {
        Some(remote) => format!("docker pull {remote} && docker tag {remote} {image}"),
        None => format!("docker pull {image}"),
    }
}

/// Tries to get a missing image: the image itself, then GSO's registry copy.
async fn fetch(engine: &Engine, image: &str) -> Result<(), String> {
    let Err(direct) = pull(engine, image).await else {
        return Ok(());
    };
    let Some(remote) = gso_remote(image) else {
        return Err(format!("{direct:#}"));
    };
    match pull(engine, &remote).await {
        Ok(()) => tag(engine, &remote, image)
            .await
            .map_err(|e| format!("{e:#}")),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// Every prebuilt image of the tasks with samples to run is on the engine, or the run
/// stops here, naming each missing one.
pub(super) async fn check(engine: &Engine, work: &[TaskWork<'_>], events: &Events) -> Result<()> {
    let mut missing: Vec<(String, String, String)> = Vec::new();
    for w in work.iter().filter(|w| !w.samples.is_empty()) {
        let Source::Image { image } = &w.task.source else {
            continue;
        };
        if image_present(engine, image).await? {
            continue;
        }
        emit(
            events,
            Event::Info(format!(
                "{}: pulling {image} (not on this engine)",
                w.task.id
            )),
        );
        if let Err(why) = fetch(engine, image).await {
            missing.push((w.task.id.clone(), image.clone(), why));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = missing
        .iter()
        .map(|(id, image, why)| {
            let why = why.lines().next().unwrap_or("");
            format!(
                "  {image} (task {id}): {}\n    pull failed: {why}",
                how_to_get(image)
            )
        })
        .collect();
    bail!(
        "{} prebuilt image(s) the tasks stand on are not on this engine and could not be pulled; get them, then run again:\n{}",
        missing.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_images_come_from_gsos_registry() {
        assert_eq!(
            gso_remote("gso.eval.x86_64.tornadoweb__tornado-1b464c4:latest").as_deref(),
            Some("slimshetty/gso:gso.eval.x86_64.tornadoweb__tornado-1b464c4")
        );
        assert_eq!(gso_remote("registry.example/gso.eval.x:1"), None);
        assert_eq!(gso_remote("python:3.12"), None);
        assert_eq!(
            how_to_get("gso.eval.x86_64.a:latest"),
            "docker pull slimshetty/gso:gso.eval.x86_64.a && docker tag slimshetty/gso:gso.eval.x86_64.a gso.eval.x86_64.a:latest"
        );
    }
}
