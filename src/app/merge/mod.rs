//! `harness merge`: the folders of `opt-at-k --partition I/N` runs put back together into
//! the run folder one whole run would have written. Needs no Docker: it copies the saved
//! samples, writes run.json and regenerates every report from them.
//!
//! It refuses anything that would make the merged numbers claim more than was measured:
//! parts of different runs (model, K, dataset, predictions, rule, settings), parts measured
//! on different kinds of machine, a part missing or given twice, an instance in two parts.
//! And, a part being another machine's output, anything that would lead it outside the
//! folders it was given or past what it can hold: an instance id that is no task id, a
//! symlink, FIFO, socket or device where it reads, a file larger than a run writes (`files`).

mod files;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::app::export;
use crate::core::fingerprint::Fingerprint;
use crate::core::records::{MergedPart, RunInfo};
use crate::core::summary::Summary;
use crate::store::run_folder::{RunDir, sanitize};

/// What a merge wrote.
pub struct Merged {
    pub run: RunDir,
    pub summary: Summary,
    pub report_files: Vec<PathBuf>,
}

/// A partition run as found on disk.
struct Part {
    dir: PathBuf,
    info: RunInfo,
}

impl Part {
    fn name(&self) -> String {
        match &self.info.partition {
            Some(p) => format!("{} (partition {}/{})", self.dir.display(), p.index, p.count),
            None => self.dir.display().to_string(),
        }
    }
}

/// The machine as far as measurements go: GPU UUIDs name the devices, not what they are, so
/// two identical CI runners (same CPU, memory, kernel, engine, harness build, GPU models and
/// driver) count as the same machine.
fn machine_class(f: &Fingerprint) -> Fingerprint {
    Fingerprint {
        gpu_uuids: Vec::new(),
        ..f.clone()
    }
}

/// Fields of two fingerprints that differ, as "field: a vs b".
fn fingerprint_differences(a: &Fingerprint, b: &Fingerprint) -> Vec<String> {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) = (
        serde_json::to_value(machine_class(a)),
        serde_json::to_value(machine_class(b)),
    ) else {
        return vec!["(fingerprints not comparable)".into()];
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let show = |v: Option<&serde_json::Value>| {
                v.map_or_else(|| "absent".to_string(), |v| v.to_string())
            };
            format!("{k}: {} vs {}", show(a.get(k)), show(b.get(k)))
        })
        .collect()
}

fn load_part(dir: &Path) -> Result<Part> {
    let run_json = dir.join(crate::store::run_folder::names::RUN_JSON);
    files::check_entry(&run_json)?;
    let info = RunDir {
        root: dir.to_path_buf(),
    }
    .load_run_info()
    .with_context(|| format!("{}: not a run folder", dir.display()))?;
    check_ids(&run_json, &info)?;
    if info.partition.is_none() {
        bail!(
            "{}: not a partition run (its run.json has no `partition`; it is {}); merge takes \
             the folders of `harness opt-at-k --partition I/N` runs",
            dir.display(),
            if info.merged_from.is_empty() {
                "a whole run"
            } else {
                "a merged run"
            }
        );
    }
    let part = Part {
        dir: dir.to_path_buf(),
        info,
    };
    let model_dir = RunDir {
        root: part.dir.clone(),
    }
    .model_dir(&part.info.model);
    files::check_part_files(&part.dir, &model_dir, IMAGES, &part.info.instance_ids)?;
    Ok(part)
}

/// Refuses a part whose run.json names an instance by anything but a task id (the rule
/// tasks use: letters, digits, '-', '_', '.', not starting with '.' or '-'): the merge
/// joins these ids onto paths, and `../../x`, `a/b`, `/x` or `` would lead out of the
/// folders it reads and writes.
fn check_ids(run_json: &Path, info: &RunInfo) -> Result<()> {
    let selected = info
        .partition
        .iter()
        .flat_map(|p| p.selected_instance_ids.iter());
    let expected = info.samples.iter().flat_map(|s| s.keys());
    for id in info.instance_ids.iter().chain(selected).chain(expected) {
        if let Err(why) = crate::core::task::validate_instance_id(id) {
            bail!(
                "{}: instance id {}: not a task id ({}); refusing to merge this part",
                run_json.display(),
                crate::core::text::for_terminal(&format!("{id:?}")),
                crate::core::text::for_terminal(&why)
            );
        }
    }
    Ok(())
}

