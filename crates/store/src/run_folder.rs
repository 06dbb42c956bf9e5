//! What a run writes, per sample, and how it is read back: the results store.
//!
//! A sample is finished when its `report.json` exists; every write is a temp file + rename,
//! so a killed run leaves either the old file or the new one, never half of one, and none
//! goes through a link in the run folder ([`crate::confined`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::confined::Confined;
use harness_core::records::{MAX_K, RunInfo, SampleReport};
use harness_core::summary::{SavedSamples, Summary};
use harness_core::timings::BenchLog;

/// Paths and names inside `evaluation_results/<run_id>/`.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub root: PathBuf,
}

/// Every file name of a run folder, in one place: the run's own files, the reports (written
/// by `app::report`'s exporters under these names) and each sample's files.
pub mod names {
    pub const RUN_JSON: &str = "run.json";
    /// GSO's per-rollout run reports: `rollouts/<rollout>/<rollout>.<run_id>.report.json`.
    pub const ROLLOUTS_DIR: &str = "rollouts";
    /// GSO's own folder layout of the run, for GSO's tools (`cd gso` and they find it):
    /// `gso/logs/run_evaluation/<run_id>/<rollout>/<instance>/{patch.diff,test_output.txt,
    /// report.json}` and each rollout's predictions, `gso/predictions/<rollout>.jsonl`.
    pub const GSO_DIR: &str = "gso";
    pub const SUMMARY_MD: &str = "summary.md";
    pub const RESULTS_CSV: &str = "results.csv";
    pub const SUMMARY_JSON: &str = "summary.json";
    pub const JUNIT_XML: &str = "junit.xml";
    pub const REPORT_HTML: &str = "report.html";
    /// Image build logs: `images/<instance>.build.log`.
    pub const IMAGES_DIR: &str = "images";
    /// Base's and human's logs: `<model>/<instance>/reference/{base,human}/`.
    pub const REFERENCE_DIR: &str = "reference";
    pub const STATUS_TXT: &str = "status.txt";
    // A sample's folder, `<model>/<instance>/<sample>/`.
    pub const PATCH_DIFF: &str = "patch.diff";
    pub const APPLY_LOG: &str = "apply.log";
    pub const BUILD_LOG: &str = "build.log";
    pub const TEST_OUTPUT: &str = "test_output.txt";
    pub const BENCH_JSON: &str = "bench.json";
    pub const TELEMETRY_JSONL: &str = "telemetry.jsonl";
    pub const REPORT_JSON: &str = "report.json";

    /// The GSO-compatible run report: `<model>.<run_id>.report.json`.
    pub fn gso_report(model_slug: &str, run_id: &str) -> String {
        format!("{model_slug}.{run_id}.report.json")
    }

    /// The Opt@K report: `<model>.opt@<K>.<run_id>.report.json`.
    pub fn opt_at_k_report(model_slug: &str, k: usize, run_id: &str) -> String {
        format!("{model_slug}.opt@{k}.{run_id}.report.json")
    }
}

impl RunDir {
    pub fn new(results_root: &Path, run_id: &str) -> RunDir {
        RunDir {
            root: results_root.join(run_id),
        }
    }

    /// Every write into this run folder goes through here: the folder itself and nothing
    /// in it is ever a link followed (a link is refused, named).
    pub fn store(&self) -> Confined {
        Confined::folder(&self.root)
    }

    pub fn run_json(&self) -> PathBuf {
        self.root.join(names::RUN_JSON)
    }

    pub fn model_dir(&self, model: &str) -> PathBuf {
        let dir = self.root.join(model_slug(model));
        // Run folders of earlier builds named a model with `/` by its sanitised name and a
        // hash: their samples are found (and resumed) where they are.
        let legacy = self.root.join(legacy_model_slug(model));
        if !dir.exists() && legacy.is_dir() {
            return legacy;
        }
        dir
    }

    pub fn sample_dir(&self, model: &str, instance_id: &str, sample: usize) -> PathBuf {
        self.model_dir(model)
            .join(instance_id)
            .join(sample.to_string())
    }

    pub fn load_sample(
        &self,
        model: &str,
        instance_id: &str,
        sample: usize,
    ) -> Option<SampleReport> {
        let path = self
            .sample_dir(model, instance_id, sample)
            .join(names::REPORT_JSON);
        let text = read_regular(&path).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// The most a file the harness reads back from a run folder (run.json, a report.json, a
/// bench.json) may hold: far above what a run writes.
pub const MAX_READ_BYTES: u64 = 256 << 20;

/// The text of a run folder's file, if it is a regular file of at most [`MAX_READ_BYTES`]:
/// a FIFO (whose read would wait forever) or a sparse file of any size is refused before
/// it is opened.
pub fn read_regular(path: &Path) -> Result<String> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
    if !meta.is_file() {
        anyhow::bail!("{}: not a regular file", path.display());
    }
    if meta.len() > MAX_READ_BYTES {
        anyhow::bail!(
            "{}: {} bytes, more than the {} MiB the harness reads of a run's file",
            path.display(),
            meta.len(),
            MAX_READ_BYTES >> 20
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))
}

/// Model names become folder and file names: keep letters, digits, `.`, `_`, `-`.
pub fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() { "model".into() } else { s }
}

/// A model's folder and file-name part: GSO's (`/` as `__`, its `model_name_or_path`
/// folders) when that is tame and maps back to one name only, else the sanitised name
/// plus a short hash of the original, so `a/b`, `a__b` and `a_b` never share results.
pub fn model_slug(model: &str) -> String {
    let gso = model.replace('/', "__");
    // Only `/` becomes `__`, and no `_` stands beside a `/` or beside another `_`: every
    // run of two or more underscores then came from slashes, and the slug names one model.
    let one_to_one = !model.contains("__") && !model.contains("/_") && !model.contains("_/");
    if one_to_one && sanitize(&gso) == gso {
        gso
    } else {
        let clean = sanitize(model);
        let h = harness_core::digest::sha256_hex(model.as_bytes());
        format!("{clean}-{}", &h[..8])
    }
}

