//! `harness images gc`: removes what this harness made and no task needs any more — task
//! images whose task now has another image, dangling images of its builds, containers left by
//! killed runs — and nothing else: never an image without the harness's label or outside
//! `harness-task/`, never an image a container (anyone's, any state) uses, never a
//! container of a live harness process or of another host.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use crate::sandbox::docker::Engine;
use crate::sandbox::docker::image::{
    ImageRemoval, ManagedImage, SAMPLES_REPOSITORY_PREFIX, TASK_REPOSITORY_PREFIX, all_image_ids,
    current_image_tag, image_layers, managed_images, remove_image,
};
use crate::store::dataset::Dataset;

#[derive(Debug, Clone)]
pub struct GcOptions {
    pub dataset: PathBuf,
    /// Where sources fetched from git are cached (to compute the current tags).
    pub cache_dir: PathBuf,
    pub dry_run: bool,
    /// Also remove images of tasks that are not in the dataset.
    pub all_tasks: bool,
}

/// What the dataset says about a task's image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// The task's current image tag.
    Current(String),
    /// The task is in the dataset but its current tag cannot be computed (invalid task,
    /// source not available): all its images are kept.
    Unknown(String),
}

/// The verdict on one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Remove,
    Keep,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImageVerdict {
    pub id: String,
    pub tags: Vec<String>,
    pub instance: Option<String>,
    pub action: Action,
    pub reason: String,
    /// Bytes freed by removing it (measured after removal; an estimate with --dry-run).
    pub bytes: u64,
}

/// A dangling image younger than this is kept: a classic build makes its last image
/// untagged an instant before it tags it.
pub const MIN_DANGLING_AGE_S: i64 = 600;

/// Decides, without touching the engine, which managed images go. `in_use`: image id →
/// containers using it; `now`: Unix seconds.
pub fn classify(
    images: &[ManagedImage],
    wanted: &BTreeMap<String, Wanted>,
    in_use: &BTreeMap<String, Vec<String>>,
    all_tasks: bool,
    now: i64,
) -> Vec<ImageVerdict> {
    images
        .iter()
        .map(|img| {
            let (action, reason) = decide(img, wanted, all_tasks, now);
            let (action, reason) = match (action, in_use.get(&img.id)) {
                (Action::Remove, Some(users)) => (
                    Action::Keep,
                    format!("{reason}, but in use by container(s) {}", users.join(", ")),
                ),
                other => (other.0, reason),
            };
            ImageVerdict {
                id: img.id.clone(),
                tags: img.tags.clone(),
                instance: img.instance.clone(),
                action,
                reason,
                bytes: 0,
            }
        })
        .collect()
}

