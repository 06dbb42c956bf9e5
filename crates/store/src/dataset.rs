//! A dataset: a folder with one folder per task.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::task_folder::require_task_dir;
use harness_core::task::Task;

#[derive(Debug)]
pub struct Dataset {
    pub root: PathBuf,
    /// Valid tasks, by instance id (sorted).
    pub tasks: BTreeMap<String, Task>,
    /// Task folders that failed to load, with the reason (already naming the file).
    pub invalid: BTreeMap<String, String>,
}

impl Dataset {
    /// Loads every task folder under `root`. Folders whose name starts with `_` or `.` are
    /// not tasks (e.g. `tasks/_predictions`). A task that fails validation is kept aside in
    /// `invalid`, so one broken task does not hide the others; [`Dataset::select`] refuses
    /// to run it.
    pub fn load(root: &Path) -> Result<Dataset> {
        if !root.is_dir() {
            bail!("dataset {}: not a folder", root.display());
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(root)
            .with_context(|| format!("dataset {}: cannot list", root.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .filter(|p| {
                p.file_name()
                    .map(|n| {
                        let n = n.to_string_lossy();
                        !(n.starts_with('_') || n.starts_with('.'))
                    })
                    .unwrap_or(false)
            })
            .collect();
        entries.sort();
        let mut tasks = BTreeMap::new();
        let mut invalid = BTreeMap::new();
        for dir in entries {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match require_task_dir(&dir).and_then(|_| crate::task_folder::load_task(&dir)) {
                Ok(task) => {
                    tasks.insert(task.id.clone(), task);
                }
                Err(e) => {
                    invalid.insert(name, format!("{e:#}"));
                }
            }
        }
        if tasks.is_empty() && invalid.is_empty() {
            bail!(
                "dataset {}: no task folders (each needs a task.toml)",
                root.display()
            );
        }
        Ok(Dataset {
            root: root.to_path_buf(),
            tasks,
            invalid,
        })
    }

    /// The tasks a run covers: all of them, or the ids asked for. Unknown ids and invalid
    /// tasks among the selection are errors that name them; invalid tasks outside it are
    /// returned as warnings.
    pub fn select(&self, ids: &[String]) -> Result<(Vec<&Task>, Vec<String>)> {
        let mut problems = Vec::new();
        let mut warnings = Vec::new();
        let mut chosen = Vec::new();
        if ids.is_empty() {
            for (name, why) in &self.invalid {
                problems.push(format!("task {name}: {why}"));
            }
            chosen.extend(self.tasks.values());
        } else {
            let mut seen = std::collections::BTreeSet::new();
            for id in ids {
                if !seen.insert(id) {
                    continue;
                }
                if let Some(t) = self.tasks.get(id) {
                    chosen.push(t);
                } else if let Some(why) = self.invalid.get(id) {
                    problems.push(format!("task {id}: {why}"));
                } else {
                    problems.push(format!(
                        "--instance-ids: unknown instance id {id:?} (not a task folder under {})",
                        self.root.display()
                    ));
                }
            }
            for (name, why) in &self.invalid {
                if !ids.contains(name) {
                    warnings.push(format!(
                        "skipping invalid task outside the selection: {why}"
                    ));
                }
            }
            chosen.sort_by(|a, b| a.id.cmp(&b.id));
        }
        if !problems.is_empty() {
            bail!("{}", problems.join("\n"));
        }
        Ok((chosen, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_task(root: &Path, id: &str, toml: &str) {
        let d = root.join(id);
        std::fs::create_dir_all(d.join("repo")).unwrap();
        std::fs::write(d.join("human.patch"), "").unwrap();
        std::fs::write(d.join("task.toml"), toml).unwrap();
    }

    const OK: &str = "[source]\npath='repo'\n[human]\npatch='human.patch'\n[test]\ncommand='true'\n[[bench]]\nname='b'\ncommand='true'\n";

    #[test]
    fn broken_task_is_named_and_others_load() {
        let root = tempfile::tempdir().unwrap();
        write_task(root.path(), "good", OK);
        write_task(
            root.path(),
            "bad",
            &OK.replace("[test]\ncommand='true'\n", ""),
        );
        std::fs::create_dir_all(root.path().join("_predictions")).unwrap();
        let ds = Dataset::load(root.path()).unwrap();
        assert_eq!(ds.tasks.len(), 1);
        assert!(ds.invalid["bad"].contains("bad/task.toml"));
        // Selecting everything refuses to run with a broken task in it...
        let err = ds.select(&[]).unwrap_err().to_string();
        assert!(err.contains("missing field `test`"), "{err}");
        // ...selecting only the good one runs it, with a warning about the other.
        let (chosen, warnings) = ds.select(&["good".to_string()]).unwrap();
        assert_eq!(chosen.len(), 1);
        assert_eq!(warnings.len(), 1);
        let err = ds.select(&["nope".to_string()]).unwrap_err().to_string();
        assert!(err.contains("unknown instance id \"nope\""), "{err}");
    }

    #[test]
    fn folder_without_task_toml_is_named() {
        let root = tempfile::tempdir().unwrap();
        write_task(root.path(), "good", OK);
        std::fs::create_dir_all(root.path().join("typo")).unwrap();
        let ds = Dataset::load(root.path()).unwrap();
        assert!(ds.invalid["typo"].contains("no task.toml"));
    }
}
