//! Task images: a build context made in memory from `images/` and the task's files, a tag
//! derived from a hash of everything that goes in, built once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use bollard::query_parameters::BuildImageOptionsBuilder;
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::calls::{self, Repeat};
use super::{Engine, LABEL_DIGEST, LABEL_INSTANCE, LABEL_MANAGED};
use crate::source::{EntryKind, Material};
use harness_core::task::{DEFAULT_BASE_IMAGE, Task, WORKDIR};

const TEMPLATE: &str = include_str!("../../../../images/task.Dockerfile");
/// For `source.image`: a thin layer over the prebuilt image, its tree left where it is.
const PREBUILT_TEMPLATE: &str = include_str!("../../../../images/task-prebuilt.Dockerfile");

pub(super) fn prebuilt(task: &Task) -> bool {
    matches!(task.source, harness_core::task::Source::Image { .. })
}

/// The Dockerfile of a task, from the template. The labels are one `LABEL` line of the
/// Dockerfile rather than build options, which the classic builder turns into one step
/// (one container) each.
pub fn dockerfile(task: &Task, material: &Material) -> String {
    let setup: String = task
        .setup
        .iter()
        .map(|cmd| {
            // JSON form: any command text survives, quotes and newlines included.
            let script = format!("cd {WORKDIR} || exit 1\n{cmd}");
            let argv = serde_json::json!(["/bin/sh", "-c", script]);
            format!("RUN {argv}\n")
        })
        .collect();
    // JSON strings are valid double-quoted Dockerfile words, escapes included.
    let quote = |v: &str| serde_json::Value::from(v).to_string();
    let labels = [
        (LABEL_MANAGED, "true"),
        (LABEL_INSTANCE, task.id.as_str()),
        (LABEL_DIGEST, material.digest.as_str()),
    ]
    .iter()
    .map(|(k, v)| format!("{k}={}", quote(v)))
    .collect::<Vec<_>>()
    .join(" ");
    let template = if prebuilt(task) {
        PREBUILT_TEMPLATE
    } else {
        TEMPLATE
    };
    template
        .replace("{{BASE_IMAGE}}", &task.base_image)
        .replace("{{SETUP}}", &setup)
        .replace("{{LABELS}}", &labels)
        .replace("{{SOURCE_MTIME}}", &SOURCE_MTIME.to_string())
}

/// The modification time of every file of a task image's source tree: fixed (the same inputs
/// give the same context) and not 0. A patched file gets the time it was patched, so with the
/// untouched tree at 0 the variants would differ in more than their code. Measured here
/// (scripts/validate_measurement.py at a true speedup of 1.0001, and by rewriting a module with
/// its own bytes): a Python bench ran 2-3% slower, every run, once its module's mtime was not
/// 0, most likely because CPython keeps 0 as a cached small int but allocates any other mtime
/// while importing, which shifts the heap layout of all that is imported after it. With every
/// mtime non-zero, base and patched files take the same path. After 2^30 s it is stored like a
/// current time; older than anything a patch writes, so `make` still sees patched files as
/// new. The template's last step sets it on the whole tree (setup's outputs included).
pub const SOURCE_MTIME: u64 = 1_500_000_000;

/// Where the build context puts what the image's last step needs: the guard that locks the
/// tree for the sandbox user (container/programs/guard.py) and the task's protected set.
const BUILD_DIR: &str = "opt/harness-build";
const BUILD_CONFIG: &str = "opt/harness-build/config.json";

