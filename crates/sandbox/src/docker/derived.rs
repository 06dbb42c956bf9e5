//! Images made from an image the harness already has (a task's), for what must be done as
//! root before a container runs: root in a container runs nothing but the harness's own
//! supervisor, so what needs root and the image's programs happens at image build, under
//! Docker's default build settings (an agent's set-up, the hiding of the evaluation's parts
//! from it).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bollard::query_parameters::BuildImageOptionsBuilder;
use sha2::{Digest, Sha256};

use super::Engine;
use super::image::{build_once, local_image_id};

/// An image built `FROM` another with a Dockerfile of the caller's and files of its own.
pub struct Derived<'a> {
    /// The repository part of the tag; the tag is a digest of everything below.
    pub repository: String,
    /// The image built from (an ID or a tag the engine has).
    pub from: String,
    /// The Dockerfile's lines after `FROM`.
    pub steps: String,
    /// Files of the build context: (path, bytes, mode).
    pub files: Vec<(String, Vec<u8>, u32)>,
    /// The image's labels (given to the build, not a step of their own).
    pub labels: Vec<(String, String)>,
    pub log_path: &'a Path,
    pub timeout: Duration,
}

impl Derived<'_> {
    fn dockerfile(&self) -> String {
        format!("FROM {}\n{}\n", self.from, self.steps)
    }

    /// `repository:digest`: the same inputs give the same tag, so a built image is reused.
    pub fn tag(&self, from_id: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.dockerfile().as_bytes());
        h.update([0]);
        h.update(from_id.as_bytes());
        for (path, bytes, mode) in &self.files {
            h.update([0]);
            h.update(path.as_bytes());
            h.update([0]);
            h.update(bytes);
            h.update(mode.to_le_bytes());
        }
        for (k, v) in &self.labels {
            h.update([0]);
            h.update(k.as_bytes());
            h.update([1]);
            h.update(v.as_bytes());
        }
        format!("{}:{}", self.repository, &hex::encode(h.finalize())[..16])
    }

    fn context(&self) -> Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |path: &str, data: &[u8], mode: u32| -> Result<()> {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(mode);
            h.set_mtime(0);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, path, data)
                .with_context(|| format!("cannot pack {path} into the build context"))
        };
        add("Dockerfile", self.dockerfile().as_bytes(), 0o644)?;
        for (path, bytes, mode) in &self.files {
            add(path, bytes, *mode)?;
        }
        b.into_inner().context("cannot pack the build context")
    }
}

/// The image's tag, built unless the engine has it.
pub async fn ensure_derived(engine: &Engine, d: &Derived<'_>) -> Result<String> {
    let from_id = local_image_id(engine, &d.from)
        .await?
        .unwrap_or_else(|| d.from.clone());
    let tag = d.tag(&from_id);
    if local_image_id(engine, &tag).await?.is_some() {
        return Ok(tag);
    }
    if let Some(dir) = d.log_path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    let mut log = std::fs::File::create(d.log_path)
        .with_context(|| format!("{}: cannot create build log", d.log_path.display()))?;
    let _ = writeln!(
        log,
        "# harness build of {tag}\n# --- Dockerfile ---\n{}# ---",
        d.dockerfile()
    );
    let started = Instant::now();
    let labels: std::collections::HashMap<String, String> = d.labels.iter().cloned().collect();
    let opts = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(&tag)
        .labels(&labels)
        .rm(true)
        .forcerm(true)
        .build();
    let api = engine.api.clone().with_timeout(Duration::from_secs(3600));
    let outcome = build_once(&api, opts, &d.context()?, &mut log, d.timeout).await;
    if local_image_id(engine, &tag).await?.is_none() {
        let last: Vec<String> = outcome.tail.into_iter().collect();
        bail!(
            "building {tag} failed: {}\n  log: {}\n  last lines:\n    {}",
            outcome
                .failure
                .unwrap_or_else(|| "the build ended without an image".into()),
            d.log_path.display(),
            last.join("\n    ")
        );
    }
    let _ = writeln!(log, "# built in {:.1} s", started.elapsed().as_secs_f64());
    Ok(tag)
}

/// The image base's and the samples' containers of a prebuilt-image task run on: its task
/// image with the git repository of /testbed (and of its submodules) holding base's history
/// alone (container/programs/strip_history.py, as root at image build). A prebuilt image
/// keeps upstream history past base, the human's fix among it, where the code under test
/// could read it; only the human's own containers run on the task image itself.
pub async fn ensure_sample_image(
    engine: &Engine,
    task: &harness_core::task::Task,
    task_image: &str,
    task_log: &Path,
) -> Result<String> {
    let strip = crate::assets::ASSETS
        .iter()
        .find(|a| a.path == "opt/harness/strip_history.py")
        .context("the harness's strip_history.py is missing from its assets")?;
    let run = format!(
        "python3 -I -S /opt/harness-strip/strip_history.py {} {} && rm -rf /opt/harness-strip",
        crate::protect::RUN_UID,
        crate::protect::RUN_GID
    );
    let log_path = task_log.with_extension("samples.log");
    let derived = Derived {
        repository: super::image::repo_name(&task.id).replacen(
            "harness-task/",
            "harness-samples/",
            1,
        ),
        from: task_image.to_string(),
        steps: format!(
            "COPY root/ /\nRUN [\"/bin/sh\", \"-c\", {}]\n",
            serde_json::Value::String(run)
        ),
        files: vec![(
            "root/opt/harness-strip/strip_history.py".to_string(),
            strip.bytes.to_vec(),
            0o644,
        )],
        labels: vec![
            (super::LABEL_MANAGED.to_string(), "true".to_string()),
            (super::LABEL_INSTANCE.to_string(), task.id.clone()),
            (
                super::image::LABEL_SAMPLES_OF.to_string(),
                task_image.to_string(),
            ),
        ],
        log_path: &log_path,
        timeout: task.setup_timeout.max(Duration::from_secs(600)),
    };
    ensure_derived(engine, &derived)
        .await
        .with_context(|| format!("task {}: the image of its samples", task.id))
}
