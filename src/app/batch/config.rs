//! The batch's config file, read and checked: every problem at once, nothing run unless all
//! of it is right. Batch-wide settings are the keys of [`Settings`], over the same defaults
//! as `opt-at-k`'s options.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::RESERVED;
use super::problems::{Problems, screen};
use crate::core::settings::Settings;
use crate::store::run_folder::sanitize;

/// The config file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    name: Option<String>,
    parallelism: Option<usize>,
    dataset: Option<PathBuf>,
    k: Option<usize>,
    instance_ids: Option<Vec<String>>,
    /// The agents file of entries that name an `agent` (default: agents.toml beside the
    /// config).
    agents: Option<PathBuf>,
    /// Where the agents' gateway forwards instead of each provider (`--model-server`).
    model_server: Option<String>,
    /// Dollars each agent sample may spend (`--max-cost`).
    max_cost: Option<f64>,
    #[serde(default)]
    entry: Vec<RawEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    model: Option<String>,
    agent: Option<String>,
    label: Option<String>,
    predictions: Option<OneOrMany>,
    k: Option<usize>,
    dataset: Option<PathBuf>,
    instance_ids: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(PathBuf),
    Many(Vec<PathBuf>),
}

/// One entry, checked; paths resolved against the config file's folder.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryPlan {
    /// 1-based, in file order.
    pub index: usize,
    pub model: String,
    /// The entry's name in tables: its `label`, else the model.
    pub label: String,
    /// The entry's run folder inside the batch folder.
    pub run_id: String,
    pub predictions: Vec<PathBuf>,
    pub k: usize,
    pub dataset: PathBuf,
    pub instance_ids: Vec<String>,
    /// An agent x model entry: the agent makes its predictions (K samples a task) before
    /// they are evaluated; `model` is then `agent/model`.
    pub agent: Option<AgentEntry>,
}

/// The agent of an agent x model entry.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEntry {
    /// Its name in the agents file.
    pub name: String,
    pub agents_file: PathBuf,
    /// The model it is told to use (the gateway routes it).
    pub model: String,
    pub model_server: Option<String>,
    pub max_cost: Option<f64>,
}

impl EntryPlan {
    /// How errors name the entry.
    pub fn describe(&self) -> String {
        format!("entry {} (model {:?})", self.index, self.model)
    }
}

/// A config file, checked: nothing runs unless all of it is right.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchPlan {
    pub config: PathBuf,
    /// The batch folder's name under the results folder.
    pub name: String,
    /// `--jobs` of every entry.
    pub jobs: usize,
    pub settings: Settings,
    pub entries: Vec<EntryPlan>,
}

/// `a/b/../c` as `a/c`, without touching the file system (a config's `..` paths read
/// better in messages and reports, and two spellings of one dataset compare equal).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    if out.is_empty() {
        PathBuf::from(".")
    } else {
        out.iter().collect()
    }
}

/// Reads and checks a config file.
pub fn load(config: &Path) -> Result<BatchPlan> {
    let text = std::fs::read_to_string(config)
        .with_context(|| format!("{}: cannot read the batch config", config.display()))?;
    parse(&text, config)
}

/// Checks a config's text; `config` is its path (relative paths in it are relative to its
/// folder). Every problem is listed at once.
pub fn parse(text: &str, config: &Path) -> Result<BatchPlan> {
    let table: toml::Table = toml::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}: {}", config.display(), e.to_string().trim_end()))?;
    let mut problems = Problems::default();
    let (settings, mut rest) = split_settings(table, &mut problems);
    screen_keys(&mut rest, &mut problems);
    let raw: RawConfig = rest.try_into().map_err(|e: toml::de::Error| {
        anyhow::anyhow!("{}: {}", config.display(), e.to_string().trim_end())
    })?;
    let base = match config.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (name, jobs) = check_head(&raw, &mut problems);
    let mut entries = Vec::new();
    // run_id → (index, which field named it), to refuse two entries sharing a folder.
    let mut taken: Vec<(String, usize)> = Vec::new();
    for (i, e) in raw.entry.iter().enumerate() {
        entries.push(check_entry(
            i + 1,
            e,
            &raw,
            &base,
            &mut taken,
            &mut problems,
        ));
    }
    if !problems.is_empty() {
        bail!(
            "{}: {} problem(s), nothing was run:\n  {}",
            config.display(),
            problems.len(),
            problems.render(text, config).join("\n  ")
        );
    }
    Ok(BatchPlan {
        config: config.to_path_buf(),
        name,
        jobs,
        settings,
        entries,
    })
}

