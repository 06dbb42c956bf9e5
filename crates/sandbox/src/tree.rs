//! A task's source tree read one entry at a time, within limits.
//!
//! A dataset's repository is small on disk and can be huge once read: a 1 MiB bundle holds a
//! 1 GiB blob of zeros (on 37adbf2 `harness tasks` held such a tree in memory twice and
//! more, 3.0 GiB). So the tree is streamed: `git archive` writes into a pipe read entry by
//! entry (never its whole output), git itself streams every blob over 1 MiB when it clones
//! and archives (`core.bigFileThreshold`), a folder's files are read one at a time, and whoever reads
//! decides where each file's bytes go (`harness tasks` writes them to disk or hashes them,
//! a build keeps them). Whatever the reader, a tree of more than [`MAX_TREE_BYTES`] of files
//! or [`MAX_TREE_ENTRIES`] entries is refused, by the size a file's header states before a
//! byte of it is read. Paths are checked as they come (plain, each once, none under a
//! symlink of the tree), so nothing is written where the tree leads.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::host_git;

/// The most bytes of files a task's source tree may hold (at base, with its `[image]
/// files`): a build holds the tree in memory (and its build context once more).
pub const MAX_TREE_BYTES: u64 = 1 << 30;
/// The most files, symlinks and folders a task's source tree may hold.
pub const MAX_TREE_ENTRIES: usize = 1_000_000;
/// The most bytes of paths (all of them together) a task's source tree may hold.
pub const MAX_TREE_PATH_BYTES: u64 = 64 << 20;

/// One entry of a tree, as it is read.
pub enum Item<'a> {
    /// A regular file: `size` bytes, read from `data` (at most `size`).
    File {
        path: &'a str,
        mode: u32,
        size: u64,
        data: &'a mut dyn Read,
    },
    Symlink {
        path: &'a str,
        target: &'a str,
    },
}

impl Item<'_> {
    pub fn path(&self) -> &str {
        match self {
            Item::File { path, .. } | Item::Symlink { path, .. } => path,
        }
    }
}

/// What the reader does with each entry.
pub type Visit<'v> = dyn FnMut(Item<'_>) -> Result<()> + 'v;

/// The budget of one tree: bytes and entries left.
pub struct Budget {
    bytes: u64,
    entries: usize,
    path_bytes: u64,
    limits: (u64, usize),
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(MAX_TREE_BYTES, MAX_TREE_ENTRIES)
    }
}

impl Budget {
    /// A budget of `bytes` and `entries`.
    pub fn new(bytes: u64, entries: usize) -> Budget {
        Budget {
            bytes,
            entries,
            path_bytes: MAX_TREE_PATH_BYTES,
            limits: (bytes, entries),
        }
    }

    /// Takes one entry of `size` bytes, or says which limit it passes.
    pub fn take(&mut self, path: &str, size: u64) -> Result<()> {
        if self.entries == 0 {
            bail!(
                "it holds more than {} entries, the most a task's source may hold (passed at \
                 {path:?}; refused)",
                self.limits.1
            );
        }
        self.entries -= 1;
        if path.len() as u64 > self.path_bytes {
            bail!(
                "its paths hold more than {} MiB, the most a task's source may hold (refused)",
                MAX_TREE_PATH_BYTES >> 20
            );
        }
        self.path_bytes -= path.len() as u64;
        if size > self.bytes {
            bail!(
                "it holds more than {} MiB of files, the most a task's source may hold (passed \
                 at {path:?}, of {size} bytes; refused)",
                self.limits.0 >> 20
            );
        }
        self.bytes -= size;
        Ok(())
    }
}

/// Paths checked as they come: plain and relative (no `.`, `..` or empty part), each once,
/// none under a symlink of the tree, in whichever order the two come. Paths are kept as
/// 128-bit digests (16 bytes each, whatever their length).
#[derive(Default)]
pub struct PathCheck {
    seen: HashSet<[u8; 16]>,
    links: HashSet<[u8; 16]>,
    /// Every folder some path lies in.
    folders: HashSet<[u8; 16]>,
}

