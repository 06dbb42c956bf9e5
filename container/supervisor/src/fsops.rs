//! What root does to files for the harness's programs (which run as the unprivileged warden,
//! see `broker`): hand a file to an owner with a mode, remove one, open one for reading.
//! Only inside the tree and the sandbox user's home, and never through a symlink: every
//! folder on the way is opened with O_NOFOLLOW from the root it is under, and the last
//! name is acted on relative to its folder without following it.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::sys::{self, Result};

/// The folders root acts in for the warden.
pub struct Roots(pub Vec<String>);

/// The harness's configuration in the container (root's): it names the sandbox user's home.
const CONFIG: &str = "/opt/harness/config.json";

impl Roots {
    /// [`Roots::from_config`] of the harness's own configuration.
    pub fn from_harness_config() -> Roots {
        Roots::from_config(CONFIG)
    }

    /// The tree and the sandbox user's home, from the harness's configuration (root's).
    pub fn from_config(config: &str) -> Roots {
        let home = std::fs::read_to_string(config)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["home"].as_str().map(str::to_string))
            .unwrap_or_else(|| "/home/harnessrun".into());
        Roots(vec!["/testbed".into(), home])
    }

    /// The folder `path` is under (its descriptor) and the names from there to it.
    fn split<'a>(&self, path: &'a str) -> Result<(&str, Vec<&'a str>)> {
        let root = self
            .0
            .iter()
            .find(|r| path == r.as_str() || path.starts_with(&format!("{r}/")))
            .ok_or_else(|| format!("{path}: not in the tree or the sandbox user's home"))?;
        let names: Vec<&str> = path[root.len()..]
            .split('/')
            .filter(|n| !n.is_empty() && *n != ".")
            .collect();
        if names.contains(&"..") {
            return Err(format!("{path}: `..` is not allowed"));
        }
        Ok((root, names))
    }
}

fn cname(name: &str) -> Result<CString> {
    sys::cstr(name)
}

