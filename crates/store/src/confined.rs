//! Writes inside a results folder that never go through a link.
//!
//! A run folder can come from elsewhere (a partition node's, a colleague's, one unpacked
//! from an archive), and a link in it (`rollouts -> /home/me`, a model folder pointing out)
//! would send a write, a rename or a removal wherever it points. Every write of the run
//! store goes through a [`Confined`] folder: from its root down, each folder is opened
//! relative to the one above with `O_NOFOLLOW` (`openat`), created the same way when
//! missing, and the file is written as a temp file in the folder that was opened, then
//! renamed in that same folder. So a link anywhere under the root is never followed, even
//! one put there between a check and the write: the write is refused, naming the link.
//! What lies above the root (the user's own paths) may be reached through links. The
//! writers that take a path instead (the evaluation's sample files, the image build's log)
//! get one that [`Confined::check`] passed before any container starts.

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use serde::Serialize;

/// A folder the store writes in, and under which no link is ever followed.
#[derive(Debug, Clone)]
pub struct Confined {
    root: PathBuf,
    /// The root itself may be a link (a results folder the user keeps on another disk);
    /// otherwise (a run folder) it must be a folder itself.
    root_may_be_link: bool,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOFOLLOW);

impl Confined {
    /// A run (or batch) folder: it, and every folder and file in it, must be itself, not a
    /// link.
    pub fn folder(root: &Path) -> Confined {
        Confined {
            root: root.to_path_buf(),
            root_may_be_link: false,
        }
    }

    /// A folder the user named (the results folder): reached however the user's path goes,
    /// but nothing under it through a link.
    pub fn beneath(root: &Path) -> Confined {
        Confined {
            root: root.to_path_buf(),
            root_may_be_link: true,
        }
    }

    /// Writes a file whole or not at all (a temp file beside it, then a rename), creating
    /// the folders on the way; refused when the path or a folder on the way is a link.
    pub fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let (folders, name) = self.split(path)?;
        let dir = self.descend(&folders)?;
        refuse_link_at(&dir, name, path, &self.root)?;
        let (tmp, file) = temp_file(&dir, path)?;
        let written = (|| -> std::io::Result<()> {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(0o644))?;
            let mut file = std::fs::File::from(file);
            file.write_all(bytes)?;
            file.sync_all()
        })();
        let renamed = written.and_then(|()| Ok(rustix::fs::renameat(&dir, &tmp, &dir, name)?));
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty());
            return Err(e).with_context(|| format!("{}: cannot write", path.display()));
        }
        Ok(())
    }

    pub fn write_json<T: Serialize>(&self, path: &Path, value: &T) -> Result<()> {
        let mut text = serde_json::to_string_pretty(value).context("cannot serialise")?;
        text.push('\n');
        self.write_atomic(path, text.as_bytes())
    }

    /// Makes the folder and every folder on the way that is missing; refused when one of
    /// them is a link.
    pub fn create_dir_all(&self, path: &Path) -> Result<()> {
        let rel = self.relative(path)?;
        self.descend(&rel).map(drop)
    }

    /// Refuses when what exists of `path` (its folders, the file itself) holds a link; what
    /// is missing is fine (it will be made as a folder or file, never a link). For a path a
    /// writer outside the store will open.
    pub fn check(&self, path: &Path) -> Result<()> {
        let (folders, name) = self.split(path)?;
        match self.descend_existing(&folders)? {
            Some(dir) => refuse_link_at(&dir, name, path, &self.root),
            None => Ok(()),
        }
    }

    /// The entries of a folder (their paths); none when it is missing; refused when it or a
    /// folder on the way is a link.
    pub fn entries(&self, path: &Path) -> Result<Vec<PathBuf>> {
        let rel = self.relative(path)?;
        let Some(dir) = self.descend_existing(&rel)? else {
            return Ok(Vec::new());
        };
        let names = names_in(&dir).with_context(|| format!("{}: cannot list", path.display()))?;
        Ok(names.into_iter().map(|n| path.join(n)).collect())
    }

    /// Removes a file, a link (the link itself) or a whole folder, never following a link;
    /// nothing when it is missing.
    pub fn remove(&self, path: &Path) -> Result<()> {
        let (folders, name) = self.split(path)?;
        let Some(dir) = self.descend_existing(&folders)? else {
            return Ok(());
        };
        remove_at(&dir, name).with_context(|| format!("{}: cannot remove", path.display()))
    }

    /// `path`'s components under the root: only plain names (no `..`, no root).
    fn relative<'a>(&self, path: &'a Path) -> Result<Vec<&'a OsStr>> {
        let rest = path.strip_prefix(&self.root).with_context(|| {
            format!(
                "{}: not inside {}, where this write belongs",
                path.display(),
                self.root.display()
            )
        })?;
        let mut names = Vec::new();
        for c in rest.components() {
            match c {
                Component::Normal(n) => names.push(n),
                Component::CurDir => {}
                _ => bail!(
                    "{}: leaves {} (only plain names below it)",
                    path.display(),
                    self.root.display()
                ),
            }
        }
        Ok(names)
    }

    /// The folders above `path` and its own name.
    fn split<'a>(&self, path: &'a Path) -> Result<(Vec<&'a OsStr>, &'a OsStr)> {
        let mut rel = self.relative(path)?;
        let name = rel.pop().with_context(|| {
            format!(
                "{}: names the folder itself, not a file in it",
                path.display()
            )
        })?;
        Ok((rel, name))
    }

    fn open_root(&self, create: bool) -> Result<Option<OwnedFd>> {
        let flags = if self.root_may_be_link {
            DIR_FLAGS.difference(OFlags::NOFOLLOW)
        } else {
            DIR_FLAGS
        };
        let open = || rustix::fs::open(&self.root, flags, Mode::empty());
        let is_link =
            || std::fs::symlink_metadata(&self.root).is_ok_and(|m| m.file_type().is_symlink());
        match open() {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT) if create => {
                std::fs::create_dir_all(&self.root)
                    .with_context(|| format!("{}: cannot create", self.root.display()))?;
                open()
                    .map(Some)
                    .map_err(|e| self.why(&self.root, e, is_link()))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.why(&self.root, e, is_link())),
        }
    }

    /// Opens each folder of `rel` in the one above it, never through a link, making the
    /// missing ones.
    fn descend(&self, rel: &[&OsStr]) -> Result<OwnedFd> {
        self.walk(rel, true)?
            .with_context(|| format!("{}: no such folder", self.root.display()))
    }

    /// As [`Self::descend`] without making anything: None where a folder is missing.
    fn descend_existing(&self, rel: &[&OsStr]) -> Result<Option<OwnedFd>> {
        self.walk(rel, false)
    }

    fn walk(&self, rel: &[&OsStr], create: bool) -> Result<Option<OwnedFd>> {
        let Some(mut dir) = self.open_root(create)? else {
            return Ok(None);
        };
        let mut shown = self.root.clone();
        for name in rel {
            shown.push(name);
            let open = |dir: &OwnedFd| rustix::fs::openat(dir, *name, DIR_FLAGS, Mode::empty());
            let is_link = |dir: &OwnedFd| {
                rustix::fs::statat(dir, *name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
            };
            dir = match open(&dir) {
                Ok(fd) => fd,
                Err(Errno::NOENT) if !create => return Ok(None),
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&dir, *name, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(self.why(&shown, e, false)),
                    }
                    open(&dir).map_err(|e| self.why(&shown, e, is_link(&dir)))?
                }
                Err(e) => return Err(self.why(&shown, e, is_link(&dir))),
            };
        }
        Ok(Some(dir))
    }

    /// The error of opening `shown` as a folder: a link is named as one.
    fn why(&self, shown: &Path, e: Errno, is_link: bool) -> anyhow::Error {
        if is_link {
            return link_error(shown, &self.root);
        }
        anyhow::Error::new(std::io::Error::from(e))
            .context(format!("{}: cannot open as a folder", shown.display()))
    }
}

