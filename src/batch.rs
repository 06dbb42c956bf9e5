//! `harness run CONFIG.toml`: a batch of models x tasks x rollouts from one config file, in
//! one folder. Each entry is an `opt-at-k` run (the CLI runs it through the same path) in
//! `<results_dir>/<name>/<entry>/`; after the last, `batch.json` and `summary.md` rank them.
//!
//! Parsing, validation and ranking are plain functions over plain data (no Docker).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::results::sanitize;
use crate::rule::{Criterion, Estimator};

/// batch.json's format version.
pub const BATCH_SCHEMA_VERSION: u32 = 1;

/// File names the batch writes beside the entries' run folders: no entry may take them.
const RESERVED: [&str; 2] = ["batch.json", "summary.md"];

/// The config file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    name: Option<String>,
    parallelism: Option<usize>,
    dataset: Option<PathBuf>,
    k: Option<usize>,
    instance_ids: Option<Vec<String>>,
    timeout_scale: Option<f64>,
    criterion: Option<Criterion>,
    seed: Option<u64>,
    estimator: Option<String>,
    min_rounds: Option<u32>,
    max_rounds: Option<u32>,
    max_measure_seconds: Option<f64>,
    replicas: Option<u32>,
    min_speedup: Option<f64>,
    opt_thresh: Option<f64>,
    #[serde(default)]
    entry: Vec<RawEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    model: Option<String>,
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

/// Batch-wide measurement and rule settings: each overrides opt-at-k's default of the
/// option of the same name, for every entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub timeout_scale: Option<f64>,
    pub criterion: Option<Criterion>,
    pub seed: Option<u64>,
    pub estimator: Option<Estimator>,
    pub min_rounds: Option<u32>,
    pub max_rounds: Option<u32>,
    pub max_measure_seconds: Option<f64>,
    pub replicas: Option<u32>,
    pub min_speedup: Option<f64>,
    pub opt_thresh: Option<f64>,
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
    let raw: RawConfig = toml::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}: {}", config.display(), e.to_string().trim_end()))?;
    let base = match config.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let resolve = |p: &Path| normalize(&base.join(p));
    let mut problems: Vec<String> = Vec::new();

    let name = match raw.name.as_deref().map(str::trim) {
        None => {
            problems
                .push("name: missing (the batch folder's name under the results folder)".into());
            String::new()
        }
        Some(n) if n.is_empty() || sanitize(n) != n => {
            problems.push(format!(
                "name {n:?}: use only letters, digits, '.', '_' and '-' (it names a folder)"
            ));
            String::new()
        }
        Some(n) => n.to_string(),
    };
    let jobs = raw.parallelism.unwrap_or(1);
    if jobs == 0 {
        problems.push("parallelism: must be at least 1".into());
    }
    let positive = |key: &str, v: Option<f64>, problems: &mut Vec<String>| {
        if let Some(v) = v
            && !(v.is_finite() && v > 0.0)
        {
            problems.push(format!("{key}: {v} is not a positive number"));
        }
    };
    positive("timeout_scale", raw.timeout_scale, &mut problems);
    positive("min_speedup", raw.min_speedup, &mut problems);
    positive("opt_thresh", raw.opt_thresh, &mut problems);
    positive(
        "max_measure_seconds",
        raw.max_measure_seconds,
        &mut problems,
    );
    for (key, v) in [
        ("min_rounds", raw.min_rounds),
        ("max_rounds", raw.max_rounds),
        ("replicas", raw.replicas),
    ] {
        if v == Some(0) {
            problems.push(format!("{key}: must be at least 1"));
        }
    }
    if let (Some(min), Some(max)) = (raw.min_rounds, raw.max_rounds)
        && max < min
    {
        problems.push(format!("max_rounds {max} is below min_rounds {min}"));
    }
    let estimator = match raw.estimator.as_deref().map(str::parse::<Estimator>) {
        None => None,
        Some(Ok(e)) => Some(e),
        Some(Err(e)) => {
            problems.push(format!("estimator: {e}"));
            None
        }
    };
    if raw.k == Some(0) {
        problems.push("k: must be at least 1".into());
    }
    if raw.entry.is_empty() {
        problems.push("no [[entry]]: a batch needs at least one (model, predictions, k)".into());
    }

    let mut entries = Vec::new();
    // run_id → (index, which field named it), to refuse two entries sharing a folder.
    let mut taken: Vec<(String, usize)> = Vec::new();
    for (i, e) in raw.entry.iter().enumerate() {
        let index = i + 1;
        let model = e.model.clone().unwrap_or_default();
        let who = if model.trim().is_empty() {
            format!("entry {index}")
        } else {
            format!("entry {index} (model {model:?})")
        };
        let mut bad = |field: &str, why: String| problems.push(format!("{who}: {field}: {why}"));
        if e.model.is_none() {
            bad("model", "missing".into());
        } else if model.trim().is_empty() {
            bad("model", "must not be empty".into());
        }
        let predictions: Vec<PathBuf> = match &e.predictions {
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
        let label = match &e.label {
            Some(l) if l.trim().is_empty() => {
                bad("label", "must not be empty".into());
                model.clone()
            }
            Some(l) => l.clone(),
            None => model.clone(),
        };
        let run_id = crate::results::model_slug(&label);
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
        let instance_ids = e
            .instance_ids
            .clone()
            .or_else(|| raw.instance_ids.clone())
            .unwrap_or_default();
        entries.push(EntryPlan {
            index,
            model,
            label,
            run_id,
            predictions,
            k,
            dataset,
            instance_ids,
        });
    }
    if !problems.is_empty() {
        bail!(
            "{}: {} problem(s), nothing was run:\n  {}",
            config.display(),
            problems.len(),
            problems.join("\n  ")
        );
    }
    Ok(BatchPlan {
        config: config.to_path_buf(),
        name,
        jobs,
        settings: Settings {
            timeout_scale: raw.timeout_scale,
            criterion: raw.criterion,
            seed: raw.seed,
            estimator,
            min_rounds: raw.min_rounds,
            max_rounds: raw.max_rounds,
            max_measure_seconds: raw.max_measure_seconds,
            replicas: raw.replicas,
            min_speedup: raw.min_speedup,
            opt_thresh: raw.opt_thresh,
        },
        entries,
    })
}

