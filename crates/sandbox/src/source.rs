//! Fetching a task's source at base and its human patch, on the host.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::host_git;
use crate::tree::{self, Budget, Item, MAX_TREE_BYTES, Visit, read_capped};
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

/// Whether a command may fetch a remote source (`source.url`: https, http, git, ssh) to
/// read it. Only the commands that need the tree do (`build`, `opt-at-k`, `run`, `local`,
/// `agent run`); `tasks` and `images gc` read what an earlier fetch left in the cache, and
/// never make the host connect where a dataset says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetch {
    Allowed,
    CachedOnly,
}

/// A remote source that was not fetched ([`Fetch::CachedOnly`]).
#[derive(Debug)]
pub struct NotFetched {
    pub url: String,
}

impl std::fmt::Display for NotFetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "its source {} is remote and is fetched only by the commands that build or \
             evaluate it (`harness build` does)",
            harness_core::text::for_terminal(&self.url)
        )
    }
}

impl std::error::Error for NotFetched {}

/// The most bytes of a human patch the harness reads.
pub const MAX_HUMAN_PATCH_BYTES: u64 = 256 << 20;

/// The human reference as the source gives it.
#[derive(Debug, Clone)]
pub struct Human {
    /// A patch against base (for `human.commit` inside a prebuilt image: the task's fallback
    /// patch, empty when it gives none).
    pub patch: String,
    /// `human.commit` inside a prebuilt image.
    pub commit: Option<String>,
}

/// Reads the source and the human patch. Git URLs are cloned into `cache_dir` once.
pub fn materialize(task: &Task, cache_dir: &Path) -> Result<Material> {
    materialize_with(task, cache_dir, Fetch::Allowed)
}

/// [`materialize`], fetching a remote source only when `fetch` allows it. The tree is held
/// in memory (an image's build context is made of it): at most [`MAX_TREE_BYTES`].
pub fn materialize_with(task: &Task, cache_dir: &Path, fetch: Fetch) -> Result<Material> {
    let mut entries = Vec::new();
    let mut budget = Budget::default();
    let human = read_source(task, cache_dir, fetch, &mut budget, &mut |item| {
        let path = item.path().to_string();
        let kind = match item {
            Item::File {
                mode, size, data, ..
            } => {
                let mut bytes = Vec::with_capacity(size as usize);
                data.take(size).read_to_end(&mut bytes)?;
                EntryKind::File { mode, data: bytes }
            }
            Item::Symlink { target, .. } => EntryKind::Symlink {
                target: target.to_string(),
            },
        };
        entries.push(Entry { path, kind });
        Ok(())
    })?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let mut image_files = Vec::new();
    for (target, path) in &task.image_files {
        let data = read_capped(path, MAX_TREE_BYTES, "an [image] file")?;
        budget
            .take(target, data.len() as u64)
            .with_context(|| format!("{}: with its [image] files", task.toml_path.display()))?;
        image_files.push((target.clone(), data));
    }
    let mut digested = human.patch.clone();
    if let Some(c) = &human.commit {
        digested.push_str(&format!("\0commit:{c}"));
    }
    let digest = digest_of(&entries, &digested, &image_files);
    Ok(Material {
        entries,
        human_patch: human.patch,
        human_commit: human.commit,
        image_files,
        digest,
    })
}

/// The task's tree at base, entry by entry through `visit` (checked and within `budget`:
/// `tree`), and its human reference. Nothing of the tree is held here.
pub fn read_source(
    task: &Task,
    cache_dir: &Path,
    fetch: Fetch,
    budget: &mut Budget,
    visit: &mut Visit,
) -> Result<Human> {
    let toml = task.toml_path.display();
    let repo = match &task.source {
        Source::Folder(dir) => {
            tree::visit_folder(dir, budget, visit)
                .with_context(|| format!("{toml}: the source tree at base"))?;
            None
        }
        Source::Git { repo, base_commit } => {
            let repo = local_git(repo, cache_dir)?;
            tree::visit_git(&repo, base_commit, budget, visit)
                .with_context(|| format!("{toml}: the source tree at base"))?;
            Some(repo)
        }
        Source::Url { url, base_commit } => {
            let repo = match fetch {
                Fetch::Allowed => host_git::clone(url, cache_dir)?,
                Fetch::CachedOnly => match host_git::cloned(url, cache_dir) {
                    Some(repo) => repo,
                    None => return Err(NotFetched { url: url.clone() }.into()),
                },
            };
            tree::visit_git(&repo, base_commit, budget, visit)
                .with_context(|| format!("{toml}: the source tree at base"))?;
            Some(repo)
        }
        // The tree stays in the image; the image tag covers it through the base image's id.
        Source::Image { .. } => None,
    };
    let read_patch = |p: &Path| -> Result<String> {
        let bytes = read_capped(p, MAX_HUMAN_PATCH_BYTES, "a human patch")?;
        String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", p.display()))
    };
    let patch = match &task.human {
        HumanRef::Patch(p) => read_patch(p)?,
        HumanRef::ImageCommit { patch, .. } => match patch {
            Some(p) => read_patch(p)?,
            None => String::new(),
        },
        HumanRef::Commit(c) => {
            let (repo, base) = match (&repo, &task.source) {
                (Some(repo), Source::Git { base_commit, .. } | Source::Url { base_commit, .. }) => {
                    (repo, base_commit)
                }
                _ => bail!("human.commit needs a git source"),
            };
            human_diff(repo, base, c, MAX_HUMAN_PATCH_BYTES)
                .with_context(|| format!("{toml}: human.commit {c}"))?
        }
    };
    let commit = match &task.human {
        HumanRef::ImageCommit { commit, .. } => Some(commit.clone()),
        HumanRef::Patch(_) | HumanRef::Commit(_) => None,
    };
    if patch.trim().is_empty() && commit.is_none() {
        bail!("{toml}: the human reference is an empty patch");
    }
    Ok(Human { patch, commit })
}

