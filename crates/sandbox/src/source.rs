//! Fetching a task's source at base and its human patch, on the host.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::host_git;
use harness_core::task::{HumanRef, Source, Task};

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
    /// The human reference as a patch against base: for `human.commit` inside a prebuilt
    /// image, the task's fallback patch (empty when it gives none).
    pub human_patch: String,
    /// `human.commit` inside a prebuilt image: diffed and applied in the container.
    pub human_commit: Option<String>,
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
            let repo = host_git::clone(url, cache_dir)?;
            (git_archive(&repo, base_commit)?, Some(repo))
        }
        // The tree stays in the image; the image tag covers it through the base image's id.
        Source::Image { .. } => (Vec::new(), None),
    };
    check_entries(&entries).with_context(|| {
        format!(
            "{}: the source tree cannot be written safely",
            task.toml_path.display()
        )
    })?;
    let human_patch = match &task.human {
        HumanRef::Patch(p) => std::fs::read_to_string(p)
            .with_context(|| format!("{}: cannot read human patch", p.display()))?,
        HumanRef::ImageCommit { patch, .. } => match patch {
            Some(p) => std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read human patch", p.display()))?,
            None => String::new(),
        },
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
            let diff = host_git::run(
                repo,
                &[
                    "diff",
                    "--binary",
                    "--no-color",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--end-of-options",
                    base,
                    c,
                ],
            )
            .with_context(|| format!("{}: human.commit {c}", task.toml_path.display()))?;
            String::from_utf8(diff).with_context(|| {
                format!("{}: human.commit {c}: not UTF-8", task.toml_path.display())
            })?
        }
    };
    let human_commit = match &task.human {
        HumanRef::ImageCommit { commit, .. } => Some(commit.clone()),
        HumanRef::Patch(_) | HumanRef::Commit(_) => None,
    };
    if human_patch.trim().is_empty() && human_commit.is_none() {
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
    let mut human = human_patch.clone();
    if let Some(c) = &human_commit {
        human.push_str(&format!("\0commit:{c}"));
    }
    let digest = digest_of(&entries, &human, &image_files);
    Ok(Material {
        entries,
        human_patch,
        human_commit,
        image_files,
        digest,
    })
}

/// Every path relative and plain (no `.`, `..` or empty part), each once, and none under a
/// symlink of the tree: whoever writes the tree out (the reproducible commits, the image's
/// build context) can never be led outside it by the tree itself.
pub fn check_entries(entries: &[Entry]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    let links: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::Symlink { .. }))
        .map(|e| e.path.as_str())
        .collect();
    for e in entries {
        let p = e.path.as_str();
        let plain = !p.is_empty()
            && !p.contains('\0')
            && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
        if !plain {
            bail!("{p:?} is not a plain relative path");
        }
        if !seen.insert(p) {
            bail!("{p:?} is in the tree twice");
        }
        for (i, _) in p.match_indices('/') {
            if links.contains(&p[..i]) {
                bail!("{p:?} lies under {:?}, a symlink of the tree", &p[..i]);
            }
        }
    }
    Ok(())
}