/// The keys of `path`'s folders and of `path` itself, in order: each the digest of its
/// folder's key and its own name (so a deep path costs its length, not its length times
/// its depth).
fn keys(path: &str) -> Vec<[u8; 16]> {
    use sha2::Digest;
    let mut out: Vec<[u8; 16]> = Vec::new();
    for part in path.split('/') {
        let mut h = sha2::Sha256::new();
        h.update(out.last().copied().unwrap_or_default());
        h.update(part.as_bytes());
        let mut k = [0u8; 16];
        k.copy_from_slice(&h.finalize()[..16]);
        out.push(k);
    }
    out
}

impl PathCheck {
    pub fn check(&mut self, p: &str, is_link: bool) -> Result<()> {
        let plain = !p.is_empty()
            && !p.contains('\0')
            && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
        if !plain {
            bail!("{p:?} is not a plain relative path");
        }
        let mut keys = keys(p);
        let Some(own) = keys.pop() else {
            bail!("{p:?} is not a plain relative path");
        };
        if !self.seen.insert(own) {
            bail!("{p:?} is in the tree twice");
        }
        for (folder, (i, _)) in keys.into_iter().zip(p.match_indices('/')) {
            if self.links.contains(&folder) {
                bail!("{p:?} lies under {:?}, a symlink of the tree", &p[..i]);
            }
            self.folders.insert(folder);
        }
        if is_link {
            if self.folders.contains(&own) {
                bail!("a path of the tree lies under {p:?}, a symlink of the tree");
            }
            self.links.insert(own);
        }
        Ok(())
    }
}

/// Checks `item`'s path and takes it from the budget, then hands it on.
fn pass(
    item: Item<'_>,
    check: &mut PathCheck,
    budget: &mut Budget,
    visit: &mut Visit,
) -> Result<()> {
    let (is_link, size) = match &item {
        Item::File { size, .. } => (false, *size),
        Item::Symlink { .. } => (true, 0),
    };
    check.check(item.path(), is_link)?;
    budget.take(item.path(), size)?;
    visit(item)
}

/// Every file and symlink of `commit` in the harness's copy of a repository (`repo`), as
/// `git archive` streams it.
pub fn visit_git(repo: &Path, commit: &str, budget: &mut Budget, visit: &mut Visit) -> Result<()> {
    let mut child = host_git::spawn_reading(
        repo,
        &[
            "-c",
            "core.bigFileThreshold=1m",
            "archive",
            "--format=tar",
            "--end-of-options",
            commit,
        ],
    )?;
    let read = read_tar(child.stdout(), budget, visit);
    child.finish(read)
}

fn read_tar(out: &mut dyn Read, budget: &mut Budget, visit: &mut Visit) -> Result<()> {
    let mut check = PathCheck::default();
    let mut archive = tar::Archive::new(out);
    for e in archive.entries().context("reading git archive")? {
        let mut e = e.context("reading git archive")?;
        let path = e
            .path()
            .context("reading git archive")?
            .to_string_lossy()
            .trim_end_matches('/')
            .to_string();
        let header = e.header();
        let kind = header.entry_type();
        let mode = header.mode().unwrap_or(0o644);
        if kind == tar::EntryType::Regular {
            let size = e.size();
            let item = Item::File {
                path: &path,
                mode,
                size,
                data: &mut e,
            };
            pass(item, &mut check, budget, visit)?;
        } else if kind == tar::EntryType::Symlink {
            let target = e
                .link_name()
                .context("reading git archive")?
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let item = Item::Symlink {
                path: &path,
                target: &target,
            };
            pass(item, &mut check, budget, visit)?;
        } else if kind == tar::EntryType::Directory {
            budget.take(&path, 0)?;
        }
    }
    Ok(())
}