/// The guard's configuration for this task: protected set, sandbox user.
pub fn guard_config(task: &Task, material: &Material) -> String {
    let protection = crate::protect::Protection::for_task(task, material.paths());
    // A prebuilt tree keeps its own mtimes: no ignored file can be told from the image's.
    let config = protection.guard_config(
        &crate::assets::absolute_paths(),
        (!prebuilt(task)).then_some(SOURCE_MTIME),
        task.resources.disk_bytes,
    );
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

/// The build context: `Dockerfile` and `root/`, copied onto the image's `/` in one step:
/// `root/testbed/` (the code at base) and `root/opt/harness-build/` (guard and its config).
pub fn context_tar(task: &Task, material: &Material) -> Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut add = |path: &str, data: &[u8], mode: u32| -> Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_mtime(SOURCE_MTIME);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, data)
            .with_context(|| format!("cannot pack {path} into the build context"))
    };
    add("Dockerfile", dockerfile(task, material).as_bytes(), 0o644)?;
    for (target, data) in &material.image_files {
        add(&format!("root{target}"), data, 0o444)?;
    }
    for e in &material.entries {
        if let EntryKind::File { mode, data } = &e.kind {
            add(&format!("root/testbed/{}", e.path), data, *mode)?;
        }
    }
    for (name, bytes) in crate::assets::build_scripts() {
        add(&format!("root/{BUILD_DIR}/{name}"), bytes, 0o644)?;
    }
    add(
        &format!("root/{BUILD_CONFIG}"),
        guard_config(task, material).as_bytes(),
        0o644,
    )?;
    let mut b = b;
    let tree_dir = (!prebuilt(task)).then_some("root/testbed/");
    for d in ["root/", "root/opt/", "root/opt/harness-build/"]
        .into_iter()
        .chain(tree_dir)
    {
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_mtime(SOURCE_MTIME);
        dir.set_size(0);
        b.append_data(&mut dir, d, std::io::empty())
            .context("cannot pack the source folder")?;
    }
    for e in &material.entries {
        if let EntryKind::Symlink { target } = &e.kind {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_mode(0o777);
            h.set_mtime(SOURCE_MTIME);
            h.set_size(0);
            b.append_link(&mut h, format!("root/testbed/{}", e.path), target)
                .with_context(|| format!("cannot pack link {}", e.path))?;
        }
    }
    b.into_inner().context("cannot finish the build context")
}

/// Docker repository names are lowercase letters, digits and separators.
pub(super) fn repo_name(instance_id: &str) -> String {
    let mut s: String = instance_id
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    while s.starts_with(['-', '_', '.']) {
        s.remove(0);
    }
    format!("harness-task/{}", if s.is_empty() { "task" } else { &s })
}

/// The tag: a hash over the Dockerfile, the context (guard and protected set included) and
/// the base image's id, so any change
/// to what goes in makes a new image and nothing else does.
pub fn image_tag(task: &Task, material: &Material, base_image_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(dockerfile(task, material).as_bytes());
    h.update([0]);
    h.update(material.digest.as_bytes());
    h.update([0]);
    h.update(base_image_id.as_bytes());
    h.update([0]);
    for (name, bytes) in crate::assets::build_scripts() {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(bytes);
        h.update([0]);
    }
    h.update(guard_config(task, material).as_bytes());
    let digest = hex::encode(h.finalize());
    format!("{}:{}", repo_name(&task.id), &digest[..16])
}

/// The version of the default base image that `scripts/make-base-image.sh` makes (its
/// `org.harness.base-version` label): an image of another version is made again.
pub const BASE_IMAGE_VERSION: &str = "3";
const BASE_VERSION_LABEL: &str = "org.harness.base-version";

/// A local image's inspect data, or `None` when it is not there.
async fn inspect_local(
    engine: &Engine,
    name: &str,
) -> Result<Option<bollard::models::ImageInspect>> {
    let inspected = engine
        .gate
        .call(
            &engine.api,
            "inspect image",
            Repeat::Harmless,
            |api| async move { api.inspect_image(name).await },
        )
        .await;
    match inspected {
        Ok(i) => Ok(Some(i)),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot inspect image {name}")),
    }
}

/// Pulls `name` (`repository:tag`) through the engine, to the end of its progress stream.
pub async fn pull(engine: &Engine, name: &str) -> Result<()> {
    use futures::StreamExt;
    let opts = bollard::query_parameters::CreateImageOptionsBuilder::new()
        .from_image(name)
        .build();
    let mut progress = engine.api.create_image(Some(opts), None, None);
    while let Some(step) = progress.next().await {
        step.with_context(|| format!("cannot pull {name}"))?;
    }
    Ok(())
}