/// What can be checked of an entry without Docker before anything runs: its dataset loads
/// and has the instances it asks for, and its predictions read and hold rows of its model.
/// Returns the instances it covers.
pub fn preflight(entry: &EntryPlan) -> Result<Vec<String>> {
    let dataset = crate::dataset::Dataset::load(&entry.dataset)?;
    let (tasks, _warnings) = dataset.select(&entry.instance_ids)?;
    let predictions = crate::predictions::load(
        &entry.predictions,
        &crate::predictions::LoadOptions {
            model: entry.model.clone(),
            max_patch_bytes: crate::patch::MAX_PATCH_BYTES,
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

/// Where an entry got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Every sample has a result (its reports say `complete: true`).
    Complete,
    /// It ran but is incomplete (interrupted, or samples ended `error`): its figures count
    /// what is missing as failures.
    Partial,
    /// Its run stopped with an error before it had reports.
    Failed,
    /// The batch stopped before it.
    NotRun,
}

impl EntryState {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Complete => "complete",
            EntryState::Partial => "partial",
            EntryState::Failed => "failed",
            EntryState::NotRun => "not run",
        }
    }
}

/// An entry's figures, as its own reports give them: percents with two decimals, intervals
/// the reports' 95% bootstrap intervals over instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// Opt@K: the opt@K report's `score`.
    pub opt_at_k: f64,
    /// `opt_at_k_ci` at k = K (Opt@K is opt@k at k = K).
    pub opt_at_k_ci: [f64; 2],
    pub pass_at_1: f64,
    pub pass_at_1_ci: [f64; 2],
    /// pass@k at k = K.
    pub pass_at_k: f64,
    pub pass_at_k_ci: [f64; 2],
    pub opt_commit: usize,
    pub opt_base: usize,
    pub instances: usize,
}

