//! Fetching a task's source at base and its human patch, on the host.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::core::task::{HumanRef, Source, Task};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    File { mode: u32, data: Vec<u8> },
    Symlink { target: String },
}

/// One file of the source tree, by its repository-relative path ('/'-separated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub kind: EntryKind,
}

/// The task's code at base plus the human reference, ready to go into an image.
#[derive(Debug, Clone)]
pub struct Material {
    pub entries: Vec<Entry>,
    pub human_patch: String,
    /// `[image] files`: (absolute path in the image, bytes).
    pub image_files: Vec<(String, Vec<u8>)>,
    /// sha256 of everything above.
    pub digest: String,
}

impl Material {
    /// Repository-relative paths of every file and symlink at base.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.path.as_str())
    }

    /// Repository-relative paths of the symlinks at base.
    pub fn symlinks(&self) -> std::collections::BTreeSet<String> {
        self.entries
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Symlink { .. }))
            .map(|e| e.path.clone())
            .collect()
    }

    /// Whether anything at base is at `path` or under it (a folder).
    pub fn has_path_or_folder(&self, path: &str) -> bool {
        self.entries.iter().any(|e| {
            e.path == path
                || e.path
                    .strip_prefix(path)
                    .is_some_and(|r| r.starts_with('/'))
        })
    }
}

/// Reads the source and the human patch. Git URLs are cloned into `cache_dir` once.
pub fn materialize(task: &Task, cache_dir: &Path) -> Result<Material> {
    let (entries, repo_for_human) = match &task.source {
        Source::Folder(dir) => (read_folder(dir)?, None),
        Source::Git { repo, base_commit } => {
            let repo = local_git(repo, cache_dir)?;
            (git_archive(&repo, base_commit)?, Some(repo))
        }
        Source::Url { url, base_commit } => {
            let repo = clone_url(url, cache_dir)?;
            (git_archive(&repo, base_commit)?, Some(repo))
        }
        // The tree stays in the image; the image tag covers it through the base image's id.
        Source::Image { .. } => (Vec::new(), None),
    };
    let human_patch = match &task.human {
        HumanRef::Patch(p) => std::fs::read_to_string(p)
            .with_context(|| format!("{}: cannot read human patch", p.display()))?,
        HumanRef::Commit(c) => {
            let repo = repo_for_human
                .as_ref()
                .context("human.commit needs a git source")?;
            let base = match &task.source {
                Source::Git { base_commit, .. } | Source::Url { base_commit, .. } => base_commit,
                Source::Folder(_) | Source::Image { .. } => {
                    bail!("human.commit needs a git source")
                }
            };
            git(
                repo,
                &["diff", "--binary", "--no-color", "--no-ext-diff", base, c],
            )
            .with_context(|| format!("{}: human.commit {c}", task.toml_path.display()))?
        }
    };
    if human_patch.trim().is_empty() {
        bail!(
            "{}: the human reference is an empty patch",
            task.toml_path.display()
        );
    }
    let mut image_files = Vec::new();
    for (target, path) in &task.image_files {
        let data =
            std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
        image_files.push((target.clone(), data));
    }
    let digest = digest_of(&entries, &human_patch, &image_files);
    Ok(Material {
        entries,
        human_patch,
        image_files,
        digest,
    })
}

fn digest_of(entries: &[Entry], human_patch: &str, image_files: &[(String, Vec<u8>)]) -> String {
    let mut h = Sha256::new();
    for e in entries {
        h.update(e.path.as_bytes());
        h.update([0]);
        match &e.kind {
            EntryKind::File { mode, data } => {
                h.update(format!("f{:o}:{}:", mode & 0o111, data.len()).as_bytes());
                h.update(data);
            }
            EntryKind::Symlink { target } => {
                h.update(b"l:");
                h.update(target.as_bytes());
            }
        }
        h.update([0]);
    }
    h.update(b"human:");
    h.update(human_patch.as_bytes());
    for (target, data) in image_files {
        h.update(format!("\0file:{target}:{}:", data.len()).as_bytes());
        h.update(data);
    }
    hex::encode(h.finalize())
}

fn read_folder(root: &Path) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<Entry>) -> Result<()> {
    let rd = std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))?;
    for entry in rd {
        let entry = entry.with_context(|| format!("{}: cannot list", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let rel = path
            .strip_prefix(root)
            .with_context(|| format!("{} is outside {}", path.display(), root.display()))?
            .to_string_lossy()
            .replace('\\', "/");
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("{}: cannot stat", path.display()))?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)
                .with_context(|| format!("{}: cannot read link", path.display()))?;
            out.push(Entry {
                path: rel,
                kind: EntryKind::Symlink {
                    target: target.to_string_lossy().into_owned(),
                },
            });
        } else if meta.is_dir() {
            walk(root, &path, out)?;
        } else if meta.is_file() {
            use std::os::unix::fs::PermissionsExt;
            let data =
                std::fs::read(&path).with_context(|| format!("{}: cannot read", path.display()))?;
            out.push(Entry {
                path: rel,
                kind: EntryKind::File {
                    mode: meta.permissions().mode() & 0o777,
                    data,
                },
            });
        }
    }
    Ok(())
}