/// The error a link gets.
fn link_error(path: &Path, root: &Path) -> anyhow::Error {
    if path == root {
        return anyhow::anyhow!(
            "{}: is a symbolic link; a run folder is written only as itself, never through a \
             link (name the folder it points to instead)",
            path.display()
        );
    }
    anyhow::anyhow!(
        "{}: is a symbolic link; the harness writes nothing through a link in {} (a link \
         there could send the write anywhere): put the real folder or file in its place",
        path.display(),
        root.display()
    )
}

fn refuse_link_at(dir: &OwnedFd, name: &OsStr, shown: &Path, root: &Path) -> Result<()> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            Err(link_error(shown, root))
        }
        Ok(_) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(anyhow::Error::new(std::io::Error::from(e))
            .context(format!("{}: cannot read", shown.display()))),
    }
}

/// A new file in `dir`, created exclusively (never an existing file or link).
fn temp_file(dir: &OwnedFd, path: &Path) -> Result<(PathBuf, OwnedFd)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for _ in 0..100 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = PathBuf::from(format!(".tmp-harness-{}-{n}-{nanos}", std::process::id()));
        match rustix::fs::openat(dir, &name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EXIST) => continue,
            Err(e) => {
                return Err(anyhow::Error::new(std::io::Error::from(e)).context(format!(
                    "{}: cannot create a temp file beside it",
                    path.display()
                )));
            }
        }
    }
    bail!(
        "{}: cannot find a free temp file name beside it",
        path.display()
    )
}

/// The names in an open folder, but `.` and `..`.
fn names_in(dir: &OwnedFd) -> std::io::Result<Vec<PathBuf>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(PathBuf::from(OsStr::from_bytes(name)));
        }
    }
    Ok(names)
}

/// Removes `name` in `dir`: a folder with everything in it, each opened without following
/// a link; a link or file by itself.
fn remove_at(dir: &OwnedFd, name: &OsStr) -> std::io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?);
    }
    let sub = rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())?;
    for n in names_in(&sub)? {
        remove_at(&sub, n.as_os_str())?;
    }
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

#[cfg(test)]
#[path = "confined_tests.rs"]
mod tests;