const IMAGES: &str = crate::store::run_folder::names::IMAGES_DIR;

/// Refuses parts that are not parts of one and the same run.
fn check_same_run(parts: &[Part]) -> Result<()> {
    let first = &parts[0];
    let Some(fp) = &first.info.partition else {
        bail!("{}: not a partition run", first.dir.display());
    };
    for other in &parts[1..] {
        let Some(op) = &other.info.partition else {
            bail!("{}: not a partition run", other.dir.display());
        };
        let differ = |what: &str, a: String, b: String| -> Result<()> {
            if a != b {
                bail!(
                    "{} and {} are not parts of one run: they differ in {what} ({a} vs {b})",
                    first.name(),
                    other.name()
                );
            }
            Ok(())
        };
        let (a, b) = (&first.info, &other.info);
        differ(
            "the number of partitions",
            fp.count.to_string(),
            op.count.to_string(),
        )?;
        differ("model", format!("{:?}", a.model), format!("{:?}", b.model))?;
        differ("K", a.k.to_string(), b.k.to_string())?;
        differ(
            "run.json schema version",
            a.schema_version.to_string(),
            b.schema_version.to_string(),
        )?;
        differ(
            "the selected instances",
            fp.selected_instance_ids.join(","),
            op.selected_instance_ids.join(","),
        )?;
        differ(
            "dataset digest (the selected tasks' files)",
            fp.selection_digest.clone(),
            op.selection_digest.clone(),
        )?;
        let shas = |i: &RunInfo| {
            i.predictions
                .iter()
                .map(|p| p.sha256.clone())
                .collect::<Vec<_>>()
                .join(",")
        };
        differ("predictions digests", shas(a), shas(b))?;
        differ(
            "decision rule",
            format!("{:?}", a.decision_rule),
            format!("{:?}", b.decision_rule),
        )?;
        let settings = |i: &RunInfo| serde_json::to_string(&i.settings).unwrap_or_default();
        differ("settings", settings(a), settings(b))?;
        let machine = fingerprint_differences(&a.fingerprint, &b.fingerprint);
        if !machine.is_empty() {
            bail!(
                "{} and {} were measured on different machines or harness builds (fingerprints \
                 {} and {}: {}); their speedups are not comparable, so they do not merge",
                first.name(),
                other.name(),
                a.fingerprint_id,
                b.fingerprint_id,
                machine.join("; ")
            );
        }
    }
    Ok(())
}