/// The batch-wide settings (the keys of [`Settings`]) out of the file's top-level table,
/// each read on its own so every bad one is named, and the rest of the table.
fn split_settings(mut table: toml::Table, problems: &mut Problems) -> (Settings, toml::Table) {
    let mut good = toml::Table::new();
    for key in Settings::keys() {
        let Some(value) = table.remove(&key) else {
            continue;
        };
        let mut one = toml::Table::new();
        one.insert(key.clone(), value.clone());
        match Settings::deserialize(one) {
            Ok(_) => {
                good.insert(key, value);
            }
            Err(e) => problems.push(&key, format!("{key}: {}", e.to_string().trim_end())),
        }
    }
    let settings = Settings::deserialize(good).unwrap_or_default();
    for (key, why) in settings.problems() {
        problems.push(key, format!("{key}: {why}"));
    }
    (settings, table)
}

/// The batch's name and parallelism, and the file-wide checks.
/// Keys no place takes, and values of the wrong type, out of the file's tables: each a
/// problem, so that every one is listed (serde would stop at the first).
fn screen_keys(rest: &mut toml::Table, problems: &mut Problems) {
    const TOP: [&str; 9] = [
        "name",
        "parallelism",
        "dataset",
        "k",
        "instance_ids",
        "entry",
        "agents",
        "model_server",
        "max_cost",
    ];
    const ENTRY: [&str; 7] = [
        "model",
        "label",
        "predictions",
        "k",
        "dataset",
        "instance_ids",
        "agent",
    ];
    let entry_keys: Vec<String> = ENTRY.iter().map(|k| k.to_string()).collect();
    if let Some(toml::Value::Array(entries)) = rest.get_mut("entry") {
        for (i, e) in entries.iter_mut().enumerate() {
            if let toml::Value::Table(t) = e {
                let (at, who) = (format!("entry[{}].", i + 1), format!("entry {}: ", i + 1));
                screen::<RawEntry>(t, &entry_keys, &at, &who, problems);
            }
        }
    }
    let mut top: Vec<String> = TOP.iter().map(|k| k.to_string()).collect();
    top.extend(Settings::keys());
    screen::<RawConfig>(rest, &top, "", "", problems);
}

fn check_head(raw: &RawConfig, problems: &mut Problems) -> (String, usize) {
    let name = match raw.name.as_deref().map(str::trim) {
        None => {
            problems.push(
                "name",
                "name: missing (the batch folder's name under the results folder)",
            );
            String::new()
        }
        Some(n) if n.is_empty() || sanitize(n) != n => {
            problems.push(
                "name",
                format!(
                    "name {n:?}: use only letters, digits, '.', '_' and '-' (it names a folder)"
                ),
            );
            String::new()
        }
        Some(n) => n.to_string(),
    };
    let jobs = raw.parallelism.unwrap_or(1);
    if jobs == 0 {
        problems.push("parallelism", "parallelism: must be at least 1");
    }
    if raw.k == Some(0) {
        problems.push("k", "k: must be at least 1");
    }
    if raw.entry.is_empty() {
        problems.push(
            "entry",
            "no [[entry]]: a batch needs at least one (model, predictions, k)",
        );
    }
    (name, jobs)
}