/// `human`: the human reference's patch, and its commit where it is one inside the image.
fn digest_of(entries: &[Entry], human: &str, image_files: &[(String, Vec<u8>)]) -> String {
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
    h.update(human.as_bytes());
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

/// A repository folder of the dataset is copied (objects and references only) into the
/// cache; a bundle file is cloned there. Git never runs inside the dataset's own folder.
fn local_git(path: &Path, cache_dir: &Path) -> Result<PathBuf> {
    if path.is_dir() {
        return host_git::import_folder(path, cache_dir);
    }
    // Only a bundle: git also clones a text file `gitdir: PATH` as the repository it
    // names, anywhere on the host.
    let mut head = [0u8; 16];
    let read = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .with_context(|| format!("{}: cannot read", path.display()))?;
    if !(head[..read].starts_with(b"# v2 git bundle")
        || head[..read].starts_with(b"# v3 git bundle"))
    {
        bail!(
            "{}: source.git names a file that is not a git bundle (a folder or a bundle only)",
            path.display()
        );
    }
    let canonical = path
        .canonicalize()
        .with_context(|| format!("{}: cannot resolve", path.display()))?;
    host_git::clone(&canonical.to_string_lossy(), cache_dir)
}

fn git_archive(repo: &Path, commit: &str) -> Result<Vec<Entry>> {
    let out = host_git::run(
        repo,
        &["archive", "--format=tar", "--end-of-options", commit],
    )?;
    let mut archive = tar::Archive::new(&out[..]);
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
    use std::process::Command;

    /// A folder named like the task's id (the default id is the folder's name).
    fn task_folder() -> (tempfile::TempDir, PathBuf) {
        let keep = tempfile::tempdir().unwrap();
        let dir = keep.path().join("t");
        std::fs::create_dir(&dir).unwrap();
        (keep, dir)
    }

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
        let (_keep, work) = task_folder();
        let repo = work.as_path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        sh(
            &repo,
            "git init -q . && printf 'a\\n' > m.py && mkdir d && printf 'x\\n' > d/f && \
             git add -A && git -c user.name=t -c user.email=t@t commit -qm base && \
             printf 'b\\n' > m.py && git -c user.name=t -c user.email=t@t commit -qam opt && \
             git tag opt && git tag base HEAD~1",
        );
        // The task folder holds its repository (paths outside it are refused).
        let task_dir = work.as_path().to_path_buf();
        let toml = "[source]\ngit='repo'\nbase_commit='base'\n[human]\ncommit='opt'\n[test]\ncommand='true'\n[[bench]]\nname='b'\ncommand='true'\n";
        let task =
            harness_store::task_folder::parse_task(&task_dir, &task_dir.join("task.toml"), toml)
                .unwrap();
        let m = materialize(&task, &work.as_path().join("cache")).unwrap();
        let paths: Vec<_> = m.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["d/f", "m.py"]);
        assert!(m.human_patch.contains("-a\n+b"), "{}", m.human_patch);

        // The same tree as a bundle gives the same material.
        sh(&repo, "git bundle create ../repo.bundle --all 2>/dev/null");
        let toml_b = toml.replace("'repo'", "'repo.bundle'");
        let task_b =
            harness_store::task_folder::parse_task(&task_dir, &task_dir.join("task.toml"), &toml_b)
                .unwrap();
        let mb = materialize(&task_b, &work.as_path().join("cache")).unwrap();
        assert_eq!(mb.digest, m.digest);

        // A commit that does not exist is named.
        let bad = toml.replace("base_commit='base'", "base_commit='nosuch'");
        let task_c =
            harness_store::task_folder::parse_task(&task_dir, &task_dir.join("task.toml"), &bad)
                .unwrap();
        let err = format!(
            "{:#}",
            materialize(&task_c, &work.as_path().join("cache")).unwrap_err()
        );
        assert!(err.contains("nosuch"), "{err}");
    }

    const TOML_GIT: &str = "[source]\ngit='repo'\nbase_commit='base'\n[human]\ncommit='opt'\n[test]\ncommand='true'\n[[bench]]\nname='b'\ncommand='true'\n";

    /// A dataset's repository whose configuration runs a command on every read (a smudge
    /// filter for `git archive`, a textconv for `git diff`, an fsmonitor, hooks): the
    /// harness reads it without running any of them. (On 7b25252 `harness tasks` ran the
    /// smudge filter as whoever ran the harness.)
    #[test]
    fn a_datasets_git_configuration_never_runs() {
        let (_keep, work) = task_folder();
        let repo = work.as_path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let marker = work.as_path().join("RAN");
        sh(
            &repo,
            "git init -q . && printf 'a\\n' > m.py && git add -A && \
             git -c user.name=t -c user.email=t@t commit -qm base && git tag base && \
             printf 'b\\n' > m.py && git -c user.name=t -c user.email=t@t commit -qam opt && \
             git tag opt",
        );
        let m = marker.display();
        let config = format!(
            "[filter \"x\"]\n\tsmudge = \"touch {m}.smudge; cat\"\n\tclean = \"touch {m}.clean; cat\"\n\
             [diff \"x\"]\n\ttextconv = \"touch {m}.textconv; cat\"\n\
             [core]\n\tfsmonitor = \"touch {m}.fsmonitor; true\"\n\thooksPath = /nonexistent\n"
        );
        let mut text = std::fs::read_to_string(repo.join(".git/config")).unwrap();
        text.push_str(&config);
        std::fs::write(repo.join(".git/config"), text).unwrap();
        std::fs::write(repo.join(".git/info/attributes"), "* filter=x diff=x\n").unwrap();
        let task = harness_store::task_folder::parse_task(
            work.as_path(),
            &work.as_path().join("task.toml"),
            TOML_GIT,
        )
        .unwrap();
        let got = materialize(&task, &work.as_path().join("cache")).unwrap();
        assert!(got.human_patch.contains("-a\n+b"), "{}", got.human_patch);
        let ran: Vec<_> = std::fs::read_dir(work.as_path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("RAN"))
            .collect();
        assert!(
            ran.is_empty(),
            "the dataset's git configuration ran: {ran:?}"
        );
    }

    /// A tree with a symlink and a path under it (a bundle whose tree was made by hand) is
    /// refused before anything writes it out. (On 7b25252 the reproducible commits wrote
    /// through the link, outside their temporary folder.)
    #[test]
    fn a_tree_with_a_path_under_a_symlink_is_refused() {
        let (_keep, work) = task_folder();
        let repo = work.as_path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let outside = work.as_path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        sh(
            &repo,
            &format!(
                "git init -q . && blob=$(printf 'pwned\\n' | git hash-object -w --stdin) && \
                 link=$(printf '%s' '{}' | git hash-object -w --stdin) && \
                 sub=$(printf '100644 blob %s\\tx\\n' $blob | git mktree) && \
                 top=$(printf '120000 blob %s\\ta\\n040000 tree %s\\ta\\n' $link $sub | git mktree --missing 2>/dev/null || \
                       printf '040000 tree %s\\ta\\n120000 blob %s\\ta\\n' $sub $link | git mktree) && \
                 c=$(git -c user.name=t -c user.email=t@t commit-tree -m base $top) && \
                 git tag base $c && git tag opt $c",
                outside.display()
            ),
        );
        let task = harness_store::task_folder::parse_task(
            work.as_path(),
            &work.as_path().join("task.toml"),
            TOML_GIT,
        )
        .unwrap();
        let e = format!(
            "{:#}",
            materialize(&task, &work.as_path().join("cache")).unwrap_err()
        );
        assert!(e.contains("symlink of the tree"), "{e}");
        assert!(!outside.join("x").exists(), "written through the link");
    }

    #[test]
    fn entries_are_plain_paths_once_and_never_under_a_link() {
        let file = |p: &str| Entry {
            path: p.into(),
            kind: EntryKind::File {
                mode: 0o644,
                data: Vec::new(),
            },
        };
        let link = |p: &str| Entry {
            path: p.into(),
            kind: EntryKind::Symlink {
                target: "/tmp".into(),
            },
        };
        assert!(check_entries(&[file("a/b"), link("c")]).is_ok());
        for (bad, why) in [
            (vec![link("a"), file("a/x")], "symlink of the tree"),
            (vec![file("../x")], "plain relative"),
            (vec![file("/etc/x")], "plain relative"),
            (vec![file("a//x")], "plain relative"),
            (vec![file("a"), file("a")], "twice"),
        ] {
            let e = check_entries(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
    }
}
