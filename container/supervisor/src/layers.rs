//! What a run wrote: the entries of its upper layers (the test's run reports them, and the
//! harness checks the watched ones: a conftest.py the test made, a start-up hook in home).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde_json::{Value, json};

/// No run's report lists more entries than this (it says when there were more).
const MAX_ENTRIES: usize = 20_000;

fn open_dir(dir: libc::c_int, name: &[u8]) -> Option<OwnedFd> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: a valid descriptor and C string.
    let fd = unsafe {
        libc::openat(
            dir,
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    // SAFETY: a descriptor this process just opened.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A name as every line that leaves the container carries it: its bytes that are not UTF-8
/// as `\xNN` (as Python's backslashreplace writes them; see timer_contract.py).
pub fn shown(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// (name's bytes, is a folder, is a whiteout: a deletion) of each entry of an open folder.
fn entries(dir: &OwnedFd) -> Vec<(Vec<u8>, bool, bool)> {
    let Some(copy) = open_dir(dir.as_raw_fd(), b".") else {
        return Vec::new();
    };
    // SAFETY: fdopendir takes the descriptor over (closed by closedir).
    let stream = unsafe { libc::fdopendir(copy.as_raw_fd()) };
    if stream.is_null() {
        return Vec::new();
    }
    std::mem::forget(copy);
    let mut out = Vec::new();
    loop {
        // SAFETY: a valid stream; the entry is read before the next call.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: fields of the entry readdir returned.
        let (name, kind) = unsafe {
            (
                std::ffi::CStr::from_ptr((*entry).d_name.as_ptr())
                    .to_bytes()
                    .to_vec(),
                (*entry).d_type,
            )
        };
        if name != b"." && name != b".." {
            out.push((name, kind == libc::DT_DIR, kind == libc::DT_CHR));
        }
    }
    // SAFETY: the stream opened above.
    unsafe { libc::closedir(stream) };
    out
}

/// Where -> the paths the run wrote there (folders it made or changed end in `/`, deleted
/// entries start with `-`), relative to where; `truncated` when there were more.
pub fn written(staging: &std::fs::File, layers: &[(String, String)]) -> Value {
    let mut out = serde_json::Map::new();
    let mut total = 0;
    for (point, upper) in layers {
        let mut paths = Vec::new();
        let Some(top) = open_dir(staging.as_raw_fd(), upper.as_bytes()) else {
            continue;
        };
        let mut stack = vec![(top, String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            for (name, is_dir, whiteout) in entries(&dir) {
                if total >= MAX_ENTRIES {
                    out.insert("truncated".into(), json!(true));
                    break;
                }
                let rel = format!("{prefix}{}", shown(&name));
                total += 1;
                if whiteout {
                    paths.push(format!("-{rel}"));
                } else if is_dir {
                    paths.push(format!("{rel}/"));
                    if let Some(inner) = open_dir(dir.as_raw_fd(), &name) {
                        stack.push((inner, format!("{rel}/")));
                    }
                } else {
                    paths.push(rel);
                }
            }
        }
        if !paths.is_empty() {
            paths.sort();
            out.insert(point.clone(), json!(paths));
        }
    }
    Value::Object(out)
}

/// Makes what `uid` wrote in the run's layers readable to others (files o+r, folders o+rx),
/// for the program after the run (the warden's diff of an agent's tree).
pub fn make_readable(staging: &std::fs::File, layers: &[(String, String)], uid: u32) {
    for (_, upper) in layers {
        let Some(top) = open_dir(staging.as_raw_fd(), upper.as_bytes()) else {
            continue;
        };
        let mut stack = vec![top];
        while let Some(dir) = stack.pop() {
            for (name, is_dir, _) in entries(&dir) {
                let Ok(c) = std::ffi::CString::new(name.as_slice()) else {
                    continue;
                };
                // SAFETY: stat is plain old data; a valid descriptor and C string.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                let ok = unsafe {
                    libc::fstatat(
                        dir.as_raw_fd(),
                        c.as_ptr(),
                        &mut st,
                        libc::AT_SYMLINK_NOFOLLOW,
                    )
                } == 0;
                if !ok || st.st_uid != uid || st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                    if is_dir && let Some(inner) = open_dir(dir.as_raw_fd(), &name) {
                        stack.push(inner);
                    }
                    continue;
                }
                let add = if is_dir { 0o005 } else { 0o004 };
                // SAFETY: a valid descriptor and C string; not a symlink (checked above).
                unsafe {
                    libc::fchmodat(dir.as_raw_fd(), c.as_ptr(), (st.st_mode & 0o7777) | add, 0);
                }
                if is_dir && let Some(inner) = open_dir(dir.as_raw_fd(), &name) {
                    stack.push(inner);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn a_name_not_utf8_is_shown_escaped_as_python_escapes_it() {
        assert_eq!(shown(b"x\xff/tox.ini"), "x\\xff/tox.ini");
        assert_eq!(shown("café.py".as_bytes()), "café.py");
        // b"\xe9" alone is no UTF-8: escaped; the same letter in UTF-8 is kept.
        assert_eq!(shown(b"caf\xe9.py"), "caf\\xe9.py");
    }
}