/// One entry, checked: its problems go to `problems`, named by the entry.
fn check_entry(
    index: usize,
    e: &RawEntry,
    raw: &RawConfig,
    base: &Path,
    taken: &mut Vec<(String, usize)>,
    problems: &mut Problems,
) -> EntryPlan {
    let resolve = |p: &Path| normalize(&base.join(p));
    let model = e.model.clone().unwrap_or_default();
    let who = if model.trim().is_empty() {
        format!("entry {index}")
    } else {
        format!("entry {index} (model {model:?})")
    };
    let mut bad = |field: &str, why: String| {
        problems.push(
            format!("entry[{index}].{field}"),
            format!("{who}: {field}: {why}"),
        )
    };
    if e.model.is_none() {
        bad("model", "missing".into());
    } else if model.trim().is_empty() {
        bad("model", "must not be empty".into());
    }
    let predictions = predictions_of(e, &resolve, &mut bad);
    let k = match e.k.or(raw.k) {
        None => {
            bad("k", "missing (give it in the entry or batch-wide)".into());
            0
        }
        Some(0) => {
            if e.k == Some(0) {
                bad("k", "must be at least 1".into());
            }
            0
        }
        Some(k) => k,
    };
    let dataset = match (&e.dataset, &raw.dataset) {
        (Some(d), _) | (None, Some(d)) => resolve(d),
        (None, None) => PathBuf::from("tasks"),
    };
    if !dataset.is_dir() {
        bad("dataset", format!("{}: not a folder", dataset.display()));
    }
    let agent = e.agent.as_ref().map(|name| AgentEntry {
        name: name.clone(),
        agents_file: resolve(raw.agents.as_deref().unwrap_or(Path::new("agents.toml"))),
        model: model.clone(),
        model_server: raw.model_server.clone(),
        max_cost: raw.max_cost,
    });
    if let Some(a) = &agent
        && !a.agents_file.is_file()
    {
        bad(
            "agent",
            format!(
                "{}: no such agents file (`agents` names it)",
                a.agents_file.display()
            ),
        );
    }
    // An agent x model entry's runs and rows are named for both.
    let model = match &agent {
        Some(a) => format!("{}/{}", a.name, a.model),
        None => model,
    };
    let label = match &e.label {
        Some(l) if l.trim().is_empty() => {
            bad("label", "must not be empty".into());
            model.clone()
        }
        Some(l) => l.clone(),
        None => model.clone(),
    };
    let run_id = crate::store::run_folder::model_slug(&label);
    let field = if e.label.is_some() { "label" } else { "model" };
    if RESERVED.contains(&run_id.as_str()) {
        bad(
            field,
            format!("{run_id:?} is a file of the batch folder; give the entry another `label`"),
        );
    }
    if !model.trim().is_empty() {
        if let Some((_, other)) = taken.iter().find(|(id, _)| *id == run_id) {
            bad(
                field,
                format!(
                    "{label:?} is also entry {other}'s name (its run folder {run_id}); give one of them a distinct `label`"
                ),
            );
        } else {
            taken.push((run_id.clone(), index));
        }
    }
    EntryPlan {
        index,
        model,
        label,
        run_id,
        predictions,
        k,
        dataset,
        instance_ids: e
            .instance_ids
            .clone()
            .or_else(|| raw.instance_ids.clone())
            .unwrap_or_default(),
        agent,
    }
}

/// An entry's predictions files (none for an agent entry: its agent makes them), each
/// checked to exist.
fn predictions_of(
    e: &RawEntry,
    resolve: &dyn Fn(&Path) -> PathBuf,
    bad: &mut dyn FnMut(&str, String),
) -> Vec<PathBuf> {
    let predictions: Vec<PathBuf> = match &e.predictions {
        None if e.agent.is_some() => Vec::new(),
        Some(_) if e.agent.is_some() => {
            bad(
                "predictions",
                "an entry with an agent makes its own predictions: give one of the two".into(),
            );
            Vec::new()
        }
        None => {
            bad("predictions", "missing (a file, or a list of files)".into());
            Vec::new()
        }
        Some(OneOrMany::One(p)) => vec![resolve(p)],
        Some(OneOrMany::Many(ps)) => ps.iter().map(|p| resolve(p)).collect(),
    };
    if matches!(&e.predictions, Some(OneOrMany::Many(ps)) if ps.is_empty()) {
        bad("predictions", "the list is empty".into());
    }
    for p in &predictions {
        if !p.is_file() {
            bad("predictions", format!("{}: no such file", p.display()));
        }
    }
    predictions
}

