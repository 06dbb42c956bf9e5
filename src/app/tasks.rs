//! The commits a task is known by, which `harness local --commit` finds it with.
//!
//! A git source has real ones: its `base_commit`, and the human commit when the task names
//! one. Everything else gets reproducible ones: the tree at base committed into a fresh
//! repository with a fixed author, committer, date and message, then the human patch applied
//! and committed the same way. The same content always gives the same hashes, on any machine
//! and with any git configuration (the user's and the system's are not read).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::core::task::{HumanRef, Source, Task};
use crate::sandbox::source::{EntryKind, Fetch, Material, NotFetched, read_source};
use crate::sandbox::tree::{Budget, Item};
use crate::store::dataset::Dataset;

/// A task's base and human commits (full hashes, or the git source's own spelling).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCommits {
    pub base: String,
    pub human: String,
}

/// Who made a reproducible commit, and when.
const IDENTITY: [(&str, &str); 6] = [
    ("GIT_AUTHOR_NAME", "harness"),
    ("GIT_AUTHOR_EMAIL", "harness@localhost"),
    ("GIT_AUTHOR_DATE", "2000-01-01T00:00:00+0000"),
    ("GIT_COMMITTER_NAME", "harness"),
    ("GIT_COMMITTER_EMAIL", "harness@localhost"),
    ("GIT_COMMITTER_DATE", "2000-01-01T00:00:00+0000"),
];

/// The task's commits: the git source's where it has them, reproducible ones otherwise. The
/// tree is streamed (to disk for reproducible commits, checked and dropped otherwise), never
/// held; a remote source is read only where `fetch` allows it (see [`all_commits`]).
pub fn task_commits(task: &Task, cache_dir: &Path, fetch: Fetch) -> Result<TaskCommits> {
    let commits = match (&task.source, &task.human) {
        (
            Source::Git { base_commit, .. } | Source::Url { base_commit, .. },
            HumanRef::Commit(c),
        ) => {
            // Read to check it (the tree's paths, the human commit); a remote source not
            // fetched yet is listed by what its task.toml says.
            match read_source(task, cache_dir, fetch, &mut Budget::default(), &mut discard) {
                Err(e) if e.downcast_ref::<NotFetched>().is_none() => return Err(e),
                _ => {}
            }
            TaskCommits {
                base: base_commit.clone(),
                human: c.clone(),
            }
        }
        (
            Source::Git { base_commit, .. } | Source::Url { base_commit, .. },
            HumanRef::Patch(_) | HumanRef::ImageCommit { .. },
        ) => TaskCommits {
            base: base_commit.clone(),
            human: reproducible_from(task, cache_dir, fetch)?.human,
        },
        (Source::Folder(_), _) => reproducible_from(task, cache_dir, fetch)?,
        // Base is the image's own tree, which never leaves it: the image names it.
        (Source::Image { image }, _) => {
            let human = read_source(task, cache_dir, fetch, &mut Budget::default(), &mut discard)?;
            TaskCommits {
                base: image.clone(),
                human: match human.commit {
                    Some(commit) => commit,
                    None => crate::core::digest::sha256_hex(human.patch.as_bytes()),
                },
            }
        }
    };
    if let Some(stated) = &task.commits {
        for (what, said, got) in [
            ("base", &stated.base, &commits.base),
            ("human", &stated.human, &commits.human),
        ] {
            if let Some(said) = said
                && !got.starts_with(said.as_str())
            {
                bail!(
                    "{}: commits.{what} says {said}, but the task's content gives {got} \
                     (the source or the human patch changed: update commits.{what})",
                    task.toml_path.display()
                );
            }
        }
    }
    Ok(commits)
}

/// Reads an entry of a tree and keeps nothing of it.
fn discard(item: Item<'_>) -> Result<()> {
    if let Item::File { data, .. } = item {
        std::io::copy(data, &mut std::io::sink())?;
    }
    Ok(())
}

/// Base and human as fresh, fixed-identity commits of the task's source, its tree streamed
/// to a temporary folder file by file.
pub fn reproducible_from(task: &Task, cache_dir: &Path, fetch: Fetch) -> Result<TaskCommits> {
    let (dir, repo) = scratch()?;
    let human = read_source(
        task,
        cache_dir,
        fetch,
        &mut Budget::default(),
        &mut |item| write_item(&repo, item),
    )?;
    commit_pair(dir.path(), &repo, &human.patch)
}