impl Figures {
    pub fn from_summary(summary: &crate::report::Summary) -> Figures {
        let k = summary.info.k;
        let t = &summary.totals;
        let ci = |xs: &[[f64; 2]], k: usize| -> [f64; 2] {
            xs.get(k.wrapping_sub(1))
                .map(|[lo, hi]| {
                    [
                        crate::metrics::python_round(lo * 100.0, 2),
                        crate::metrics::python_round(hi * 100.0, 2),
                    ]
                })
                .unwrap_or([0.0, 0.0])
        };
        // As the opt@K report writes its curves.
        let pass = |k: usize| {
            t.pass_at_k
                .get(k.wrapping_sub(1))
                .map(|v| crate::metrics::python_round(v * 100.0, 2))
                .unwrap_or(0.0)
        };
        Figures {
            opt_at_k: crate::ci::value(summary, crate::ci::Metric::Opt, k).unwrap_or(0.0),
            opt_at_k_ci: ci(&t.opt_at_k_ci, k),
            pass_at_1: pass(1),
            pass_at_1_ci: ci(&t.pass_at_k_ci, 1),
            pass_at_k: pass(k),
            pass_at_k_ci: ci(&t.pass_at_k_ci, k),
            opt_commit: t.opt_commit,
            opt_base: t.opt_base,
            instances: t.total_instances,
        }
    }
}

/// One entry's outcome, as batch.json lists it.
#[derive(Debug, Clone, Serialize)]
pub struct EntryResult {
    /// Position in the config file (1-based).
    pub index: usize,
    pub label: String,
    pub model: String,
    pub run_id: String,
    /// The entry's run folder.
    pub run_dir: String,
    pub k: usize,
    pub dataset: String,
    /// The dataset's canonical path: two spellings of one folder compare equal.
    #[serde(skip)]
    pub dataset_key: String,
    /// The instances it covers (its Opt@K's denominator).
    pub instance_ids: Vec<String>,
    pub state: EntryState,
    /// Set by [`rank`]: entries compare only within their group (same dataset, instances
    /// and K).
    pub group: usize,
    /// Set by [`rank`]: 1 is best; equal figures share a rank; None for an entry that is
    /// not complete.
    pub rank: Option<usize>,
    pub figures: Option<Figures>,
    pub interrupted: Option<String>,
    pub not_run_ids: Vec<String>,
    pub error: Option<String>,
    pub report_files: Vec<String>,
    /// The exit code `opt-at-k` would have given this entry alone.
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fail_under: Vec<crate::ci::GateResult>,
}

impl EntryResult {
    /// An entry with no outcome yet (not run).
    pub fn pending(e: &EntryPlan, run_dir: &Path, instance_ids: Vec<String>) -> EntryResult {
        EntryResult {
            index: e.index,
            label: e.label.clone(),
            model: e.model.clone(),
            run_id: e.run_id.clone(),
            run_dir: run_dir.display().to_string(),
            k: e.k,
            dataset: e.dataset.display().to_string(),
            dataset_key: std::fs::canonicalize(&e.dataset)
                .unwrap_or_else(|_| e.dataset.clone())
                .display()
                .to_string(),
            instance_ids,
            state: EntryState::NotRun,
            group: 0,
            rank: None,
            figures: None,
            interrupted: None,
            not_run_ids: Vec::new(),
            error: None,
            report_files: Vec::new(),
            exit_code: None,
            fail_under: Vec::new(),
        }
    }
}

/// Entries that may be ranked against each other.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub group: usize,
    pub dataset: String,
    pub k: usize,
    pub instances: usize,
    /// Labels of its entries, in ranking order.
    pub entries: Vec<String>,
}

/// The entries in ranking order, their groups, and what a reader must know about the order.
#[derive(Debug, Clone, Serialize)]
pub struct Ranking {
    /// True when every entry is in one group.
    pub comparable: bool,
    pub groups: Vec<Group>,
    pub notes: Vec<String>,
    pub entries: Vec<EntryResult>,
}

fn same_group(a: &EntryResult, b: &EntryResult) -> bool {
    a.dataset_key == b.dataset_key && a.k == b.k && a.instance_ids == b.instance_ids
}

