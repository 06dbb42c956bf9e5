//! Predictions: JSONL or JSON files of agent patches, one row per (instance, sample).
//!
//! Reading is bounded: JSONL goes line by line (a line above [`MAX_LINE_BYTES`] is skipped
//! without ever being held whole) and a patch above `max_patch_bytes` is kept only as its
//! size and hash. Input that cannot be read unambiguously (the same sample twice, mixed
//! `sample` declarations, a file that cannot be read) is collected over all files and
//! returned as one error; anything else is a warning naming file and line, and the rest
//! still counts.

mod file;
use file::{Declared, Entry, FileRows, FileScan, and_list, places};
mod json;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::PathBuf;

use harness_core::digest::sha256_hex;

/// A JSONL line longer than this is skipped (read and discarded in chunks).
pub const MAX_LINE_BYTES: usize = 256 << 20;

/// A line buffer grown above this by one long line is given back before the next line.
const KEEP_BUFFER_BYTES: usize = 16 << 20;

/// How many lines a warning lists before "and N more".
const SHOWN_PLACES: usize = 20;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The submitted patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchBody {
    /// `null` or `""`.
    Empty,
    Text(String),
    /// Longer than `max_patch_bytes`: the text was dropped once measured and hashed.
    TooLarge {
        bytes: usize,
        sha256: String,
    },
}

/// One submitted patch, with the sample index it was resolved to.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub instance_id: String,
    /// As submitted ("" when absent).
    pub model_name_or_path: String,
    pub body: PatchBody,
    pub sample: usize,
    /// "file:line" (JSONL), "file:[i]", "file:{id}" or "file:{id}[j]" (JSON).
    pub origin: String,
    /// What the agent spent making it (`agent_usage`, `agent_seconds`).
    pub agent: Option<harness_core::spend::AgentSpend>,
}

impl Prediction {
    /// The patch text; "" unless the body is [`PatchBody::Text`].
    pub fn patch_text(&self) -> &str {
        match &self.body {
            PatchBody::Text(t) => t,
            PatchBody::Empty | PatchBody::TooLarge { .. } => "",
        }
    }

    /// SHA-256 (hex) of the full patch text, also for a patch too large to keep.
    pub fn patch_sha256(&self) -> String {
        match &self.body {
            PatchBody::TooLarge { sha256, .. } => sha256.clone(),
            PatchBody::Empty | PatchBody::Text(_) => sha256_hex(self.patch_text().as_bytes()),
        }
    }
}

#[derive(Debug, Default)]
pub struct Predictions {
    /// Instance id -> sample index -> row; gaps allowed.
    pub by_instance: BTreeMap<String, BTreeMap<usize, Prediction>>,
    /// Problems that did not stop loading; each names file and line.
    pub warnings: Vec<String>,
}

impl Predictions {
    /// How many predictions there are, over all instances and samples.
    pub fn total(&self) -> usize {
        self.by_instance.values().map(BTreeMap::len).sum()
    }
}

#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `--model`: rows naming another `model_name_or_path` are not used.
    pub model: String,
    pub max_patch_bytes: usize,
    /// `--rollout-per-file`: each file is one rollout of `model` whatever the
    /// `model_name_or_path` its rows give (GSO's `...-run_1`, `...-run_2`); within a file,
    /// rows naming another model than its first named row are still not used.
    pub rollout_per_file: bool,
}

/// Loads the predictions of `opts.model`. With several files, file i holds sample i; with
/// one, each instance's rows give their own `sample` on every row, or on none (file order).
///
/// Err: input that cannot be read unambiguously (a file that cannot be read, duplicates,
/// mixed sample declarations); the message lists every such problem of every file, each
/// with file:line, one a line.
pub fn load(paths: &[PathBuf], opts: &LoadOptions) -> anyhow::Result<Predictions> {
    load_bounded(paths, opts, MAX_LINE_BYTES)
}

