//! A task's folder on disk: its task.toml read (never through a link) and every path it
//! names kept inside the folder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use harness_core::task::{PathKind, Task, TaskFolder};

/// Set once by the command line (`--allow-outside-task-paths`): task files may name paths
/// outside their folder (a dataset the user wrote, sharing files between tasks).
static OUTSIDE_ALLOWED: AtomicBool = AtomicBool::new(false);

pub fn allow_outside_paths(allowed: bool) {
    OUTSIDE_ALLOWED.store(allowed, Ordering::Relaxed);
}

/// The most a task.toml may hold: it is read whole (a sparse file of any size costs its
/// author nothing).
pub const MAX_TASK_TOML_BYTES: u64 = 16 << 20;

/// Loads and validates `<dir>/task.toml`.
pub fn load_task(dir: &Path) -> Result<Task> {
    let toml_path = dir.join("task.toml");
    // The file itself, never a link: its text is quoted in parse errors.
    let meta = std::fs::symlink_metadata(&toml_path)
        .with_context(|| format!("{}: cannot read", toml_path.display()))?;
    if !meta.is_file() {
        bail!(
            "{}: not a regular file (a task.toml that is a link is not read)",
            toml_path.display()
        );
    }
    if meta.len() > MAX_TASK_TOML_BYTES {
        bail!(
            "{}: {} bytes, more than the {} MiB a task.toml may hold",
            toml_path.display(),
            meta.len(),
            MAX_TASK_TOML_BYTES >> 20
        );
    }
    let text = std::fs::read_to_string(&toml_path)
        .with_context(|| format!("{}: cannot read", toml_path.display()))?;
    Task::parse(&OnDisk(dir), &toml_path, &text)
}

/// Validates a task from the text of its task.toml in `dir`, the folder's paths checked on
/// disk as [`load_task`] checks them.
pub fn parse_task(dir: &Path, toml_path: &Path, text: &str) -> Result<Task> {
    Task::parse(&OnDisk(dir), toml_path, text)
}

/// The task folder as parsing sees it: the file system, through [`inside`].
pub(crate) struct OnDisk<'a>(pub(crate) &'a Path);

impl TaskFolder for OnDisk<'_> {
    fn dir(&self) -> &Path {
        self.0
    }

    fn inside(&self, given: &str) -> std::result::Result<PathBuf, String> {
        inside(self.0, given)
    }

    fn kind(&self, path: &Path) -> PathKind {
        match std::fs::metadata(path) {
            Err(_) => PathKind::Missing,
            Ok(m) if m.is_file() => PathKind::File,
            Ok(m) if m.is_dir() => PathKind::Dir,
            Ok(_) => PathKind::Other,
        }
    }
}

/// `dir.join(given)`, refused when it resolves (links followed) outside `dir`: a task could
/// otherwise read any file the harness can (`/proc/self/environ`, keys) into its image.
pub fn inside(dir: &Path, given: &str) -> std::result::Result<PathBuf, String> {
    let path = dir.join(given);
    if OUTSIDE_ALLOWED.load(Ordering::Relaxed) {
        return Ok(path);
    }
    if matches!(std::fs::symlink_metadata(&path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
    {
        return Ok(path); // missing: the caller says so with its own message
    }
    // Whatever cannot be resolved is refused: links can make a path that the kernel opens
    // but realpath cannot name (past PATH_MAX), and it may lead anywhere.
    let (Ok(real_dir), Ok(real)) = (dir.canonicalize(), path.canonicalize()) else {
        return Err(format!(
            "{given:?} cannot be resolved to a path inside the task's folder (refused)"
        ));
    };
    if real.starts_with(&real_dir) {
        Ok(path)
    } else {
        Err(format!(
            "{given:?} resolves to {}, outside the task's folder {} (refused: a dataset may \
             not read files of the host; `--allow-outside-task-paths` allows it for a dataset \
             you trust)",
            real.display(),
            real_dir.display()
        ))
    }
}

/// Loads a task folder's toml and refuses unknown layouts with a message naming the folder.
pub fn require_task_dir(dir: &Path) -> Result<()> {
    if !dir.join("task.toml").is_file() {
        bail!(
            "{}: not a task folder (no task.toml); folders whose name starts with '_' or '.' are skipped",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_toml_is_refused_above_its_size_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("task.toml")).unwrap();
        f.set_len(1 << 40).unwrap();
        let e = load_task(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("1099511627776 bytes, more than the 16 MiB"),
            "{e}"
        );
    }

    #[test]
    fn paths_stay_in_the_task_folder() {
        let root = tempfile::tempdir().unwrap();
        let task = root.path().join("t");
        std::fs::create_dir_all(task.join("sub")).unwrap();
        std::fs::write(task.join("sub/f"), "x").unwrap();
        std::fs::write(root.path().join("secret"), "k").unwrap();
        std::os::unix::fs::symlink("../../secret", task.join("sub/link")).unwrap();
        assert!(inside(&task, "sub/f").is_ok());
        for bad in [
            "../secret",
            "/proc/self/environ",
            "sub/link",
            "sub/../../secret",
        ] {
            let e = inside(&task, bad).unwrap_err();
            assert!(e.contains("outside the task's folder"), "{bad}: {e}");
        }
    }
}

#[cfg(test)]
#[path = "task_folder_tests.rs"]
mod format_tests;