/// `git diff` of base to the human commit, once the blobs it would load are known to be
/// within `limit` (git holds both sides of a changed file in memory); the diff too.
fn human_diff(repo: &Path, base: &str, human: &str, limit: u64) -> Result<String> {
    let raw = host_git::run_capped(
        repo,
        &[
            "diff",
            "--raw",
            "-z",
            "--no-abbrev",
            "--no-renames",
            "--end-of-options",
            base,
            human,
        ],
        limit,
        "the list of changed files",
    )?;
    let blobs: Vec<String> = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|f| f.starts_with(':'))
        .flat_map(|f| f.split(' ').skip(2).take(2).map(str::to_string))
        .filter(|id| id.chars().any(|c| c != '0'))
        .collect();
    if !blobs.is_empty() {
        let sizes = host_git::run_with_input(
            repo,
            &["cat-file", "--batch-check=%(objectsize)"],
            blobs.join("\n") + "\n",
        )?;
        let total: u64 = String::from_utf8_lossy(&sizes)
            .lines()
            .filter_map(|l| l.trim().parse::<u64>().ok())
            .sum();
        if total > limit {
            bail!(
                "the files it changes hold {total} bytes, more than the {} a human reference \
                 may change (refused before git reads them)",
                if limit >= 1 << 20 {
                    format!("{} MiB", limit >> 20)
                } else {
                    format!("{limit} bytes")
                }
            );
        }
    }
    let diff = host_git::run_capped(
        repo,
        &[
            "diff",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--end-of-options",
            base,
            human,
        ],
        limit,
        "the human patch",
    )?;
    String::from_utf8(diff).context("not UTF-8")
}

/// Every path relative and plain (no `.`, `..` or empty part), each once, and none under a
/// symlink of the tree: whoever writes the tree out (the reproducible commits, the image's
/// build context) can never be led outside it by the tree itself.
pub fn check_entries(entries: &[Entry]) -> Result<()> {
    let mut check = tree::PathCheck::default();
    for e in entries {
        check.check(&e.path, matches!(e.kind, EntryKind::Symlink { .. }))?;
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

    /// A human commit is diffed only when the files it changes are within the limit
    /// (their sizes asked of git first), and gives the same diff as before when they are.
    #[test]
    fn a_human_commit_is_diffed_only_within_its_limit() {
        let (_keep, work) = task_folder();
        let repo = work.as_path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        sh(
            &repo,
            "git init -q . && head -c 3000 /dev/zero | tr '\\0' a > big.txt && printf 'x\\n' > m.py && \
             git add -A && git -c user.name=t -c user.email=t@t commit -qm base && git tag base && \
             printf 'y\\n' >> big.txt && printf 'z\\n' > m.py && \
             git -c user.name=t -c user.email=t@t commit -qam opt && git tag opt",
        );
        let copy = host_git::import_folder(&repo, &work.as_path().join("cache")).unwrap();
        let e = format!("{:#}", human_diff(&copy, "base", "opt", 4096).unwrap_err());
        assert!(
            e.contains("the files it changes hold 6006 bytes, more than the 4096 bytes"),
            "{e}"
        );
        let d = human_diff(&copy, "base", "opt", 1 << 20).unwrap();
        assert!(d.contains("-x\n+z") && d.contains("+++ b/big.txt"), "{d}");
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
