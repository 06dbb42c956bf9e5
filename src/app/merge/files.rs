//! What a merge reads and copies of a part. A part is another machine's output, so where
//! the merge reads it holds only folders and regular files of at most
//! [`MAX_PART_FILE_BYTES`]: a link could lead the merge outside the part, a FIFO named
//! `report.json` would hang its read forever (on 37adbf2 it did), and a sparse file of any
//! size costs its maker nothing but would be read into memory by the reports and written out
//! whole (a sparse 2 GiB file took 2 GiB of disk after the merge). Files are opened without
//! following a link or waiting on a FIFO, and copied with their holes kept: the merged run
//! takes no more disk than the parts.

use std::path::Path;

use anyhow::{Context, Result, bail};

/// The largest file a part may hold where the merge reads: far above what a run writes
/// (logs are cut at 1 MiB, a patch at 20 MiB), far below what would hurt.
pub const MAX_PART_FILE_BYTES: u64 = 256 << 20;

/// Refuses `path` unless it is absent, a folder or a regular file of at most
/// [`MAX_PART_FILE_BYTES`]: never a link, a FIFO, a socket or a device.
pub(super) fn check_entry(path: &Path) -> Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot stat", path.display())),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        bail!(
            "{}: is a symlink; a part's files must be in its folder (refusing to merge this part)",
            path.display()
        );
    }
    if kind.is_dir() {
        return Ok(());
    }
    if !kind.is_file() {
        bail!(
            "{}: is not a regular file (a FIFO, socket or device); a part holds only files and \
             folders (refusing to merge this part)",
            path.display()
        );
    }
    if meta.len() > MAX_PART_FILE_BYTES {
        bail!(
            "{}: {} bytes, more than the {} MiB a file of a part may hold (a run writes far \
             less; refusing to merge this part)",
            path.display(),
            meta.len(),
            MAX_PART_FILE_BYTES >> 20
        );
    }
    Ok(())
}

/// Checks every entry the merge reads of a part ([`check_entry`]): its model folder, each
/// instance's folder and everything under it, the build logs.
pub(super) fn check_part_files(
    dir: &Path,
    model_dir: &Path,
    images: &str,
    instance_ids: &[String],
) -> Result<()> {
    check_entry(model_dir)?;
    check_entry(&dir.join(images))?;
    for id in instance_ids {
        check_entry(&dir.join(images).join(format!("{id}.build.log")))?;
        // Iterative: a deep tree cannot exhaust the stack.
        let mut stack = vec![model_dir.join(id)];
        while let Some(p) = stack.pop() {
            check_entry(&p)?;
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                for e in std::fs::read_dir(&p)
                    .with_context(|| format!("{}: cannot list", p.display()))?
                {
                    stack.push(
                        e.with_context(|| format!("{}: cannot list", p.display()))?
                            .path(),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Copies `from` (a folder) to `to`, files and folders, folders made as needed; anything
/// else is refused (the parts were checked; this holds if one appears meanwhile).
pub(super) fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("{}: cannot create", to.display()))?;
    let entries =
        std::fs::read_dir(from).with_context(|| format!("{}: cannot list", from.display()))?;
    for e in entries {
        let e = e.with_context(|| format!("{}: cannot list", from.display()))?;
        let src = e.path();
        let dst = to.join(e.file_name());
        let kind = e
            .file_type()
            .with_context(|| format!("{}: cannot stat", src.display()))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            copy_file(&src, &dst)?;
        }
    }
    Ok(())
}

/// Copies one regular file of at most [`MAX_PART_FILE_BYTES`], following no symlink at
/// either end and never waiting on a FIFO: `from` is opened with `O_NOFOLLOW | O_NONBLOCK`
/// and must then be a regular file, `to` must not exist yet (it is made new in the merge's
/// own folder). Holes stay holes.
pub(super) fn copy_file(from: &Path, to: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    check_entry(from)?;
    let what = || format!("{}: cannot copy to {}", from.display(), to.display());
    let src = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)
        .with_context(what)?;
    let meta = src.metadata().with_context(what)?;
    if !meta.is_file() || meta.len() > MAX_PART_FILE_BYTES {
        bail!(
            "{}: not a regular file of at most {} MiB (refusing to merge this part)",
            from.display(),
            MAX_PART_FILE_BYTES >> 20
        );
    }
    let dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .with_context(what)?;
    copy_sparse(&src, &dst, meta.len()).with_context(what)
}

/// Copies the first `len` bytes of `src` to `dst`, only the parts that hold data
/// (`SEEK_DATA`/`SEEK_HOLE`); what is left a hole in `src` is left one in `dst`.
fn copy_sparse(src: &std::fs::File, dst: &std::fs::File, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    let seek = |from: u64, whence: i32| -> std::io::Result<Option<u64>> {
        // SAFETY: lseek on a descriptor `src` keeps open; it moves only that offset.
        let at = unsafe { libc::lseek(src.as_raw_fd(), from as libc::off_t, whence) };
        if at >= 0 {
            return Ok(Some(at as u64));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            // No data from here on: the rest is a hole.
            Some(libc::ENXIO) => Ok(None),
            // A file system that cannot say: all of it is data.
            Some(libc::EINVAL) if whence == libc::SEEK_DATA => Ok(Some(from)),
            Some(libc::EINVAL) => Ok(Some(len)),
            _ => Err(e),
        }
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0;
    while pos < len {
        let Some(start) = seek(pos, libc::SEEK_DATA)? else {
            break;
        };
        let end = seek(start, libc::SEEK_HOLE)?.unwrap_or(len).min(len);
        let mut at = start;
        while at < end {
            let want = buf.len().min((end - at) as usize);
            let n = src.read_at(&mut buf[..want], at)?;
            if n == 0 {
                break; // the file shrank: what is left is not there to copy
            }
            dst.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
        pos = end.max(start + 1);
    }
    dst.set_len(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A file with 8 MiB of holes and two pieces of data is copied byte for byte, and the
    /// copy takes the blocks of its data only.
    #[test]
    fn holes_stay_holes() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        let f = std::fs::File::create(&from).unwrap();
        f.set_len(8 << 20).unwrap();
        f.write_all_at(b"head", 0).unwrap();
        f.write_all_at(b"middle", 4 << 20).unwrap();
        drop(f);
        assert!(
            std::fs::metadata(&from).unwrap().blocks() < (8 << 20) / 512,
            "this file system keeps holes"
        );
        copy_file(&from, &to).unwrap();
        assert_eq!(std::fs::read(&from).unwrap(), std::fs::read(&to).unwrap());
        let (a, b) = (
            std::fs::metadata(&from).unwrap(),
            std::fs::metadata(&to).unwrap(),
        );
        assert_eq!(b.len(), 8 << 20);
        assert!(
            b.blocks() <= a.blocks().max(64),
            "the copy took {} blocks for {} of the original",
            b.blocks(),
            a.blocks()
        );
    }
}