/// The model folder name of builds before GSO's names: the sanitised name, plus a short
/// hash of the original when that changed it.
pub fn legacy_model_slug(model: &str) -> String {
    let clean = sanitize(model);
    if clean == model {
        clean
    } else {
        let h = harness_core::digest::sha256_hex(model.as_bytes());
        format!("{clean}-{}", &h[..8])
    }
}

/// Writes a file whole or not at all (a temp file in the same folder, then rename), for a
/// file the user named (`--out`, `--junit`): the folders on its way are the user's and may
/// be links; the file itself may not. What goes into a run or results folder is written
/// through [`RunDir::store`] or [`Confined`] instead: no link under it is followed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        Some(_) => Path::new("."),
        None => anyhow::bail!("{}: no parent folder", path.display()),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{}: names no file", path.display()))?;
    Confined::beneath(dir).write_atomic(&dir.join(name), bytes)
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value).context("cannot serialise")?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

impl RunDir {
    pub fn load_run_info(&self) -> Result<RunInfo> {
        let path = self.run_json();
        let text =
            read_regular(&path).map_err(|e| anyhow::anyhow!("{e:#} (is this a run folder?)"))?;
        let info: RunInfo = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a run.json this harness can read", path.display()))?;
        // Readers loop over K (an old run.json lists no samples): a K no run can have is
        // refused here, not allocated.
        if info.k == 0 || info.k > MAX_K {
            anyhow::bail!(
                "{}: k = {} is not a K this harness runs (1 to {MAX_K})",
                path.display(),
                info.k
            );
        }
        Ok(info)
    }
}

/// Reads a run folder and computes everything the reports show.
pub fn summarise(run: &RunDir) -> Result<Summary> {
    let info = run.load_run_info()?;
    Ok(harness_core::summary::summarise(info, run))
}

impl SavedSamples for RunDir {
    fn sample(&self, model: &str, instance_id: &str, sample: usize) -> Option<SampleReport> {
        self.load_sample(model, instance_id, sample)
    }

    fn bench_log(&self, model: &str, s: &SampleReport) -> Option<(BenchLog, String)> {
        sample_bench_log(self, model, s)
    }
}

/// A sample's saved bench.json and the variant that stands for it there (its own, or the
/// one whose runs it shares), when the log holds that variant.
pub fn sample_bench_log(run: &RunDir, model: &str, s: &SampleReport) -> Option<(BenchLog, String)> {
    let path = run
        .sample_dir(model, &s.instance_id, s.sample)
        .join(names::BENCH_JSON);
    let log: BenchLog = read_regular(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())?;
    let label = log
        .sample_variant
        .clone()
        .unwrap_or_else(|| format!("s{}", s.sample));
    log.covers(&label).then_some((log, label))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitized_names() {
        assert_eq!(sanitize("org/model v2"), "org_model_v2");
        assert_eq!(sanitize("demo-agent"), "demo-agent");
        assert_eq!(sanitize("../x"), "_x");
        assert_eq!(sanitize(""), "model");
        assert_eq!(model_slug("demo-agent"), "demo-agent");
        assert_ne!(model_slug("a/b"), model_slug("a_b"));
        // GSO's folder name (`/` as `__`) where it names one model only.
        assert_eq!(model_slug("org/model-v2"), "org__model-v2");
        assert_eq!(model_slug("a/b"), "a__b");
        assert!(model_slug("a__b").starts_with("a__b-"));
        assert_ne!(model_slug("a/_b"), model_slug("a_/b"));
        assert!(model_slug("a/_b").starts_with("a__b-"));
        assert!(model_slug("org/model v2").starts_with("org_model_v2-"));
        // A run folder an earlier build wrote (`org_model-<hash>`) is still found.
        let d = tempfile::tempdir().unwrap();
        let run = RunDir {
            root: d.path().to_path_buf(),
        };
        assert_eq!(run.model_dir("org/model"), d.path().join("org__model"));
        std::fs::create_dir(d.path().join(legacy_model_slug("org/model"))).unwrap();
        assert_eq!(
            run.model_dir("org/model"),
            d.path().join(legacy_model_slug("org/model"))
        );
    }

    /// A FIFO (whose read would wait forever) or a sparse file of any size is refused
    /// before it is opened.
    #[test]
    fn only_regular_files_of_a_sane_size_are_read_back() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("report.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let e = read_regular(&fifo).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let huge = d.path().join("bench.json");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let e = read_regular(&huge).unwrap_err().to_string();
        assert!(
            e.contains("1099511627776 bytes, more than the 256 MiB"),
            "{e}"
        );
        std::fs::write(d.path().join("ok.json"), "{}").unwrap();
        assert_eq!(read_regular(&d.path().join("ok.json")).unwrap(), "{}");
    }

    #[test]
    fn atomic_write_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(std::fs::read_dir(d.path().join("a")).unwrap().count(), 1);
        // A file the user named that is a link is refused, not written through or replaced.
        std::fs::write(d.path().join("target"), "kept").unwrap();
        std::os::unix::fs::symlink(d.path().join("target"), d.path().join("a/link")).unwrap();
        let e = format!(
            "{:#}",
            write_atomic(&d.path().join("a/link"), b"x").unwrap_err()
        );
        assert!(e.contains("a/link: is a symbolic link"), "{e}");
        assert_eq!(
            std::fs::read_to_string(d.path().join("target")).unwrap(),
            "kept"
        );
    }
}