/// Gives the local image `from` the name `to` (`repository:tag`).
pub async fn tag(engine: &Engine, from: &str, to: &str) -> Result<()> {
    let (repo, tag) = match to.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, tag),
        _ => (to, "latest"),
    };
    let opts = bollard::query_parameters::TagImageOptionsBuilder::new()
        .repo(repo)
        .tag(tag)
        .build();
    engine
        .api
        .tag_image(from, Some(opts))
        .await
        .with_context(|| format!("cannot tag {from} as {to}"))
}

/// Whether the engine holds an image of this name.
pub async fn image_present(engine: &Engine, name: &str) -> Result<bool> {
    Ok(inspect_local(engine, name).await?.is_some())
}

/// The value of `label` on a local image, None when the image or the label is missing.
pub async fn image_label(engine: &Engine, name: &str, label: &str) -> Result<Option<String>> {
    Ok(inspect_local(engine, name)
        .await?
        .and_then(|i| i.config)
        .and_then(|c| c.labels)
        .and_then(|l| l.get(label).cloned()))
}

/// The id of a local image, or `None` when it is not there.
pub async fn local_image_id(engine: &Engine, name: &str) -> Result<Option<String>> {
    Ok(inspect_local(engine, name)
        .await?
        .map(|i| i.id.unwrap_or_default()))
}

/// A build that ran and failed; `task_fault` when a step of the task's Dockerfile failed
/// (its setup is broken) rather than the engine.
#[derive(Debug)]
pub struct BuildFailed {
    pub task_fault: bool,
    pub message: String,
}

impl std::fmt::Display for BuildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildFailed {}

#[derive(Debug, Clone)]
pub struct TaskImage {
    /// The image of the task's tree as it was built: the human's containers run on it.
    pub tag: String,
    /// The image of base's and the samples' containers: `tag` itself, or for a prebuilt
    /// image, `tag` with base's history alone in its git repositories (see
    /// [`super::derived::ensure_sample_image`]).
    pub sample_tag: String,
    /// True when the image already existed and nothing was built.
    pub cached: bool,
    pub build_seconds: f64,
    pub log_path: PathBuf,
}

/// Builds the image of the task's tree unless an image with its tag exists (or `force`).
/// The build output goes to `log_path`; a failed build's error carries its last lines. (See
/// `task_images::ensure_task_image` for the task's images together.)
pub async fn ensure_tree_image(
    engine: &Engine,
    task: &Task,
    material: &Material,
    log_path: &Path,
    force: bool,
    cpuset: Option<&str>,
) -> Result<TaskImage> {
    let base_id = local_image_id(engine, &task.base_image)
        .await?
        .unwrap_or_else(|| task.base_image.clone());
    let tag = image_tag(task, material, &base_id);
    let before = local_image_id(engine, &tag).await?;
    if !force && before.is_some() {
        return Ok(TaskImage {
            sample_tag: tag.clone(),
            tag,
            cached: true,
            build_seconds: 0.0,
            log_path: log_path.to_path_buf(),
        });
    }
    let started = Instant::now();
    let context = context_tar(task, material)?;
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    let mut log = std::fs::File::create(log_path)
        .with_context(|| format!("{}: cannot create build log", log_path.display()))?;
    let _ = writeln!(
        log,
        "# harness build of {} as {tag}\n# --- Dockerfile ---\n{}# ---",
        task.id,
        dockerfile(task, material)
    );

    let mut builder = BuildImageOptionsBuilder::default();
    if let Some(cpus) = cpuset {
        builder = builder.cpusetcpus(cpus);
    }
    let opts = builder
        .dockerfile("Dockerfile")
        .t(&tag)
        .rm(true)
        // Without forcerm a failed classic build leaves its intermediate container behind.
        .forcerm(true)
        .build();
    // Large contexts can outlast the client's default request timeout.
    let api = engine.api.clone().with_timeout(Duration::from_secs(3600));
    // A build is repeatable, so one cut off by a transient engine failure is run again.
    let mut attempt = 1;
    let (failure, tail, engine_fault) = loop {
        let outcome = build_once(&api, opts.clone(), &context, &mut log, task.setup_timeout).await;
        match outcome.transient {
            Some(e) if attempt < calls::ATTEMPTS => {
                let _ = writeln!(log, "# transient engine failure; building again");
                engine
                    .gate
                    .wait_before_retry("image build", &e, attempt)
                    .await;
                attempt += 1;
            }
            transient => break (outcome.failure, outcome.tail, transient.is_some()),
        }
    };
    // A stream may end with a spurious error after a successful build: the image decides.
    let after = local_image_id(engine, &tag).await?;
    let built = after.is_some() && (failure.is_none() || after != before);
    if !built {
        // A step that failed (or a setup that outran its timeout) is the task's fault;
        // a build that ended without an error and without an image, or that the engine
        // cut off, is the engine's.
        let task_fault = failure.is_some() && !engine_fault;
        let mut why = failure.unwrap_or_else(|| "the build ended without an image".into());
        if prebuilt(task) && local_image_id(engine, &task.base_image).await?.is_none() {
            why.push_str(&format!(
                "\n  source.image {} is not on this Docker engine and could not be pulled \
                 (GSO's instance images: `docker pull slimshetty/gso:<name without the tag>`, \
                 then `docker tag` it as {})",
                task.base_image, task.base_image
            ));
        }
        let last: Vec<String> = tail.into_iter().collect();
        return Err(BuildFailed {
            task_fault,
            message: format!(
                "building the image of task {} failed: {why}\n  log: {}\n  last lines:\n    {}",
                task.id,
                log_path.display(),
                last.join("\n    ")
            ),
        }
        .into());
    }
    let _ = writeln!(log, "# built in {:.1} s", started.elapsed().as_secs_f64());
    Ok(TaskImage {
        sample_tag: tag.clone(),
        tag,
        cached: false,
        build_seconds: started.elapsed().as_secs_f64(),
        log_path: log_path.to_path_buf(),
    })
}