/// Orders entries: by group (same dataset, instances and K; groups in config order), then
/// complete entries by Opt@K, pass@K (both as printed), label; then partial entries (not
/// ranked: their figures count what is missing as failures), then failed and not-run ones.
pub fn rank(mut entries: Vec<EntryResult>) -> Ranking {
    entries.sort_by_key(|e| e.index);
    let mut groups: Vec<Group> = Vec::new();
    let mut reps: Vec<usize> = Vec::new();
    for i in 0..entries.len() {
        let g = match reps
            .iter()
            .position(|&r| same_group(&entries[r], &entries[i]))
        {
            Some(g) => g,
            None => {
                reps.push(i);
                groups.push(Group {
                    group: groups.len() + 1,
                    dataset: entries[i].dataset.clone(),
                    k: entries[i].k,
                    instances: entries[i].instance_ids.len(),
                    entries: Vec::new(),
                });
                groups.len() - 1
            }
        };
        entries[i].group = g + 1;
    }
    let class = |e: &EntryResult| match (e.state, &e.figures) {
        (EntryState::Complete, Some(_)) => 0,
        (EntryState::Partial, Some(_)) => 1,
        _ => 2,
    };
    let key = |e: &EntryResult| {
        e.figures
            .as_ref()
            .map(|f| (f.opt_at_k, f.pass_at_k))
            .unwrap_or((f64::NEG_INFINITY, f64::NEG_INFINITY))
    };
    entries.sort_by(|a, b| {
        a.group
            .cmp(&b.group)
            .then(class(a).cmp(&class(b)))
            .then_with(|| {
                let (oa, pa) = key(a);
                let (ob, pb) = key(b);
                ob.total_cmp(&oa).then(pb.total_cmp(&pa))
            })
            .then_with(|| a.label.cmp(&b.label))
            .then(a.index.cmp(&b.index))
    });
    for i in 0..entries.len() {
        entries[i].rank = if class(&entries[i]) == 0 {
            let mine = key(&entries[i]);
            let better = entries
                .iter()
                .filter(|o| o.group == entries[i].group && class(o) == 0)
                .filter(|o| {
                    let (oo, op) = key(o);
                    oo > mine.0 || (oo == mine.0 && op > mine.1)
                })
                .count();
            Some(better + 1)
        } else {
            None
        };
        let g = entries[i].group - 1;
        groups[g].entries.push(entries[i].label.clone());
    }

    let mut notes = Vec::new();
    if groups.len() > 1 {
        let desc: Vec<String> = groups
            .iter()
            .map(|g| {
                format!(
                    "group {} (dataset {}, {} instance(s), K={}): {}",
                    g.group,
                    g.dataset,
                    g.instances,
                    g.k,
                    g.entries.join(", ")
                )
            })
            .collect();
        notes.push(format!(
            "not comparable across groups: entries are ranked only against entries with the same dataset, instances and K; {}",
            desc.join("; ")
        ));
    }
    for g in &groups {
        let ranked: Vec<&EntryResult> = entries
            .iter()
            .filter(|e| e.group == g.group && e.rank.is_some())
            .collect();
        if let [first, second, ..] = ranked.as_slice()
            && let (Some(a), Some(b)) = (&first.figures, &second.figures)
            && a.opt_at_k_ci[0] <= b.opt_at_k_ci[1]
            && b.opt_at_k_ci[0] <= a.opt_at_k_ci[1]
        {
            notes.push(format!(
                "the Opt@{} intervals of {} and {} overlap: their order may not hold on another run",
                g.k, first.label, second.label
            ));
        }
    }
    for e in &entries {
        match e.state {
            EntryState::Partial => notes.push(format!(
                "{} is partial ({}): not ranked; its figures count what did not run as failures — repeat the command to finish it",
                e.label,
                match &e.interrupted {
                    Some(sig) => format!("interrupted by {sig}"),
                    None => format!(
                        "{} instance(s) not run or ended `error`",
                        e.not_run_ids.len()
                    ),
                }
            )),
            EntryState::Failed => notes.push(format!(
                "{} failed: {}",
                e.label,
                e.error.as_deref().unwrap_or("unknown error")
            )),
            EntryState::NotRun => notes.push(format!(
                "{} was not run (the batch stopped before it)",
                e.label
            )),
            EntryState::Complete => {}
        }
    }
    Ranking {
        comparable: groups.len() <= 1,
        groups,
        notes,
        entries,
    }
}