fn git(repo: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .context("cannot run git on the host (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {} in {}: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("git printed non-UTF-8 text")
}

/// A repository folder is used as it is; a bundle file is cloned into the cache once.
fn local_git(path: &Path, cache_dir: &Path) -> Result<PathBuf> {
    if path.is_dir() {
        return Ok(path.to_path_buf());
    }
    let canonical = path
        .canonicalize()
        .with_context(|| format!("{}: cannot resolve", path.display()))?;
    clone_url(&canonical.to_string_lossy(), cache_dir)
}

fn clone_url(url: &str, cache_dir: &Path) -> Result<PathBuf> {
    let key = hex::encode(Sha256::digest(url.as_bytes()));
    let dest = cache_dir.join("sources").join(&key[..16]);
    if dest.join("HEAD").is_file() {
        return Ok(dest);
    }
    std::fs::create_dir_all(cache_dir.join("sources"))
        .with_context(|| format!("{}: cannot create", cache_dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".clone")
        .tempdir_in(cache_dir.join("sources"))
        .context("cannot make a temporary folder for a clone")?;
    let out = Command::new("git")
        .args(["clone", "--quiet", "--bare", url])
        .arg(tmp.path().join("repo"))
        .output()
        .context("cannot run git on the host (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git clone {url}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::rename(tmp.path().join("repo"), &dest)
        .with_context(|| format!("{}: cannot move clone into place", dest.display()))?;
    Ok(dest)
}

fn git_archive(repo: &Path, commit: &str) -> Result<Vec<Entry>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["archive", "--format=tar", commit])
        .output()
        .context("cannot run git on the host (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git archive {commit} in {}: {}",
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut archive = tar::Archive::new(&out.stdout[..]);
    let mut entries = Vec::new();
    for e in archive.entries().context("reading git archive")? {
        let mut e = e.context("reading git archive")?;
        let path = e
            .path()
            .context("reading git archive")?
            .to_string_lossy()
            .trim_end_matches('/')
            .to_string();
        let header = e.header();
        match header.entry_type() {
            tar::EntryType::Regular => {
                let mode = header.mode().unwrap_or(0o644);
                let mut data = Vec::new();
                e.read_to_end(&mut data).context("reading git archive")?;
                entries.push(Entry {
                    path,
                    kind: EntryKind::File { mode, data },
                });
            }
            tar::EntryType::Symlink => {
                let target = e
                    .link_name()
                    .context("reading git archive")?
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                entries.push(Entry {
                    path,
                    kind: EntryKind::Symlink { target },
                });
            }
            _ => {}
        }
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, cmd: &str) {
        let st = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(st.success(), "{cmd}");
    }

    #[test]
    fn git_source_and_human_commit_match_folder_source() {
        let work = tempfile::tempdir().unwrap();
        let repo = work.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        sh(
            &repo,
            "git init -q . && printf 'a\\n' > m.py && mkdir d && printf 'x\\n' > d/f && \
             git add -A && git -c user.name=t -c user.email=t@t commit -qm base && \
             printf 'b\\n' > m.py && git -c user.name=t -c user.email=t@t commit -qam opt && \
             git tag opt && git tag base HEAD~1",
        );
        let task_dir = work.path().join("t");
        std::fs::create_dir(&task_dir).unwrap();
        let toml = "[source]\ngit='../repo'\nbase_commit='base'\n[human]\ncommit='opt'\n[test]\ncommand='true'\n[[bench]]\nname='b'\ncommand='true'\n";
        let task = Task::parse(&task_dir, &task_dir.join("task.toml"), toml).unwrap();
        let m = materialize(&task, &work.path().join("cache")).unwrap();
        let paths: Vec<_> = m.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["d/f", "m.py"]);
        assert!(m.human_patch.contains("-a\n+b"), "{}", m.human_patch);

        // The same tree as a bundle gives the same material.
        sh(&repo, "git bundle create ../repo.bundle --all 2>/dev/null");
        let toml_b = toml.replace("../repo'", "../repo.bundle'");
        let task_b = Task::parse(&task_dir, &task_dir.join("task.toml"), &toml_b).unwrap();
        let mb = materialize(&task_b, &work.path().join("cache")).unwrap();
        assert_eq!(mb.digest, m.digest);

        // A commit that does not exist is named.
        let bad = toml.replace("base_commit='base'", "base_commit='nosuch'");
        let task_c = Task::parse(&task_dir, &task_dir.join("task.toml"), &bad).unwrap();
        let err = format!(
            "{:#}",
            materialize(&task_c, &work.path().join("cache")).unwrap_err()
        );
        assert!(err.contains("nosuch"), "{err}");
    }
}