/// Base and human as fresh, fixed-identity commits of the material.
pub fn reproducible(material: &Material) -> Result<TaskCommits> {
    crate::sandbox::source::check_entries(&material.entries)?;
    let (dir, repo) = scratch()?;
    for e in &material.entries {
        let item = match &e.kind {
            EntryKind::File { mode, data } => Item::File {
                path: &e.path,
                mode: *mode,
                size: data.len() as u64,
                data: &mut &data[..],
            },
            EntryKind::Symlink { target } => Item::Symlink {
                path: &e.path,
                target,
            },
        };
        write_item(&repo, item)?;
    }
    commit_pair(dir.path(), &repo, &material.human_patch)
}

/// A temporary folder and the empty work tree in it.
fn scratch() -> Result<(tempfile::TempDir, std::path::PathBuf)> {
    let dir = tempfile::Builder::new()
        .prefix("harness-commits.")
        .tempdir()
        .context("cannot make a temporary folder")?;
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).context("cannot make a temporary folder")?;
    Ok((dir, repo))
}

/// One entry of the tree written under `repo` (its path checked plain and never under a
/// symlink of the tree by whoever read it: `sandbox::tree`).
fn write_item(repo: &Path, item: Item<'_>) -> Result<()> {
    let rel = item.path().to_string();
    let path = repo.join(&rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot write {rel}"))?;
    }
    match item {
        Item::File { mode, data, .. } => {
            use std::os::unix::fs::OpenOptionsExt;
            let exec = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
            // create_new: never through a link or over a file already written.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(exec)
                .open(&path)
                .with_context(|| format!("cannot write {rel}"))?;
            std::io::copy(data, &mut f).with_context(|| format!("cannot write {rel}"))?;
        }
        Item::Symlink { target, .. } => std::os::unix::fs::symlink(target, &path)
            .with_context(|| format!("cannot write {rel}"))?,
    }
    Ok(())
}