/// The batch's exit code from its entries' own (opt-at-k's codes): 130/143 when a signal
/// stopped it, else 1 when an entry failed or had a sample end `error`, else 2 when a
/// `--fail-under` threshold was missed, else 0.
pub fn exit_code(entries: &[EntryResult], interrupted: Option<&str>) -> i32 {
    match interrupted {
        Some("SIGTERM") => return 143,
        Some(_) => return 130,
        None => {}
    }
    let codes: Vec<i32> = entries
        .iter()
        .map(|e| match e.state {
            EntryState::Failed => 1,
            _ => e.exit_code.unwrap_or(0),
        })
        .collect();
    for first in [143, 130] {
        if codes.contains(&first) {
            return first;
        }
    }
    if codes
        .iter()
        .any(|&c| c != 0 && c != crate::ci::EXIT_BELOW_THRESHOLD)
    {
        return 1;
    }
    if entries.iter().any(|e| e.fail_under.iter().any(|g| !g.met)) || codes.contains(&2) {
        return crate::ci::EXIT_BELOW_THRESHOLD;
    }
    if entries.iter().any(|e| e.state == EntryState::NotRun) {
        return 1;
    }
    0
}

/// batch.json.
#[derive(Debug, Clone, Serialize)]
pub struct BatchReport {
    pub schema_version: u32,
    pub name: String,
    pub config: String,
    pub batch_dir: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Every entry complete.
    pub complete: bool,
    pub interrupted: Option<String>,
    pub exit_code: i32,
    pub comparable: bool,
    pub groups: Vec<Group>,
    pub notes: Vec<String>,
    /// In ranking order.
    pub entries: Vec<EntryResult>,
}

fn pct_ci(v: f64, ci: [f64; 2]) -> String {
    format!("{v:.2}% [{:.2}, {:.2}]", ci[0], ci[1])
}

/// The rows of the table: (header, cells per entry).
fn table(report: &BatchReport) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header: Vec<String> = ["rank", "entry", "model", "K"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !report.comparable {
        header.insert(0, "group".into());
    }
    header.extend(
        ["Opt@K", "pass@1", "pass@K", "opt_commit", "state"]
            .iter()
            .map(|s| s.to_string()),
    );
    let rows = report
        .entries
        .iter()
        .map(|e| {
            let mut cells = vec![
                e.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
                e.label.clone(),
                e.model.clone(),
                e.k.to_string(),
            ];
            if !report.comparable {
                cells.insert(0, e.group.to_string());
            }
            match &e.figures {
                Some(f) => cells.extend([
                    pct_ci(f.opt_at_k, f.opt_at_k_ci),
                    pct_ci(f.pass_at_1, f.pass_at_1_ci),
                    pct_ci(f.pass_at_k, f.pass_at_k_ci),
                    format!("{} of {}", f.opt_commit, f.instances),
                ]),
                None => cells.extend(["-", "-", "-", "-"].map(String::from)),
            }
            cells.push(e.state.as_str().to_string());
            cells
        })
        .collect();
    (header, rows)
}

fn footer(report: &BatchReport) -> String {
    let ranked = report.entries.iter().filter(|e| e.rank.is_some()).count();
    format!(
        "batch {}: {} entr{}, {} complete and ranked{}; Opt@K and pass@k in percent with their 95% intervals over instances (as each entry's reports give them)",
        report.name,
        report.entries.len(),
        if report.entries.len() == 1 {
            "y"
        } else {
            "ies"
        },
        ranked,
        match &report.interrupted {
            Some(sig) => format!(", interrupted by {sig}"),
            None => String::new(),
        }
    )
}