/// What one try of a build left.
pub(super) struct BuildTry {
    pub(super) failure: Option<String>,
    /// The last lines of the build's output.
    pub(super) tail: std::collections::VecDeque<String>,
    /// The engine error that cut the build off, when another try could succeed.
    pub(super) transient: Option<bollard::errors::Error>,
}

pub(super) async fn build_once(
    api: &bollard::Docker,
    opts: bollard::query_parameters::BuildImageOptions,
    context: &[u8],
    log: &mut std::fs::File,
    timeout: Duration,
) -> BuildTry {
    let mut stream = api.build_image(
        opts,
        None,
        Some(bollard::body_full(context.to_vec().into())),
    );
    let mut transient = None;
    let mut failure: Option<String> = None;
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let remember = |line: &str, tail: &mut std::collections::VecDeque<String>| {
        for l in line.lines() {
            tail.push_back(l.to_string());
            if tail.len() > 30 {
                tail.pop_front();
            }
        }
    };
    let drive = async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(s) = info.stream.as_deref() {
                        let _ = log.write_all(s.as_bytes());
                        remember(s, &mut tail);
                    }
                    if let Some(s) = info.status.as_deref() {
                        let _ = writeln!(log, "{s}");
                    }
                    if let Some(detail) = info.error_detail.as_ref() {
                        let msg = detail
                            .message
                            .clone()
                            .unwrap_or_else(|| "build error".into());
                        let _ = writeln!(log, "ERROR: {msg}");
                        failure = Some(msg);
                    }
                }
                Err(e) => {
                    let msg = match &e {
                        bollard::errors::Error::DockerStreamError { error } => error.clone(),
                        other => other.to_string(),
                    };
                    let _ = writeln!(log, "ERROR: {msg}");
                    failure = Some(msg);
                    if calls::classify(&e).is_some() {
                        transient = Some(e);
                    }
                    break;
                }
            }
        }
    };
    if tokio::time::timeout(timeout, drive).await.is_err() {
        let _ = writeln!(log, "ERROR: build timed out after {timeout:?}");
        failure = Some(format!("timed out after {} s", timeout.as_secs()));
    }
    BuildTry {
        failure,
        tail,
        transient,
    }
}

/// Where `scripts/make-base-image.sh` is: `$HARNESS_SCRIPTS`, `./scripts`, or the checkout
/// this binary was built from.
pub fn base_image_script() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Ok(dir) = std::env::var("HARNESS_SCRIPTS") {
        candidates.push(PathBuf::from(dir).join("make-base-image.sh"));
    }
    candidates.push(PathBuf::from("scripts/make-base-image.sh"));
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-base-image.sh"));
    candidates.into_iter().find(|p| p.is_file())
}