/// What can be checked of an entry without Docker before anything runs: its dataset loads
/// and has the instances it asks for, and its predictions read and hold rows of its model.
/// Returns the instances it covers.
pub fn preflight(entry: &EntryPlan) -> Result<Vec<String>> {
    let dataset = crate::store::dataset::Dataset::load(&entry.dataset)?;
    let (tasks, _warnings) = dataset.select(&entry.instance_ids)?;
    let predictions = crate::store::predictions::load(
        &entry.predictions,
        &crate::store::predictions::LoadOptions {
            model: entry.model.clone(),
            max_patch_bytes: crate::core::patch::MAX_PATCH_BYTES,
            rollout_per_file: false,
        },
    )?;
    if predictions.total() == 0 {
        bail!(
            "predictions: no usable row of model {:?} in {}",
            entry.model,
            entry
                .predictions
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(tasks.iter().map(|t| t.id.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::criterion::Criterion;
    use crate::core::estimator::Estimator;

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("tasks/t1")).unwrap();
            std::fs::write(dir.path().join("a.jsonl"), "").unwrap();
            std::fs::write(dir.path().join("b.jsonl"), "").unwrap();
            Fixture { dir }
        }
        fn parse(&self, text: &str) -> Result<BatchPlan> {
            parse(text, &self.dir.path().join("batch.toml"))
        }
        fn err(&self, text: &str) -> String {
            format!("{:#}", self.parse(text).unwrap_err())
        }
    }

    const HEAD: &str = "name = \"b1\"\nparallelism = 2\ndataset = \"tasks\"\nk = 3\n";

    #[test]
    fn a_good_config_resolves_paths_against_its_folder() {
        let f = Fixture::new();
        let plan = f
            .parse(&format!(
                "{HEAD}criterion = \"gso\"\nmax_rounds = 4\nestimator = \"median\"\n\
                 [[entry]]\nmodel = \"m/a\"\npredictions = \"a.jsonl\"\n\
                 [[entry]]\nmodel = \"m/a\"\nlabel = \"a-k1\"\npredictions = [\"a.jsonl\", \"b.jsonl\"]\nk = 1\ninstance_ids = [\"t1\"]\n"
            ))
            .unwrap();
        assert_eq!(plan.name, "b1");
        assert_eq!(plan.jobs, 2);
        assert_eq!(plan.settings.criterion, Criterion::GSO);
        assert_eq!(plan.settings.max_rounds, Some(4));
        assert_eq!(plan.settings.estimator, Some(Estimator::Quantile(0.5)));
        let [a, b] = plan.entries.as_slice() else {
            panic!("two entries")
        };
        assert_eq!(a.predictions, vec![f.dir.path().join("a.jsonl")]);
        assert_eq!(a.dataset, f.dir.path().join("tasks"));
        assert_eq!(a.k, 3);
        assert_eq!(a.label, "m/a");
        assert_eq!(a.run_id, "m__a");
        assert_eq!(b.k, 1);
        assert_eq!(b.run_id, "a-k1");
        assert_eq!(b.predictions.len(), 2);
        assert_eq!(b.instance_ids, vec!["t1".to_string()]);
    }

    #[test]
    fn every_problem_is_listed_with_its_line_and_column() {
        let f = Fixture::new();
        let e = f.err(
            "name = \"b\"\nk = \"three\"\nseeed = 1\n[[entry]]\nmodel = \"a\"\n\
             predictions = \"a.jsonl\"\nsamples = 2\n[[entry]]\nmodel = \"b\"\n",
        );
        for want in [
            "6 problem(s), nothing was run",
            "batch.toml:2:1: k: invalid type: string \"three\"",
            "batch.toml:3:1: seeed: unknown key (this place takes name, parallelism, dataset, k, instance_ids, entry,",
            "batch.toml:7:1: entry 1: samples: unknown key (this place takes model, label, predictions,",
            "batch.toml:8:1: entry 2 (model \"b\"): predictions: missing",
        ] {
            assert!(e.contains(want), "{want:?} missing in:\n{e}");
        }
        // The rule's keys are among those the file takes.
        let unknown = e.lines().find(|l| l.contains("seeed")).unwrap_or("");
        for key in ["criterion", "seed", "min_speedup", "max_rounds"] {
            assert!(unknown.contains(key), "{key} missing in {unknown}");
        }
    }

    #[test]
    fn paths_are_normalised() {
        assert_eq!(
            normalize(Path::new("tasks/_batches/../x.jsonl")),
            PathBuf::from("tasks/x.jsonl")
        );
        assert_eq!(normalize(Path::new("./a/./b")), PathBuf::from("a/b"));
        assert_eq!(normalize(Path::new("../a")), PathBuf::from("../a"));
        assert_eq!(normalize(Path::new("a/..")), PathBuf::from("."));
    }

    #[test]
    fn an_unknown_key_is_named_with_the_file() {
        let f = Fixture::new();
        let e = f.err(&format!(
            "{HEAD}paralelism = 3\n[[entry]]\nmodel = \"a\"\npredictions = \"a.jsonl\"\n"
        ));
        assert!(e.contains("paralelism"), "{e}");
        assert!(e.contains("batch.toml"), "{e}");
        let e = f.err(&format!(
            "{HEAD}[[entry]]\nmodel = \"a\"\npredictions = \"a.jsonl\"\nsamples = 3\n"
        ));
        assert!(e.contains("samples") && e.contains("batch.toml"), "{e}");
    }

    #[test]
    fn a_missing_predictions_file_names_the_entry_and_field() {
        let f = Fixture::new();
        let e = f.err(&format!(
            "{HEAD}[[entry]]\nmodel = \"a\"\npredictions = \"a.jsonl\"\n\
             [[entry]]\nmodel = \"b\"\npredictions = [\"b.jsonl\", \"gone.jsonl\"]\n"
        ));
        assert!(
            e.contains("entry 2 (model \"b\"): predictions:")
                && e.contains("gone.jsonl: no such file"),
            "{e}"
        );
        assert!(!e.contains("entry 1"), "{e}");
        let e = f.err(&format!("{HEAD}[[entry]]\nmodel = \"a\"\n"));
        assert!(
            e.contains("entry 1 (model \"a\"): predictions: missing"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_models_need_distinct_labels() {
        let f = Fixture::new();
        let two = "[[entry]]\nmodel = \"a\"\npredictions = \"a.jsonl\"\n\
                   [[entry]]\nmodel = \"a\"\npredictions = \"b.jsonl\"\n";
        let e = f.err(&format!("{HEAD}{two}"));
        assert!(
            e.contains("entry 2 (model \"a\"): model:")
                && e.contains("entry 1's name")
                && e.contains("label"),
            "{e}"
        );
        let ok = format!("{HEAD}{two}label = \"a-again\"\n");
        assert_eq!(f.parse(&ok).unwrap().entries[1].run_id, "a-again");
        // A label that takes another entry's folder is refused too.
        let e = f.err(&format!(
            "{HEAD}[[entry]]\nmodel = \"a\"\npredictions = \"a.jsonl\"\n\
             [[entry]]\nmodel = \"b\"\nlabel = \"a\"\npredictions = \"b.jsonl\"\n"
        ));
        assert!(e.contains("entry 2 (model \"b\"): label:"), "{e}");
        let e = f.err(&format!(
            "{HEAD}[[entry]]\nmodel = \"batch.json\"\npredictions = \"a.jsonl\"\n"
        ));
        assert!(e.contains("file of the batch folder"), "{e}");
    }

    #[test]
    fn k_zero_and_other_bad_values_are_all_listed() {
        let f = Fixture::new();
        let e = f.err(
            "name = \"b 1\"\nparallelism = 0\nk = 0\nmin_speedup = -1.0\nestimator = \"p0\"\n\
             [[entry]]\nmodel = \"a\"\npredictions = \"a.jsonl\"\nk = 0\n\
             [[entry]]\nmodel = \"b\"\npredictions = \"b.jsonl\"\ndataset = \"nowhere\"\n",
        );
        for want in [
            "name \"b 1\"",
            "parallelism: must be at least 1",
            "k: must be at least 1",
            "entry 1 (model \"a\"): k: must be at least 1",
            "min_speedup: -1 is not a positive number",
            "estimator:",
            "entry 2 (model \"b\"): dataset:",
            "nothing was run",
        ] {
            assert!(e.contains(want), "{want:?} missing in: {e}");
        }
        let e = f.err("name = \"b\"\n[[entry]]\nmodel = \"a\"\npredictions = \"a.jsonl\"\ndataset = \"tasks\"\n");
        assert!(e.contains("entry 1 (model \"a\"): k: missing"), "{e}");
        let e = f.err("name = \"b\"\nk = 1\n");
        assert!(e.contains("no [[entry]]"), "{e}");
        let e = f.err(&format!("{HEAD}criterion = \"loose\"\n"));
        assert!(e.contains("loose") && e.contains("batch.toml"), "{e}");
    }
}