/// The table printed at the end of a batch.
pub fn terminal_table(report: &BatchReport) -> String {
    let (header, rows) = table(report);
    let cells: Vec<&[String]> = rows.iter().map(Vec::as_slice).collect();
    let mut out = crate::report::columns(&header, &cells);
    out.push('\n');
    out.push_str(&footer(report));
    out.push('\n');
    for n in &report.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// `summary.md` of the batch folder.
pub fn summary_markdown(report: &BatchReport) -> String {
    let (header, rows) = table(report);
    let mut out = format!(
        "# Batch {}{}\n\n",
        report.name,
        if report.complete { "" } else { " (partial)" }
    );
    out.push_str(&format!("{}\n\n", footer(report)));
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    if !report.notes.is_empty() {
        out.push('\n');
        for n in &report.notes {
            out.push_str(&format!("- {n}\n"));
        }
    }
    out.push_str(
        "\nEach entry's own reports (summary.md, report.json files) are in its folder:\n\n",
    );
    for e in &report.entries {
        out.push_str(&format!("- {}: `{}/`\n", e.label, e.run_id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(plan.settings.criterion, Some(Criterion::Gso));
        assert_eq!(plan.settings.max_rounds, Some(4));
        assert_eq!(plan.settings.estimator, Some(Estimator::Quantile(0.5)));
        let [a, b] = plan.entries.as_slice() else {
            panic!("two entries")
        };
        assert_eq!(a.predictions, vec![f.dir.path().join("a.jsonl")]);
        assert_eq!(a.dataset, f.dir.path().join("tasks"));
        assert_eq!(a.k, 3);
        assert_eq!(a.label, "m/a");
        assert!(a.run_id.starts_with("m_a-"), "{}", a.run_id);
        assert_eq!(b.k, 1);
        assert_eq!(b.run_id, "a-k1");
        assert_eq!(b.predictions.len(), 2);
        assert_eq!(b.instance_ids, vec!["t1".to_string()]);
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

    fn result(label: &str, k: usize, state: EntryState, opt: f64, pass: f64) -> EntryResult {
        let plan = EntryPlan {
            index: 0,
            model: label.into(),
            label: label.into(),
            run_id: label.into(),
            predictions: vec![],
            k,
            dataset: "tasks".into(),
            instance_ids: vec![],
        };
        let mut r = EntryResult::pending(&plan, Path::new(label), vec!["a".into(), "b".into()]);
        r.state = state;
        r.exit_code = Some(0);
        if state != EntryState::NotRun && state != EntryState::Failed {
            r.figures = Some(Figures {
                opt_at_k: opt,
                opt_at_k_ci: [opt / 2.0, opt],
                pass_at_1: pass,
                pass_at_1_ci: [0.0, 100.0],
                pass_at_k: pass,
                pass_at_k_ci: [pass / 2.0, pass],
                opt_commit: 0,
                opt_base: 0,
                instances: 2,
            });
        }
        r
    }

    fn indexed(mut rs: Vec<EntryResult>) -> Vec<EntryResult> {
        for (i, r) in rs.iter_mut().enumerate() {
            r.index = i + 1;
        }
        rs
    }

    fn order(r: &Ranking) -> Vec<(String, Option<usize>)> {
        r.entries
            .iter()
            .map(|e| (e.label.clone(), e.rank))
            .collect()
    }

    #[test]
    fn ranks_by_opt_then_pass_then_name_and_ties_share_a_rank() {
        let r = rank(indexed(vec![
            result("c", 3, EntryState::Complete, 50.0, 80.0),
            result("b", 3, EntryState::Complete, 50.0, 90.0),
            result("a", 3, EntryState::Complete, 50.0, 80.0),
            result("d", 3, EntryState::Complete, 75.0, 10.0),
        ]));
        assert!(r.comparable);
        assert_eq!(
            order(&r),
            vec![
                ("d".into(), Some(1)),
                ("b".into(), Some(2)),
                ("a".into(), Some(3)),
                ("c".into(), Some(3)),
            ]
        );
        assert_eq!(r.groups.len(), 1);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("intervals of d and b overlap")),
            "{:?}",
            r.notes
        );
        let apart = rank(indexed(vec![
            result("hi", 3, EntryState::Complete, 100.0, 100.0),
            result("lo", 3, EntryState::Complete, 0.0, 0.0),
        ]));
        assert!(apart.notes.is_empty(), "{:?}", apart.notes);
    }

    #[test]
    fn a_partial_entry_is_never_ranked_above_a_complete_one() {
        let r = rank(indexed(vec![
            result("low", 3, EntryState::Complete, 10.0, 20.0),
            result("part", 3, EntryState::Partial, 90.0, 90.0),
            result("gone", 3, EntryState::NotRun, 0.0, 0.0),
            result("bad", 3, EntryState::Failed, 0.0, 0.0),
        ]));
        assert_eq!(
            order(&r),
            vec![
                ("low".into(), Some(1)),
                ("part".into(), None),
                ("bad".into(), None),
                ("gone".into(), None),
            ]
        );
        let notes = r.notes.join("\n");
        assert!(
            notes.contains("part is partial") && notes.contains("not ranked"),
            "{notes}"
        );
        assert!(notes.contains("gone was not run"), "{notes}");
    }

    #[test]
    fn different_k_or_dataset_are_ranked_apart_and_said_to_be_incomparable() {
        let mut other = result("x", 3, EntryState::Complete, 100.0, 100.0);
        other.dataset = "tasks/_real".into();
        other.dataset_key = "/somewhere/tasks/_real".into();
        let r = rank(indexed(vec![
            result("k3", 3, EntryState::Complete, 25.0, 50.0),
            result("k1", 1, EntryState::Complete, 75.0, 75.0),
            result("k3b", 3, EntryState::Complete, 50.0, 50.0),
            other,
        ]));
        assert!(!r.comparable);
        assert_eq!(r.groups.len(), 3);
        assert_eq!(
            order(&r),
            vec![
                ("k3b".into(), Some(1)),
                ("k3".into(), Some(2)),
                ("k1".into(), Some(1)),
                ("x".into(), Some(1)),
            ]
        );
        assert_eq!(r.groups[0].entries, vec!["k3b", "k3"]);
        let notes = r.notes.join("\n");
        assert!(notes.contains("not comparable across groups"), "{notes}");
        assert!(notes.contains("K=1): k1"), "{notes}");
        // The table shows the group column when there are several.
        let report = BatchReport {
            schema_version: BATCH_SCHEMA_VERSION,
            name: "b".into(),
            config: "c.toml".into(),
            batch_dir: "out/b".into(),
            started_at: String::new(),
            finished_at: None,
            complete: true,
            interrupted: None,
            exit_code: 0,
            comparable: r.comparable,
            groups: r.groups.clone(),
            notes: r.notes.clone(),
            entries: r.entries.clone(),
        };
        let t = terminal_table(&report);
        assert!(t.starts_with("group  rank  entry"), "{t}");
        assert!(t.contains("50.00% [25.00, 50.00]"), "{t}");
        assert!(summary_markdown(&report).contains("| group | rank | entry |"));
    }

    #[test]
    fn exit_codes_follow_opt_at_k() {
        let ok = result("a", 1, EntryState::Complete, 1.0, 1.0);
        assert_eq!(exit_code(std::slice::from_ref(&ok), None), 0);
        assert_eq!(exit_code(std::slice::from_ref(&ok), Some("SIGINT")), 130);
        assert_eq!(exit_code(std::slice::from_ref(&ok), Some("SIGTERM")), 143);
        let mut err = result("b", 1, EntryState::Partial, 1.0, 1.0);
        err.exit_code = Some(1);
        let failed = result("c", 1, EntryState::Failed, 0.0, 0.0);
        let mut gated = ok.clone();
        gated.exit_code = Some(2);
        assert_eq!(exit_code(&[ok.clone(), err.clone()], None), 1);
        assert_eq!(exit_code(&[ok.clone(), failed], None), 1);
        assert_eq!(exit_code(&[gated.clone(), ok.clone()], None), 2);
        assert_eq!(exit_code(&[gated, err], None), 1);
    }
}