/// Makes the default base image when a task needs it and it is missing, by running
/// `scripts/make-base-image.sh` (debootstrap + import: no registry needed). Other base
/// images are left to the build's own FROM (pulled where a registry is reachable).
pub async fn ensure_base_images(
    engine: &Engine,
    tasks: &[&Task],
    events: &crate::events::Events,
) -> Result<()> {
    let say = |m: String| crate::events::emit(events, harness_core::events::Event::Info(m));
    if !tasks.iter().any(|t| t.base_image == DEFAULT_BASE_IMAGE) {
        return Ok(());
    }
    let version = image_label(engine, DEFAULT_BASE_IMAGE, BASE_VERSION_LABEL).await?;
    if version.as_deref() == Some(BASE_IMAGE_VERSION) {
        return Ok(());
    }
    let script = base_image_script().ok_or_else(|| {
        anyhow!(
            "the base image {DEFAULT_BASE_IMAGE} is missing and scripts/make-base-image.sh was not found \
             (run the harness from its repository, or set HARNESS_SCRIPTS)"
        )
    })?;
    let why = if local_image_id(engine, DEFAULT_BASE_IMAGE).await?.is_some() {
        "is of an older version"
    } else {
        "is missing"
    };
    say(format!(
        "base image {DEFAULT_BASE_IMAGE} {why}: making it once with {} (debootstrap, about 1-2 minutes)",
        script.display()
    ));
    let mut child = tokio::process::Command::new("bash")
        .arg(&script)
        .env("HARNESS_BASE_IMAGE", DEFAULT_BASE_IMAGE)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", script.display()))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut lines_out = Vec::new();
    use tokio::io::AsyncBufReadExt;
    let read_out = async {
        if let Some(s) = stdout {
            let mut lines = tokio::io::BufReader::new(s).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                say(format!("  {l}"));
            }
        }
    };
    let read_err = async {
        if let Some(s) = stderr {
            let mut lines = tokio::io::BufReader::new(s).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                lines_out.push(l);
            }
        }
    };
    futures::join!(read_out, read_err);
    let status = child
        .wait()
        .await
        .context("waiting for the base image script")?;
    let made = image_label(engine, DEFAULT_BASE_IMAGE, BASE_VERSION_LABEL).await?;
    if !status.success() || made.as_deref() != Some(BASE_IMAGE_VERSION) {
        bail!(
            "{} failed ({status}):\n{}",
            script.display(),
            lines_out.join("\n")
        );
    }
    Ok(())
}

/// The tag the task's image has now (what `ensure_task_image` would build or find), without
/// building anything.
pub async fn current_image_tag(
    engine: &Engine,
    task: &Task,
    material: &Material,
) -> Result<String> {
    let base_id = local_image_id(engine, &task.base_image)
        .await?
        .unwrap_or_else(|| task.base_image.clone());
    Ok(image_tag(task, material, &base_id))
}

/// The repository prefix of every task image.
pub const TASK_REPOSITORY_PREFIX: &str = "harness-task/";
/// Where the images of base's and the samples' containers of prebuilt-image tasks are.
pub const SAMPLES_REPOSITORY_PREFIX: &str = "harness-samples/";
/// The label of such an image: the task image it was built from.
pub const LABEL_SAMPLES_OF: &str = "org.harness.samples-of";

/// An image labelled `org.harness.managed=true`.
#[derive(Debug, Clone)]
pub struct ManagedImage {
    pub id: String,
    /// Its tags (none for a dangling image).
    pub tags: Vec<String>,
    /// The `org.harness.instance` label: the task it was built for.
    pub instance: Option<String>,
    /// For a samples image, the task image it was built from ([`LABEL_SAMPLES_OF`]).
    pub samples_of: Option<String>,
    /// Size with the layers it shares (the base image's included).
    pub size: u64,
    pub created: i64,
}

impl ManagedImage {
    pub fn dangling(&self) -> bool {
        self.tags.is_empty()
    }
}