fn decide(
    img: &ManagedImage,
    wanted: &BTreeMap<String, Wanted>,
    all_tasks: bool,
    now: i64,
) -> (Action, String) {
    let Some(task) = img.instance.as_deref() else {
        return (
            Action::Keep,
            "no org.harness.instance label: not a task image".into(),
        );
    };
    if img.dangling() && now - img.created < MIN_DANGLING_AGE_S {
        return (
            Action::Keep,
            format!(
                "dangling image of task {task}, but made in the last {MIN_DANGLING_AGE_S} s (a build may be tagging it)"
            ),
        );
    }
    if img.dangling() {
        return (
            Action::Remove,
            format!("dangling image of task {task} (left by a rebuild)"),
        );
    }
    let prefix = match img.samples_of {
        Some(_) => SAMPLES_REPOSITORY_PREFIX,
        None => TASK_REPOSITORY_PREFIX,
    };
    if let Some(t) = img.tags.iter().find(|t| !t.starts_with(prefix)) {
        return (Action::Keep, format!("also tagged {t}, outside {prefix}"));
    }
    // A samples image goes with the task image it was built from.
    if let (Some(from), Some(Wanted::Current(tag))) = (&img.samples_of, wanted.get(task)) {
        return if from == tag {
            (
                Action::Keep,
                format!("the samples' image of task {task}'s current image"),
            )
        } else {
            (
                Action::Remove,
                format!("outdated: built from {from}, task {task} now needs {tag}"),
            )
        };
    }
    match wanted.get(task) {
        Some(Wanted::Current(tag)) if img.tags.contains(tag) => {
            (Action::Keep, format!("the current image of task {task}"))
        }
        Some(Wanted::Current(tag)) => (
            Action::Remove,
            format!("outdated: task {task} now needs {tag}"),
        ),
        Some(Wanted::Unknown(why)) => (
            Action::Keep,
            format!("task {task}'s current image cannot be computed ({why})"),
        ),
        None if all_tasks => (Action::Remove, format!("task {task} is not in the dataset")),
        None => (
            Action::Keep,
            format!("task {task} is not in the dataset (--all-tasks removes it)"),
        ),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    pub dataset: PathBuf,
    /// Every managed image and what was (or would be) done with it.
    pub images: Vec<ImageVerdict>,
    /// Containers of killed harness runs removed (or that would be).
    pub containers: Vec<String>,
    /// Bytes freed (with --dry-run: an estimate of what would be).
    pub bytes_freed: u64,
    /// Images that could not be removed, with the engine's reason.
    pub failures: Vec<String>,
    pub warnings: Vec<String>,
}

/// Runs the collection.
pub async fn gc(engine: &Engine, opts: &GcOptions) -> Result<GcReport> {
    let dataset = Dataset::load(&opts.dataset)?;
    let mut warnings = Vec::new();
    let wanted = wanted_images(engine, &dataset, opts, &mut warnings).await;
    let (containers, in_use) = orphans(engine, opts).await?;
    let images = managed_images(engine).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut verdicts = classify(&images, &wanted, &in_use, opts.all_tasks, now);
    let (layer_bytes, layers_of) = layer_sizes(engine, &verdicts, &mut warnings).await;
    let mut failures = Vec::new();
    let bytes_freed = if opts.dry_run {
        estimate(engine, &mut verdicts, &layer_bytes, &layers_of).await?
    } else {
        remove(engine, &mut verdicts, &layer_bytes, &mut failures).await
    };
    verdicts.sort_by(|a, b| {
        (&a.action, &a.instance, &a.tags, &a.id).cmp(&(&b.action, &b.instance, &b.tags, &b.id))
    });
    Ok(GcReport {
        dry_run: opts.dry_run,
        dataset: opts.dataset.clone(),
        images: verdicts,
        containers,
        bytes_freed,
        failures,
        warnings,
    })
}

/// What the dataset says of each task's image: the current tag, or why it cannot say.
async fn wanted_images(
    engine: &Engine,
    dataset: &Dataset,
    opts: &GcOptions,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, Wanted> {
    let mut wanted: BTreeMap<String, Wanted> = BTreeMap::new();
    for (name, why) in &dataset.invalid {
        warnings.push(format!(
            "task {name} is invalid, its images are kept: {}",
            why.lines().next().unwrap_or("")
        ));
        wanted.insert(name.clone(), Wanted::Unknown("invalid task".into()));
    }
    for task in dataset.tasks.values() {
        // A remote source is not fetched here: only what a build fetched is read.
        let w = match crate::sandbox::source::materialize_with(
            task,
            &opts.cache_dir,
            crate::sandbox::source::Fetch::CachedOnly,
        ) {
            Ok(material) => match current_image_tag(engine, task, &material).await {
                Ok(tag) => Wanted::Current(tag),
                Err(e) => Wanted::Unknown(format!("{e:#}")),
            },
            Err(e)
                if e.downcast_ref::<crate::sandbox::source::NotFetched>()
                    .is_some() =>
            {
                Wanted::Unknown(format!("{e}"))
            }
            Err(e) => Wanted::Unknown(format!("its source cannot be read: {e:#}")),
        };
        if let Wanted::Unknown(why) = &w {
            warnings.push(format!("task {}: images kept: {why}", task.id));
        }
        wanted.insert(task.id.clone(), w);
    }

    wanted
}

/// Containers of killed runs go first (the images they held become free): their names,
/// and which containers hold which image after them.
async fn orphans(
    engine: &Engine,
    opts: &GcOptions,
) -> Result<(Vec<String>, BTreeMap<String, Vec<String>>)> {
    let orphans = engine.orphan_containers().await?;
    let containers: Vec<String> = orphans
        .iter()
        .map(|(id, name)| {
            if name.is_empty() {
                id.clone()
            } else {
                name.clone()
            }
        })
        .collect();
    if !opts.dry_run && !orphans.is_empty() {
        engine.remove_orphans().await?;
    }
    let orphan_ids: BTreeSet<&str> = orphans.iter().map(|(id, _)| id.as_str()).collect();
    let orphan_names: BTreeSet<&str> = orphans.iter().map(|(_, n)| n.as_str()).collect();
    let mut in_use = engine.containers_by_image().await?;
    if opts.dry_run {
        // They would be gone before the images are looked at.
        for users in in_use.values_mut() {
            users
                .retain(|u| !orphan_names.contains(u.as_str()) && !orphan_ids.contains(u.as_str()));
        }
        in_use.retain(|_, users| !users.is_empty());
    }

    Ok((containers, in_use))
}

/// Bytes each layer adds, from the histories of the images that go, and their layers.
async fn layer_sizes(
    engine: &Engine,
    verdicts: &[ImageVerdict],
    warnings: &mut Vec<String>,
) -> (BTreeMap<String, u64>, BTreeMap<String, Vec<String>>) {
    let mut layer_bytes: BTreeMap<String, u64> = BTreeMap::new();
    let mut layers_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in verdicts.iter().filter(|v| v.action == Action::Remove) {
        match image_layers(engine, &v.id).await {
            Ok(layers) => {
                let ids = layers
                    .iter()
                    .filter(|(id, _)| id != "<missing>")
                    .map(|(id, _)| id.clone())
                    .collect();
                for (id, bytes) in layers {
                    layer_bytes.insert(id, bytes);
                }
                layers_of.insert(v.id.clone(), ids);
            }
            Err(e) => warnings.push(format!("{e:#}")),
        }
    }

    (layer_bytes, layers_of)
}

/// What removing would free (a dry run): a layer is freed when no image that stays has it.
async fn estimate(
    engine: &Engine,
    verdicts: &mut [ImageVerdict],
    layer_bytes: &BTreeMap<String, u64>,
    layers_of: &BTreeMap<String, Vec<String>>,
) -> Result<u64> {
    let mut bytes_freed = 0;
    let going: BTreeSet<String> = verdicts
        .iter()
        .filter(|v| v.action == Action::Remove)
        .map(|v| v.id.clone())
        .collect();
    let mut kept_layers: BTreeSet<String> = BTreeSet::new();
    for id in all_image_ids(engine).await? {
        if going.contains(&id) {
            continue;
        }
        if let Ok(layers) = image_layers(engine, &id).await {
            kept_layers.extend(layers.into_iter().map(|(l, _)| l));
        }
    }
    let mut counted: BTreeSet<String> = BTreeSet::new();
    for v in verdicts.iter_mut().filter(|v| v.action == Action::Remove) {
        for l in layers_of.get(&v.id).into_iter().flatten() {
            if !kept_layers.contains(l) && counted.insert(l.clone()) {
                v.bytes += layer_bytes.get(l).copied().unwrap_or(0);
            }
        }
        bytes_freed += v.bytes;
    }
    Ok(bytes_freed)
}

/// Removes the images that go; returns the bytes freed.
async fn remove(
    engine: &Engine,
    verdicts: &mut [ImageVerdict],
    layer_bytes: &BTreeMap<String, u64>,
    failures: &mut Vec<String>,
) -> u64 {
    let mut bytes_freed = 0;
    // A samples image before the task image it was built from: a parent with a child is
    // only untagged.
    verdicts.sort_by_key(|v| {
        !v.tags
            .iter()
            .any(|t| t.starts_with(SAMPLES_REPOSITORY_PREFIX))
    });
    for v in verdicts.iter_mut().filter(|v| v.action == Action::Remove) {
        // By tag (an image with several tags cannot be removed by id without force);
        // the last tag removed deletes it. A dangling image goes by id.
        let refs: Vec<String> = if v.tags.is_empty() {
            vec![v.id.clone()]
        } else {
            v.tags.clone()
        };
        let mut deleted: Vec<String> = Vec::new();
        for r in &refs {
            match remove_image(engine, r).await {
                Ok(ImageRemoval::Removed { deleted: d, .. }) => deleted.extend(d),
                Ok(ImageRemoval::Missing) => {}
                Ok(ImageRemoval::Conflict(msg)) => {
                    v.action = Action::Keep;
                    v.reason = format!("{}, but the engine refused: {msg}", v.reason);
                    break;
                }
                Err(e) => {
                    v.action = Action::Keep;
                    failures.push(format!("{r}: {e:#}"));
                    break;
                }
            }
        }
        v.bytes = deleted
            .iter()
            .filter_map(|d| layer_bytes.get(d))
            .sum::<u64>();
        bytes_freed += v.bytes;
    }
    bytes_freed
}

/// Bytes as people read them (decimal units, as Docker prints them).
pub fn human_bytes(n: u64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut x = n as f64;
    let mut u = 0;
    while x >= 1000.0 && u < units.len() - 1 {
        x /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{x:.1} {}", units[u])
    }
}

fn name_of(v: &ImageVerdict) -> String {
    if v.tags.is_empty() {
        let short = v.id.trim_start_matches("sha256:");
        format!("<dangling {}>", &short[..short.len().min(12)])
    } else {
        v.tags.join(", ")
    }
}

/// The text `harness images gc` prints.
pub fn render(r: &GcReport) -> String {
    let mut out = String::new();
    let (verb, verbed) = if r.dry_run {
        ("would remove", "would free about")
    } else {
        ("removed", "freed")
    };
    for w in &r.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    for c in &r.containers {
        out.push_str(&format!(
            "{verb} container {c} (left by a harness run that is gone)\n"
        ));
    }
    let mut other_tasks = 0;
    for v in &r.images {
        match v.action {
            Action::Remove => out.push_str(&format!(
                "{verb} {} ({}), {}\n",
                name_of(v),
                v.reason,
                human_bytes(v.bytes)
            )),
            Action::Keep if v.reason.contains("--all-tasks") => other_tasks += 1,
            Action::Keep if v.reason.starts_with("the current image") => {}
            Action::Keep => out.push_str(&format!("kept {} ({})\n", name_of(v), v.reason)),
        }
    }
    if other_tasks > 0 {
        out.push_str(&format!(
            "kept {other_tasks} image(s) of tasks not in {} (--all-tasks removes them)\n",
            r.dataset.display()
        ));
    }
    for f in &r.failures {
        out.push_str(&format!("error: {f}\n"));
    }
    let n = r
        .images
        .iter()
        .filter(|v| v.action == Action::Remove)
        .count();
    out.push_str(&format!(
        "{verbed} {} ({n} image(s), {} container(s))\n",
        human_bytes(r.bytes_freed),
        r.containers.len()
    ));
    out
}

/// `harness images gc`: what was (or would be) removed, as text or JSON.
pub async fn command(opts: GcOptions, json: bool) -> Result<i32> {
    let engine = Engine::connect().await?;
    let report = gc(&engine, &opts).await?;
    if json {
        crate::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        crate::out!("{}", render(&report));
    }
    Ok(if report.failures.is_empty() { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(id: &str, tags: &[&str], instance: Option<&str>) -> ManagedImage {
        ManagedImage {
            id: id.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            instance: instance.map(str::to_string),
            samples_of: None,
            size: 1,
            created: 0,
        }
    }

    #[test]
    fn only_stale_images_of_the_harness_go() {
        let images = vec![
            img("a", &["harness-task/t:new"], Some("t")),
            img("b", &["harness-task/t:old"], Some("t")),
            img("c", &[], Some("t")),
            img("d", &["harness-task/gone:x"], Some("gone")),
            img("e", &["harness-task/t:old2", "mine/t:keep"], Some("t")),
            img("f", &["harness-task/u:old"], Some("u")),
            img("g", &["harness-task/t:old3"], Some("t")),
            img("h", &["harness-task/x:y"], None),
            ManagedImage {
                created: 10_000 - 5,
                ..img("i", &[], Some("t"))
            },
        ];
        let wanted: BTreeMap<String, Wanted> = [
            (
                "t".to_string(),
                Wanted::Current("harness-task/t:new".into()),
            ),
            ("u".to_string(), Wanted::Unknown("source missing".into())),
        ]
        .into();
        let in_use: BTreeMap<String, Vec<String>> =
            [("g".to_string(), vec!["c1".to_string()])].into();
        let v = classify(&images, &wanted, &in_use, false, 10_000);
        let action = |id: &str| v.iter().find(|x| x.id == id).unwrap().action;
        assert_eq!(action("a"), Action::Keep, "current");
        assert_eq!(action("b"), Action::Remove, "outdated");
        assert_eq!(action("c"), Action::Remove, "dangling");
        assert_eq!(action("d"), Action::Keep, "other task, no --all-tasks");
        assert_eq!(action("e"), Action::Keep, "tagged outside harness-task/");
        assert_eq!(action("f"), Action::Keep, "current tag unknown");
        assert_eq!(action("g"), Action::Keep, "in use");
        assert!(
            v.iter()
                .find(|x| x.id == "g")
                .unwrap()
                .reason
                .contains("c1")
        );
        assert_eq!(action("h"), Action::Keep, "no instance label");
        assert_eq!(action("i"), Action::Keep, "dangling but brand new");
        let v = classify(&images, &wanted, &in_use, true, 10_000);
        let action = |id: &str| v.iter().find(|x| x.id == id).unwrap().action;
        assert_eq!(action("d"), Action::Remove, "--all-tasks");
        assert_eq!(action("f"), Action::Keep);
        assert_eq!(action("e"), Action::Keep);
    }

    #[test]
    fn a_samples_image_goes_with_the_task_image_it_was_built_from() {
        let samples = |id: &str, from: &str| ManagedImage {
            samples_of: Some(from.into()),
            ..img(id, &[&format!("harness-samples/t:{id}")], Some("t"))
        };
        let images = vec![
            samples("cur", "harness-task/t:new"),
            samples("old", "harness-task/t:old"),
            ManagedImage {
                samples_of: Some("harness-task/t:old".into()),
                ..img("mine", &["harness-samples/t:x", "mine/t:keep"], Some("t"))
            },
        ];
        let wanted: BTreeMap<String, Wanted> = [(
            "t".to_string(),
            Wanted::Current("harness-task/t:new".into()),
        )]
        .into();
        let v = classify(&images, &wanted, &BTreeMap::new(), false, 10_000);
        let action = |id: &str| v.iter().find(|x| x.id == id).unwrap().action;
        assert_eq!(action("cur"), Action::Keep);
        assert_eq!(action("old"), Action::Remove);
        assert_eq!(
            action("mine"),
            Action::Keep,
            "tagged outside harness-samples/"
        );
    }

    #[test]
    fn bytes_for_people() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(45_200), "45.2 kB");
        assert_eq!(human_bytes(263_000_000), "263.0 MB");
    }
}