/// Every file and symlink of the folder `root` (not `.git`), each file opened without
/// following a link or waiting on a FIFO, and read at most to the size it had when listed.
pub fn visit_folder(root: &Path, budget: &mut Budget, visit: &mut Visit) -> Result<()> {
    let mut check = PathCheck::default();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let listing =
            std::fs::read_dir(&dir).with_context(|| format!("{}: cannot list", dir.display()))?;
        for entry in listing {
            let entry = entry.with_context(|| format!("{}: cannot list", dir.display()))?;
            if entry.file_name() == ".git" {
                continue;
            }
            let path = entry.path();
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
                let target = target.to_string_lossy();
                let item = Item::Symlink {
                    path: &rel,
                    target: &target,
                };
                pass(item, &mut check, budget, visit)?;
            } else if meta.is_dir() {
                budget.take(&rel, 0)?;
                stack.push(path);
            } else if meta.is_file() {
                use std::os::unix::fs::PermissionsExt;
                let size = meta.len();
                // Checked against the budget before it is opened.
                budget.take(&rel, size)?;
                check.check(&rel, false)?;
                let mut data = open_regular(&path)?.take(size);
                visit(Item::File {
                    path: &rel,
                    mode: meta.permissions().mode() & 0o777,
                    size,
                    data: &mut data,
                })?;
            }
        }
    }
    Ok(())
}

/// `path` opened for reading if it is a regular file: never through a link, never waiting
/// on a FIFO.
pub fn open_regular(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("{}: cannot stat", path.display()))?;
    if !meta.is_file() {
        bail!("{}: not a regular file", path.display());
    }
    Ok(file)
}

/// The bytes of a regular file of at most `limit` bytes (`what` names it in the error).
pub fn read_capped(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    let file = open_regular(path)?;
    let size = file
        .metadata()
        .with_context(|| format!("{}: cannot stat", path.display()))?
        .len();
    if size > limit {
        bail!(
            "{}: {what} of {size} bytes, more than the {} MiB the harness reads",
            path.display(),
            limit >> 20
        );
    }
    let mut data = Vec::with_capacity(size as usize);
    file.take(limit)
        .read_to_end(&mut data)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_plain_once_and_never_under_a_link_in_either_order() {
        let mut c = PathCheck::default();
        assert!(c.check("a/b", false).is_ok());
        assert!(c.check("c", true).is_ok());
        for (p, link, why) in [
            ("a/b", false, "twice"),
            ("c/x", false, "symlink of the tree"),
            ("a", true, "symlink of the tree"),
            ("../x", false, "plain relative"),
            ("/etc/x", false, "plain relative"),
            ("a//x", false, "plain relative"),
            ("", false, "plain relative"),
        ] {
            let e = c.check(p, link).unwrap_err().to_string();
            assert!(e.contains(why), "{p}: {e}");
        }
    }

    #[test]
    fn a_budget_refuses_by_the_stated_size_and_the_count() {
        let mut b = Budget::new(3 << 20, 3);
        assert!(b.take("a", 2 << 20).is_ok());
        let e = b.take("big", (1 << 20) + 1).unwrap_err().to_string();
        assert!(
            e.contains("more than 3 MiB") && e.contains("\"big\""),
            "{e}"
        );
        assert!(b.take("b", 1 << 20).is_ok());
        let e = b.take("c", 0).unwrap_err().to_string();
        assert!(e.contains("more than 3 entries"), "{e}");
    }

    /// A folder's FIFO is never opened (a read would wait forever), a file read once it is
    /// listed is read only to its listed size, and a file over the budget is refused before
    /// a byte of it is read.
    #[test]
    fn a_folder_is_read_file_by_file_within_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small"), "abc").unwrap();
        let fifo = std::ffi::CString::new(dir.path().join("fifo").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let mut seen = Vec::new();
        visit_folder(dir.path(), &mut Budget::new(3, 10), &mut |item| {
            if let Item::File { path, data, .. } = item {
                let mut s = String::new();
                data.read_to_string(&mut s)?;
                seen.push(format!("{path}={s}"));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, ["small=abc"]);
        let big = std::fs::File::create(dir.path().join("big")).unwrap();
        big.set_len(1 << 40).unwrap();
        let e = visit_folder(dir.path(), &mut Budget::default(), &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 1024 MiB of files"), "{e}");
        let e = read_capped(&dir.path().join("big"), 1 << 20, "a patch")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a patch of 1099511627776 bytes"), "{e}");
        let e = read_capped(&dir.path().join("fifo"), 1 << 20, "a patch")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }
}