fn real_tags(tags: Vec<String>) -> Vec<String> {
    tags.into_iter()
        .filter(|t| t != "<none>:<none>" && !t.ends_with(":<none>"))
        .collect()
}

async fn list_images(
    engine: &Engine,
    opts: bollard::query_parameters::ListImagesOptions,
) -> Result<Vec<bollard::models::ImageSummary>> {
    let opts = &opts;
    engine
        .gate
        .call(
            &engine.api,
            "list images",
            Repeat::Harmless,
            |api| async move { api.list_images(Some(opts.clone())).await },
        )
        .await
        .context("cannot list images")
}

/// Every image (top level, not build intermediates) carrying the harness's label.
pub async fn managed_images(engine: &Engine) -> Result<Vec<ManagedImage>> {
    let mut filters = std::collections::HashMap::new();
    filters.insert("label".to_string(), vec![format!("{LABEL_MANAGED}=true")]);
    let opts = bollard::query_parameters::ListImagesOptionsBuilder::default()
        .all(false)
        .filters(&filters)
        .build();
    let list = list_images(engine, opts).await?;
    Ok(list
        .into_iter()
        .filter(|i| i.labels.get(LABEL_MANAGED).is_some_and(|v| v == "true"))
        .map(|i| ManagedImage {
            instance: i.labels.get(LABEL_INSTANCE).cloned(),
            samples_of: i.labels.get(LABEL_SAMPLES_OF).cloned(),
            tags: real_tags(i.repo_tags),
            size: i.size.max(0) as u64,
            created: i.created,
            id: i.id,
        })
        .collect())
}

/// The ids of every top-level image on the engine (anyone's).
pub async fn all_image_ids(engine: &Engine) -> Result<Vec<String>> {
    let opts = bollard::query_parameters::ListImagesOptionsBuilder::default()
        .all(false)
        .build();
    Ok(list_images(engine, opts)
        .await?
        .into_iter()
        .map(|i| i.id)
        .collect())
}

/// The layers of an image, newest first: (the id of the image that added it, or
/// `<missing>` when the engine does not have it; bytes it added).
pub async fn image_layers(engine: &Engine, image: &str) -> Result<Vec<(String, u64)>> {
    Ok(engine
        .gate
        .call(
            &engine.api,
            "image history",
            Repeat::Harmless,
            |api| async move { api.image_history(image).await },
        )
        .await
        .with_context(|| format!("cannot read the history of image {image}"))?
        .into_iter()
        .map(|h| (h.id, h.size.max(0) as u64))
        .collect())
}

/// What removing one image reference did.
#[derive(Debug, Clone)]
pub enum ImageRemoval {
    /// Image ids deleted (the image and any parent layers only it used) and tags removed.
    Removed {
        deleted: Vec<String>,
        untagged: Vec<String>,
    },
    /// The engine refused without force (a container or a child image uses it): kept.
    Conflict(String),
    /// It was gone already.
    Missing,
}

/// Removes a tag or an image id, never forced: the engine refuses when a container uses the
/// image or another image is built on it.
pub async fn remove_image(engine: &Engine, reference: &str) -> Result<ImageRemoval> {
    let opts = bollard::query_parameters::RemoveImageOptionsBuilder::default()
        .force(false)
        .noprune(false)
        .build();
    let opts = &opts;
    let removal = engine
        .gate
        .call(
            &engine.api,
            "remove image",
            Repeat::Harmless,
            |api| async move { api.remove_image(reference, Some(opts.clone()), None).await },
        )
        .await;
    match removal {
        Ok(items) => {
            let mut deleted = Vec::new();
            let mut untagged = Vec::new();
            for i in items {
                if let Some(d) = i.deleted {
                    deleted.push(d);
                }
                if let Some(u) = i.untagged {
                    untagged.push(u);
                }
            }
            Ok(ImageRemoval::Removed { deleted, untagged })
        }
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(ImageRemoval::Missing),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            message,
        }) => Ok(ImageRemoval::Conflict(message)),
        Err(e) => Err(e).with_context(|| format!("cannot remove image {reference}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_names_are_valid() {
        assert_eq!(repo_name("Foo__Bar-1"), "harness-task/foo__bar-1");
        assert_eq!(repo_name("_x"), "harness-task/x");
    }
}