/// Commits the tree in `repo` as base, applies `human_patch` and commits it as human.
fn commit_pair(dir: &Path, repo: &Path, human_patch: &str) -> Result<TaskCommits> {
    git(repo, &["init", "-q", "--template="])?;
    let base = commit(repo, "base")?;
    let patch = dir.join("human.patch");
    std::fs::write(&patch, human_patch).context("cannot write the human patch")?;
    let patch_arg = patch.to_string_lossy().to_string();
    if git(repo, &["apply", "--whitespace=nowarn", patch_arg.as_str()]).is_err() {
        // What git apply refuses, the harness's cascade may still apply (fuzz): so may we.
        let out = Command::new("patch")
            .args([
                "-p1",
                "--batch",
                "--forward",
                "--fuzz=5",
                "-i",
                patch_arg.as_str(),
            ])
            .current_dir(repo)
            .output()
            .context("cannot run patch on the host (is it installed?)")?;
        if !out.status.success() {
            bail!(
                "the human patch does not apply to base: {}",
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
    }
    let human = commit(repo, "human")?;
    Ok(TaskCommits { base, human })
}

fn commit(repo: &Path, message: &str) -> Result<String> {
    git(repo, &["add", "-A"])?;
    git(
        repo,
        &[
            "commit",
            "-q",
            "--allow-empty",
            "--no-verify",
            "--no-gpg-sign",
            "-m",
            message,
        ],
    )?;
    Ok(git(repo, &["rev-parse", "HEAD"])?.trim().to_string())
}

/// git on the work tree `repo` with its repository beside it (`../git`), never inside it: a
/// human patch applied by `patch` (which, unlike git apply, writes `.git/config`) could
/// otherwise give git a filter to run.
fn git(repo: &Path, args: &[&str]) -> Result<String> {
    let git_dir = repo.with_file_name("git");
    let out = crate::sandbox::host_git::command(Some(repo))
        .arg(format!("--git-dir={}", git_dir.display()))
        .arg(format!("--work-tree={}", repo.display()))
        // Files over 1 MiB are streamed into the repository, never read whole.
        .args(["-c", "core.fileMode=true", "-c", "core.bigFileThreshold=1m"])
        .args(args)
        .envs(IDENTITY)
        .output()
        .context("cannot run git on the host (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("git printed non-UTF-8 text")
}

/// A task whose base or human commit starts with `prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMatch {
    pub instance_id: String,
    /// "base" or "human".
    pub which: &'static str,
    pub commit: String,
}

/// The tasks one of whose commits starts with `prefix` (hex, case-insensitive).
pub fn find_by_prefix(all: &[(String, TaskCommits)], prefix: &str) -> Vec<CommitMatch> {
    let p = prefix.to_ascii_lowercase();
    let mut out = Vec::new();
    for (id, c) in all {
        for (which, commit) in [("human", &c.human), ("base", &c.base)] {
            if commit.to_ascii_lowercase().starts_with(&p) {
                out.push(CommitMatch {
                    instance_id: id.clone(),
                    which,
                    commit: commit.clone(),
                });
            }
        }
    }
    out
}

/// Every task's commits, with the tasks whose source cannot be read left out (and said).
pub struct AllCommits {
    pub all: Vec<(String, TaskCommits)>,
    /// `id: why` for each task whose source cannot be read.
    pub problems: Vec<String>,
    /// `id: why` for each task whose remote source is not fetched (`Fetch::CachedOnly`) and
    /// whose commits need its tree.
    pub not_fetched: Vec<String>,
}

/// Every task's commits. With `Fetch::CachedOnly` (`harness tasks`) no remote source is
/// fetched: a task whose commits its task.toml names is listed by them, the others are
/// said not fetched.
pub fn all_commits(dataset: &Dataset, cache_dir: &Path, fetch: Fetch) -> AllCommits {
    let mut out = AllCommits {
        all: Vec::new(),
        problems: Vec::new(),
        not_fetched: Vec::new(),
    };
    for (id, task) in &dataset.tasks {
        match task_commits(task, cache_dir, fetch) {
            Ok(c) => out.all.push((id.clone(), c)),
            Err(e) if e.downcast_ref::<NotFetched>().is_some() => {
                out.not_fetched.push(format!("{id}: {e}"))
            }
            Err(e) => out.problems.push(format!("{id}: {e:#}")),
        }
    }
    out
}

/// The first 12 hex digits of a commit, as the tables show it; anything else (a prebuilt
/// image's name) whole.
pub fn short(hash: &str) -> &str {
    if hash.chars().all(|c| c.is_ascii_hexdigit()) {
        &hash[..hash.len().min(12)]
    } else {
        hash
    }
}

/// The protected files the task's human patch changes (a human given as a commit of a git
/// source is not read here: empty).
pub fn human_protected(task: &Task) -> Vec<String> {
    let path = match &task.human {
        HumanRef::Patch(p) | HumanRef::ImageCommit { patch: Some(p), .. } => p,
        _ => return Vec::new(),
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut touched: Vec<String> = crate::core::patch::parse(&text)
        .iter()
        .flat_map(|f| [f.old_path.clone(), f.new_path.clone()])
        .flatten()
        .filter(|p| task.is_protected(p))
        .collect();
    touched.sort();
    touched.dedup();
    touched
}

/// `harness tasks`: every task with its commits, GPUs and description. A dataset's text
/// (descriptions, commit spellings, git's messages, folder names) is shown, never obeyed;
/// a remote source is never fetched (`Fetch::CachedOnly`).
pub fn task_listing(dataset: &Dataset, cache_dir: &Path) -> String {
    use crate::core::text::for_terminal as shown;
    let mut out = String::new();
    let AllCommits {
        all,
        problems,
        not_fetched,
    } = all_commits(dataset, cache_dir, Fetch::CachedOnly);
    let header: Vec<String> = ["instance", "base", "human", "gpus", "description"]
        .iter()
        .map(|h| h.to_string())
        .collect();
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|(id, c)| {
            let task = &dataset.tasks[id];
            vec![
                id.clone(),
                short(&c.base).to_string(),
                short(&c.human).to_string(),
                task.resources.gpus.to_string(),
                task.description.clone(),
            ]
        })
        .collect();
    out.push_str(&crate::app::table::render(&header, &rows, &[]));
    for (id, _) in &all {
        let touched = human_protected(&dataset.tasks[id]);
        if !touched.is_empty() {
            out.push_str(&format!(
                "{}: the human changes protected files: {} (applied whole, the task's own; \
                 samples are tested with base's version of them, or the human's where a \
                 sample makes the human's very change)\n",
                shown(id),
                shown(&touched.join(", "))
            ));
        }
    }
    for p in problems {
        out.push_str(&format!("cannot list: {}\n", shown(&p)));
    }
    for p in not_fetched {
        out.push_str(&format!("not fetched: {}\n", shown(&p)));
    }
    for (name, why) in &dataset.invalid {
        out.push_str(&format!("invalid task {}: {}\n", shown(name), shown(why)));
    }
    out
}

/// `harness tasks`: every task of the dataset with its base and human commits.
pub fn command(
    dataset: &std::path::Path,
    results_dir: &std::path::Path,
    json: bool,
) -> Result<i32> {
    let dataset = crate::store::dataset::Dataset::load(dataset)?;
    let cache = results_dir.join(".cache");
    if json {
        let AllCommits {
            all,
            problems,
            not_fetched,
        } = all_commits(&dataset, &cache, Fetch::CachedOnly);
        let tasks: Vec<serde_json::Value> = all
            .iter()
            .map(|(id, c)| {
                let task = &dataset.tasks[id];
                serde_json::json!({"instance_id": id, "base": c.base, "human": c.human,
                    "gpus": task.resources.gpus, "description": task.description,
                    "human_protected": human_protected(task)})
            })
            .collect();
        let json = serde_json::json!({"tasks": tasks, "problems": problems,
            "not_fetched": not_fetched, "invalid": dataset.invalid});
        crate::outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        crate::out!("{}", task_listing(&dataset, &cache));
    }
    Ok(if dataset.invalid.is_empty() { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::source::Entry;

    fn material(human_patch: &str, exec: bool) -> Material {
        Material {
            entries: vec![
                Entry {
                    path: "m.py".into(),
                    kind: EntryKind::File {
                        mode: if exec { 0o755 } else { 0o644 },
                        data: b"a = 1\n".to_vec(),
                    },
                },
                Entry {
                    path: "d/link".into(),
                    kind: EntryKind::Symlink {
                        target: "../m.py".into(),
                    },
                },
            ],
            image_files: Vec::new(),
            human_patch: human_patch.into(),
            human_commit: None,
            digest: String::new(),
        }
    }

    const PATCH: &str =
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n";

    #[test]
    fn same_content_same_hashes_and_any_change_shows() {
        let a = reproducible(&material(PATCH, false)).unwrap();
        let b = reproducible(&material(PATCH, false)).unwrap();
        assert_eq!(a, b, "reproducible");
        assert_eq!(a.base.len(), 40);
        assert_ne!(a.base, a.human);
        // Only the executable bit differs: another base.
        let x = reproducible(&material(PATCH, true)).unwrap();
        assert_ne!(x.base, a.base);
        // Another human patch: same base, another human.
        let other = PATCH.replace("a = 2", "a = 3");
        let y = reproducible(&material(&other, false)).unwrap();
        assert_eq!(y.base, a.base);
        assert_ne!(y.human, a.human);
        let bad = PATCH.replace("-a = 1", "-a = 9");
        assert!(reproducible(&material(&bad, false)).is_err());
    }

    #[test]
    fn prefixes_find_base_and_human_case_insensitively() {
        let all = vec![
            (
                "t1".to_string(),
                TaskCommits {
                    base: "abc123".into(),
                    human: "def456".into(),
                },
            ),
            (
                "t2".to_string(),
                TaskCommits {
                    base: "abd000".into(),
                    human: "123456".into(),
                },
            ),
        ];
        let m = find_by_prefix(&all, "DEF");
        assert_eq!(m.len(), 1);
        assert_eq!((m[0].instance_id.as_str(), m[0].which), ("t1", "human"));
        assert_eq!(find_by_prefix(&all, "ab").len(), 2, "ambiguous");
        assert_eq!(find_by_prefix(&all, "abd")[0].which, "base");
        assert!(find_by_prefix(&all, "ffff").is_empty());
    }
}