/// Refuses a part given twice, a part missing, or an instance in two parts.
fn check_coverage(parts: &[Part]) -> Result<()> {
    let mut by_index: BTreeMap<usize, &Part> = BTreeMap::new();
    let mut owner: BTreeMap<&str, &Part> = BTreeMap::new();
    let mut count = 0;
    let mut selected: Vec<String> = Vec::new();
    for part in parts {
        let Some(p) = &part.info.partition else {
            bail!("{}: not a partition run", part.dir.display());
        };
        count = p.count;
        selected = p.selected_instance_ids.clone();
        if let Some(seen) = by_index.insert(p.index, part) {
            bail!(
                "partition {}/{} is given twice: {} and {}",
                p.index,
                p.count,
                seen.dir.display(),
                part.dir.display()
            );
        }
        for id in &part.info.instance_ids {
            if let Some(seen) = owner.insert(id, part) {
                bail!(
                    "overlapping partitions: instance {id} is in both {} and {}",
                    seen.name(),
                    part.name()
                );
            }
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        bail!(
            "missing partition(s) {} (given: {}); merge all {count} parts of the run",
            missing.join(", "),
            parts.iter().map(Part::name).collect::<Vec<_>>().join(", ")
        );
    }
    let wanted: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    let have: BTreeSet<&str> = owner.keys().copied().collect();
    if wanted != have {
        let absent: Vec<&str> = wanted.difference(&have).copied().collect();
        let extra: Vec<&str> = have.difference(&wanted).copied().collect();
        bail!(
            "the parts' instances are not the run's selection: {}{}{} (folders: {})",
            if absent.is_empty() {
                String::new()
            } else {
                format!("in no part: {}", absent.join(", "))
            },
            if absent.is_empty() || extra.is_empty() {
                ""
            } else {
                "; "
            },
            if extra.is_empty() {
                String::new()
            } else {
                format!("not selected: {}", extra.join(", "))
            },
            parts.iter().map(Part::name).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}

/// Refuses a part whose own samples were measured on another machine than its run.json says
/// (a part resumed elsewhere): the merged run could not say where they were measured.
fn check_parts_unmixed(parts: &[Part]) -> Result<()> {
    for part in parts {
        let summary = crate::store::run_folder::summarise(&RunDir {
            root: part.dir.clone(),
        })
        .with_context(|| format!("{}: cannot read its results", part.dir.display()))?;
        let mixed = crate::core::summary::mixed_fingerprints(&summary);
        if !mixed.is_empty() {
            bail!(
                "{}: {} sample(s) were measured on another machine or harness build than its \
                 run.json's ({}): {}; rerun that partition on one machine before merging",
                part.name(),
                mixed.len(),
                part.info.fingerprint_id,
                mixed.join(", ")
            );
        }
    }
    Ok(())
}

/// run.json of the merged run: what a single run over the whole selection would have
/// written, plus where it came from.
fn merged_info(parts: &[Part], run_id: &str, command: Vec<String>) -> Result<RunInfo> {
    let first = &parts[0].info;
    let Some(fp) = &first.partition else {
        bail!("{}: not a partition run", parts[0].dir.display());
    };
    let selected = fp.selected_instance_ids.clone();
    // The single run's dataset digest: its tasks' digests in selection order.
    let mut task_digests: BTreeMap<&str, &str> = BTreeMap::new();
    for part in parts {
        for d in part
            .info
            .partition
            .iter()
            .flat_map(|p| p.task_digests.iter())
        {
            let id = d.split_once('=').map_or(d.as_str(), |(id, _)| id);
            task_digests.insert(id, d);
        }
    }
    let mut digests = Vec::new();
    for id in &selected {
        match task_digests.get(id.as_str()) {
            Some(d) => digests.push(d.to_string()),
            None => bail!(
                "instance {id}: no task digest in the `partition` of its part's run.json; \
                 was that run.json edited?"
            ),
        }
    }
    let mut samples = BTreeMap::new();
    for part in parts {
        if let Some(s) = &part.info.samples {
            samples.extend(s.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut warnings: Vec<String> = Vec::new();
    for part in parts {
        for w in &part.info.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    let mut regradings: Vec<crate::app::report::regrade::Regrading> = Vec::new();
    for part in parts {
        for r in &part.info.regradings {
            if !regradings.contains(r) {
                regradings.push(r.clone());
            }
        }
    }
    regradings.sort_by(|a, b| a.at.cmp(&b.at));
    // RFC 3339 in UTC to the second, as runs write it: text order is time order.
    let started_at = parts
        .iter()
        .map(|p| p.info.started_at.clone())
        .min()
        .unwrap_or_default();
    let finished_at = parts
        .iter()
        .map(|p| p.info.finished_at.clone())
        .collect::<Option<Vec<String>>>()
        .and_then(|f| f.into_iter().max());
    Ok(RunInfo {
        schema_version: first.schema_version,
        run_id: run_id.to_string(),
        model: first.model.clone(),
        k: first.k,
        command,
        dataset: first.dataset.clone(),
        dataset_digest: hex::encode(Sha256::digest(digests.join("\n").as_bytes())),
        instance_ids: selected,
        dataset_instance_ids: first.dataset_instance_ids.clone(),
        predictions: first.predictions.clone(),
        settings: first.settings,
        decision_rule: first.decision_rule,
        jobs: first.jobs,
        cpu_plan: first.cpu_plan.clone(),
        fingerprint: first.fingerprint.clone(),
        fingerprint_id: first.fingerprint_id.clone(),
        harness_version: first.harness_version.clone(),
        started_at,
        finished_at,
        warnings,
        samples: Some(samples),
        interrupted: parts.iter().find_map(|p| p.info.interrupted.clone()),
        regradings,
        partition: None,
        hacked: first.hacked.clone(),
        merged_from: parts
            .iter()
            .map(|p| MergedPart {
                dir: p.dir.display().to_string(),
                run_id: p.info.run_id.clone(),
                index: p.info.partition.as_ref().map_or(0, |x| x.index),
                count: p.info.partition.as_ref().map_or(0, |x| x.count),
                instance_ids: p.info.instance_ids.clone(),
                fingerprint_id: p.info.fingerprint_id.clone(),
                command: p.info.command.clone(),
                started_at: p.info.started_at.clone(),
                finished_at: p.info.finished_at.clone(),
            })
            .collect(),
    })
}

/// What `--out` may be: absent, an empty folder, or an earlier merge of the same run (which
/// is replaced). `Ok(true)` when something is there to replace.
fn check_out(out: &Path, merged: &RunInfo, parts: &[Part]) -> Result<bool> {
    if !out.exists() {
        return Ok(false);
    }
    if !out.is_dir() {
        bail!("--out {}: exists and is not a folder", out.display());
    }
    let canon_out = out.canonicalize().ok();
    for p in parts {
        if p.dir.canonicalize().ok() == canon_out {
            bail!(
                "--out {}: is one of the partition folders being merged",
                out.display()
            );
        }
    }
    let mut entries =
        std::fs::read_dir(out).with_context(|| format!("--out {}: cannot list", out.display()))?;
    if entries.next().is_none() {
        return Ok(true);
    }
    let existing = RunDir {
        root: out.to_path_buf(),
    };
    let Ok(old) = existing.load_run_info() else {
        bail!(
            "--out {}: not empty and not a run folder; give an empty or new folder",
            out.display()
        );
    };
    let same = !old.merged_from.is_empty()
        && old.run_id == merged.run_id
        && old.model == merged.model
        && old.k == merged.k
        && old.instance_ids == merged.instance_ids
        && old.dataset_digest == merged.dataset_digest
        && old
            .predictions
            .iter()
            .map(|p| &p.sha256)
            .collect::<Vec<_>>()
            == merged
                .predictions
                .iter()
                .map(|p| &p.sha256)
                .collect::<Vec<_>>()
        && old.fingerprint_id == merged.fingerprint_id;
    if !same {
        bail!(
            "--out {}: already holds a different run ({}model {:?}, K {}, {} instance(s)); \
             give another folder or remove it",
            out.display(),
            if old.merged_from.is_empty() {
                "not a merge: "
            } else {
                ""
            },
            old.model,
            old.k,
            old.instance_ids.len()
        );
    }
    Ok(true)
}

/// Merges the partition runs in `dirs` into `out`. The merged folder is made next to
/// `out` and renamed into place, so `out` never holds half a merge.
/// `harness merge`: the parts put together into `out`, its reports, the CI outputs.
pub fn command(
    run_dirs: &[PathBuf],
    out: &Path,
    json: bool,
    verbosity: crate::core::events::Verbosity,
    ci: &crate::app::ci::CiOptions,
) -> Result<i32> {
    let parts = super::fanout::partition_folders(run_dirs)?;
    // `--fail-under` is checked against K before anything is written (the merge checks
    // that every part has the first one's K).
    let first_k = parts
        .first()
        .and_then(|d| RunDir { root: d.clone() }.load_run_info().ok().map(|i| i.k));
    let gates = ci.gates(first_k.unwrap_or(usize::MAX))?;
    let merged = merge(&parts, out, std::env::args().collect())?;
    let summary = &merged.summary;
    crate::app::ci::check_k(&gates, summary.info.k)?;
    let judged = ci.write_outputs(&gates, summary)?;
    if !summary.totals.complete {
        eprintln!(
            "warning: the merged run is incomplete (a partition was interrupted or has samples \
             not run): {}",
            summary.totals.not_run_ids.join(", ")
        );
    }
    if json {
        let json = crate::app::ci::json_output(summary, &judged, ci, None)?;
        crate::outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        use crate::core::events::Verbosity;
        let verbose = verbosity == Verbosity::Verbose;
        crate::out!("{}", export::run_ending(summary, out, verbose));
        for f in merged
            .report_files
            .iter()
            .filter(|_| verbosity != Verbosity::Quiet)
        {
            crate::outln!("wrote {}", f.display());
        }
    }
    eprint!("{}", crate::app::ci::describe(&judged));
    Ok(crate::app::ci::exit_code(&judged))
}

pub fn merge(dirs: &[PathBuf], out: &Path, command: Vec<String>) -> Result<Merged> {
    if dirs.is_empty() {
        bail!("merge: give the partition run folders");
    }
    let run_id = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if run_id.is_empty() || sanitize(&run_id) != run_id {
        bail!(
            "--out {}: the folder's name is the merged run's id; use only letters, digits, '.', '_' and '-'",
            out.display()
        );
    }
    let mut parts = dirs
        .iter()
        .map(|d| load_part(d))
        .collect::<Result<Vec<Part>>>()?;
    parts.sort_by_key(|p| p.info.partition.as_ref().map_or(0, |x| x.index));
    check_same_run(&parts)?;
    check_coverage(&parts)?;
    check_parts_unmixed(&parts)?;
    let info = merged_info(&parts, &run_id, command)?;
    let replace = check_out(out, &info, &parts)?;

    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("{}: cannot create", parent.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".harness-merge-")
        .tempdir_in(&parent)
        .with_context(|| format!("{}: cannot make a temporary folder", parent.display()))?;
    let staged = RunDir {
        root: staging.path().to_path_buf(),
    };
    for part in &parts {
        let from = RunDir {
            root: part.dir.clone(),
        };
        for id in &part.info.instance_ids {
            let src = from.model_dir(&part.info.model).join(id);
            if std::fs::symlink_metadata(&src).is_ok_and(|m| m.is_dir()) {
                files::copy_tree(&src, &staged.model_dir(&info.model).join(id))?;
            }
            let log = Path::new(IMAGES).join(format!("{id}.build.log"));
            if part.dir.join(&log).is_file() {
                staged.store().create_dir_all(&staged.root.join(IMAGES))?;
                files::copy_file(&part.dir.join(&log), &staged.root.join(&log))?;
            }
        }
    }
    staged.store().write_json(&staged.run_json(), &info)?;
    let summary = crate::store::run_folder::summarise(&staged)
        .with_context(|| format!("{}: cannot summarise the merged run", out.display()))?;
    let mixed = crate::core::summary::mixed_fingerprints(&summary);
    if !mixed.is_empty() {
        bail!("the merged run would mix machines: {}", mixed.join(", "));
    }
    export::write_all(&staged, &summary)?;

    // The temporary folder is private (0700); a run folder is for sharing.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("{}: cannot set permissions", staging.path().display()))?;
    let staged_path = staging.keep();
    let swap = || -> Result<()> {
        if replace {
            let trash = parent.join(format!(
                ".harness-merge-old-{}-{}",
                run_id,
                std::process::id()
            ));
            std::fs::rename(out, &trash)
                .with_context(|| format!("--out {}: cannot move aside", out.display()))?;
            if let Err(e) = std::fs::rename(&staged_path, out) {
                let _ = std::fs::rename(&trash, out);
                return Err(e).with_context(|| {
                    format!(
                        "--out {}: cannot move the merged run into place",
                        out.display()
                    )
                });
            }
            std::fs::remove_dir_all(&trash)
                .with_context(|| format!("{}: cannot remove the old merge", trash.display()))?;
        } else {
            std::fs::rename(&staged_path, out).with_context(|| {
                format!(
                    "--out {}: cannot move the merged run into place",
                    out.display()
                )
            })?;
        }
        Ok(())
    };
    if let Err(e) = swap() {
        let _ = std::fs::remove_dir_all(&staged_path);
        return Err(e);
    }
    let run = RunDir {
        root: out.to_path_buf(),
    };
    let report_files = export::report_paths(&run, &summary)?;
    Ok(Merged {
        run,
        summary,
        report_files,
    })
}