fn openat(dir: libc::c_int, name: &str, flags: libc::c_int) -> Result<OwnedFd> {
    let c = cname(name)?;
    // SAFETY: a valid descriptor (or AT_FDCWD) and C string.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
    if fd < 0 {
        return Err(format!("open {name}: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor this process just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The folder holding `path` (opened without following a symlink anywhere) and the last
/// name; the root itself when `path` is a root (with "." as the name).
fn parent_of(roots: &Roots, path: &str) -> Result<(OwnedFd, String)> {
    let (root, names) = roots.split(path)?;
    let mut dir = openat(libc::AT_FDCWD, root, libc::O_PATH | libc::O_DIRECTORY)?;
    let Some((last, folders)) = names.split_last() else {
        return Ok((dir, ".".into()));
    };
    for name in folders {
        dir = openat(dir.as_raw_fd(), name, libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| format!("{path}: {e}"))?;
    }
    Ok((dir, last.to_string()))
}

fn lstat_at(dir: &OwnedFd, name: &str) -> Result<libc::stat> {
    let c = cname(name)?;
    // SAFETY: stat is plain old data, filled in by fstatat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor, C string and out-pointer.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH,
        )
    };
    if rc != 0 {
        return Err(format!("stat {name}: {}", std::io::Error::last_os_error()));
    }
    Ok(st)
}

/// Gives `path` to `uid:gid` and, unless it is a symlink, sets `mode` (when given).
pub fn chown(roots: &Roots, path: &str, uid: u32, gid: u32, mode: Option<u32>) -> Result<()> {
    let (dir, name) = parent_of(roots, path)?;
    let c = cname(&name)?;
    // SAFETY: a valid descriptor and C string; the last name is not followed.
    let rc = unsafe {
        libc::fchownat(
            dir.as_raw_fd(),
            c.as_ptr(),
            uid,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(format!("chown {path}: {}", std::io::Error::last_os_error()));
    }
    let Some(mode) = mode else { return Ok(()) };
    if lstat_at(&dir, &name)?.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Ok(());
    }
    // Through a descriptor of the file itself (O_PATH, not followed): chmod of its
    // /proc/self/fd link acts on that inode and no other.
    let file = openat(dir.as_raw_fd(), &name, libc::O_PATH)?;
    let link = format!("/proc/self/fd/{}", file.as_raw_fd());
    let c = cname(&link)?;
    // SAFETY: a valid C string.
    if unsafe { libc::chmod(c.as_ptr(), mode) } != 0 {
        return Err(format!("chmod {path}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Removes `path` (a folder with everything in it), never following a symlink: whether it
/// was there.
pub fn remove(roots: &Roots, path: &str) -> Result<bool> {
    let (dir, name) = parent_of(roots, path)?;
    if name == "." {
        return Err(format!("{path}: a root is not removed"));
    }
    match lstat_at(&dir, &name) {
        Err(_) => Ok(false),
        Ok(st) => remove_at(&dir, &name, &st).map(|_| true),
    }
}

fn remove_at(dir: &OwnedFd, name: &str, st: &libc::stat) -> Result<()> {
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        let inner = openat(dir.as_raw_fd(), name, libc::O_RDONLY | libc::O_DIRECTORY)?;
        for entry in list(&inner)? {
            if let Ok(est) = lstat_at(&inner, &entry) {
                remove_at(&inner, &entry, &est)?;
            }
        }
    }
    let c = cname(name)?;
    let flags = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        libc::AT_REMOVEDIR
    } else {
        0
    };
    // SAFETY: a valid descriptor and C string.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) } != 0 {
        return Err(format!(
            "remove {name}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The names in an open folder.
fn list(dir: &OwnedFd) -> Result<Vec<String>> {
    let copy = openat(dir.as_raw_fd(), ".", libc::O_RDONLY | libc::O_DIRECTORY)?;
    // SAFETY: fdopendir takes the descriptor over (closed by closedir).
    let stream = unsafe { libc::fdopendir(copy.as_raw_fd()) };
    if stream.is_null() {
        return Err(format!("list: {}", std::io::Error::last_os_error()));
    }
    std::mem::forget(copy);
    let mut names = Vec::new();
    loop {
        // SAFETY: a valid stream; the entry is read before the next call.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: d_name is a NUL-terminated string inside the entry.
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
        let name = name.to_string_lossy().into_owned();
        if name != "." && name != ".." {
            names.push(name);
        }
    }
    // SAFETY: the stream opened above.
    unsafe { libc::closedir(stream) };
    Ok(names)
}

/// Bytes `path` and everything under it take on disk (st_blocks), symlinks not followed.
pub fn du(roots: &Roots, path: &str) -> Result<u64> {
    let (dir, name) = parent_of(roots, path)?;
    let st = lstat_at(&dir, &name)?;
    Ok(du_at(&dir, &name, &st, 0))
}

fn du_at(dir: &OwnedFd, name: &str, st: &libc::stat, depth: usize) -> u64 {
    let mut total = st.st_blocks as u64 * 512;
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR
        && depth < 4096
        && let Ok(inner) = openat(dir.as_raw_fd(), name, libc::O_RDONLY | libc::O_DIRECTORY)
    {
        for entry in list(&inner).unwrap_or_default() {
            if let Ok(est) = lstat_at(&inner, &entry) {
                total += du_at(&inner, &entry, &est, depth + 1);
            }
        }
    }
    total
}

/// Bytes of files deleted but still held open by a process of this container, on the file
/// system of the tree or the home: what a walk of them cannot see (an install that unlinks
/// each file it writes and keeps it open would hold any amount of disk past its limit).
/// Files elsewhere (the tmpfs, charged to memory) are not counted; each file once.
///
/// A process's descriptors are readable by its own user alone without CAP_SYS_PTRACE,
/// which the container does not have: the count runs with the file-system identity of
/// `uid`:`gid` (the sandbox user), root's own again after it.
pub fn held_deleted(roots: &Roots, uid: u32, gid: u32) -> u64 {
    let devices: Vec<u64> = roots
        .0
        .iter()
        .filter_map(|r| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(r).ok().map(|m| m.dev())
        })
        .collect();
    // SAFETY: plain calls on this thread's credentials; both are set back below.
    unsafe {
        libc::setfsgid(gid);
        libc::setfsuid(uid);
    }
    let total = held_on(&devices);
    // SAFETY: as above; root may always take its own identity back.
    unsafe {
        libc::setfsuid(0);
        libc::setfsgid(0);
    }
    total
}

fn held_on(devices: &[u64]) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for p in procs.flatten() {
        if !p
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let path = fd.path();
            let deleted = std::fs::read_link(&path)
                .is_ok_and(|t| t.to_string_lossy().ends_with(" (deleted)"));
            if !deleted {
                continue;
            }
            // Through the descriptor's link: the file itself, whatever its name was.
            let Ok(m) = std::fs::metadata(&path) else {
                continue;
            };
            if m.is_file() && devices.contains(&m.dev()) && seen.insert((m.dev(), m.ino())) {
                total = total.saturating_add(m.blocks().saturating_mul(512));
            }
        }
    }
    total
}

/// A descriptor of `path` opened for reading (a folder's for listing), never through a
/// symlink and never waiting (a FIFO under a watched name would block the reader).
pub fn open(roots: &Roots, path: &str) -> Result<OwnedFd> {
    let (dir, name) = parent_of(roots, path)?;
    openat(
        dir.as_raw_fd(),
        &name,
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
    )
    .map_err(|e| format!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(dir: &std::path::Path) -> Roots {
        Roots(vec![dir.to_string_lossy().into_owned()])
    }

    #[test]
    fn no_symlink_is_followed_and_nothing_outside_is_reached() {
        let base = std::env::temp_dir().join(format!("fsops-{}", std::process::id()));
        let tree = base.join("tree");
        let outside = base.join("outside");
        std::fs::create_dir_all(tree.join("a")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        std::fs::write(tree.join("a/f"), "f").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("link")).unwrap();
        let r = roots(&tree);
        let t = tree.to_string_lossy().into_owned();
        // Through a symlinked folder: refused.
        assert!(open(&r, &format!("{t}/link/secret")).is_err());
        assert!(remove(&r, &format!("{t}/link/secret")).is_err());
        assert!(outside.join("secret").exists());
        // The symlink itself is removed, not what it leads to.
        assert!(remove(&r, &format!("{t}/link")).unwrap());
        assert!(outside.join("secret").exists());
        // `..` and paths outside every root: refused.
        assert!(open(&r, &format!("{t}/../outside/secret")).is_err());
        assert!(open(&r, &outside.join("secret").to_string_lossy()).is_err());
        // A regular file opens; a folder is removed with what it holds.
        use std::io::Read;
        let mut s = String::new();
        std::fs::File::from(open(&r, &format!("{t}/a/f")).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "f");
        chown(
            &r,
            &format!("{t}/a/f"),
            unsafe { libc::getuid() },
            unsafe { libc::getgid() },
            Some(0o600),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tree.join("a/f"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(remove(&r, &format!("{t}/a")).unwrap());
        assert!(!tree.join("a").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