fn load_bounded(
    paths: &[PathBuf],
    opts: &LoadOptions,
    max_line: usize,
) -> anyhow::Result<Predictions> {
    let mut warnings = Vec::new();
    let mut problems = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        let mut scan = FileScan::new(path, opts);
        if let Err(problem) = scan.read(path, max_line) {
            problems.push(problem);
        }
        warnings.extend(scan.finish());
        files.push(scan.rows);
    }
    let (by_instance, used) = assign_samples(&files, &mut warnings, &mut problems);
    for (fi, f) in files.iter().enumerate() {
        if used[fi] == 0 && f.readable {
            let note = if files.len() > 1 {
                format!(" (sample {fi} of every instance is missing)")
            } else {
                String::new()
            };
            warnings.push(format!(
                "{}: no usable prediction for --model {:?}{note}",
                f.file, opts.model
            ));
        }
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "the predictions cannot be read unambiguously ({} problem(s)):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
    Ok(Predictions {
        by_instance,
        warnings,
    })
}

// ---------------------------------------------------------------------------------------
// Sample indices

/// Resolves every row's sample index; also returns how many predictions each file gave.
fn assign_samples(
    files: &[FileRows],
    warnings: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> (BTreeMap<String, BTreeMap<usize, Prediction>>, Vec<usize>) {
    let mut out: BTreeMap<String, BTreeMap<usize, Prediction>> = BTreeMap::new();
    let mut used = vec![0usize; files.len()];
    let mut put = |fi: usize, e: &Entry, sample: usize| {
        if let Some((model, body)) = &e.prediction {
            used[fi] += 1;
            out.entry(e.instance_id.clone()).or_default().insert(
                sample,
                Prediction {
                    instance_id: e.instance_id.clone(),
                    model_name_or_path: model.clone(),
                    body: body.clone(),
                    sample,
                    origin: e.origin.clone(),
                    agent: e.agent.clone(),
                },
            );
        }
    };
    let several = files.len() > 1;
    for (fi, f) in files.iter().enumerate() {
        let mut by_id: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
        for e in &f.entries {
            by_id.entry(&e.instance_id).or_default().push(e);
        }
        if several {
            let mut other_index = Vec::new();
            for (id, rows) in &by_id {
                if let [e] = rows.as_slice() {
                    if matches!(e.declared, Declared::Index(n) if n != fi) {
                        other_index.push(e.loc.clone());
                    }
                    put(fi, e, fi);
                } else {
                    let origins: Vec<&str> = rows.iter().map(|e| e.origin.as_str()).collect();
                    problems.push(format!(
                        "{}: instance {id:?} has {} rows in one file; with several \
                         --predictions files, each file holds one sample per instance (this \
                         one sample {fi})",
                        and_list(&origins),
                        rows.len()
                    ));
                }
            }
            if !other_index.is_empty() {
                warnings.push(format!(
                    "{}: {} row(s) ({}) give a \"sample\" other than {fi}; with several \
                     --predictions files, file order gives the index: they are sample {fi}",
                    f.file,
                    other_index.len(),
                    places(f.json, &other_index)
                ));
            }
            continue;
        }
        for (id, rows) in &by_id {
            let (with, without): (Vec<&Entry>, Vec<&Entry>) =
                rows.iter().partition(|e| e.declared != Declared::No);
            if !with.is_empty() && !without.is_empty() {
                let locs = |v: &[&Entry]| v.iter().map(|e| e.loc.clone()).collect::<Vec<_>>();
                problems.push(format!(
                    "{}: instance {id:?} gives \"sample\" on {} but not on {}; give it on \
                     every row of an instance or on none",
                    f.file,
                    places(f.json, &locs(&with)),
                    places(f.json, &locs(&without))
                ));
                continue;
            }
            let mut at: BTreeMap<usize, Vec<&Entry>> = BTreeMap::new();
            for (position, e) in rows.iter().enumerate() {
                let sample = match e.declared {
                    Declared::No => position,
                    Declared::Index(n) => n,
                    Declared::Invalid => continue,
                };
                at.entry(sample).or_default().push(e);
            }
            for (sample, rows) in at {
                if let [e] = rows.as_slice() {
                    put(fi, e, sample);
                } else {
                    let origins: Vec<&str> = rows.iter().map(|e| e.origin.as_str()).collect();
                    let times = match rows.len() {
                        2 => "twice".to_string(),
                        n => format!("{n} times"),
                    };
                    problems.push(format!(
                        "{}: instance {id:?} sample {sample} given {times}",
                        and_list(&origins)
                    ));
                }
            }
        }
    }
    (out, used)
}
