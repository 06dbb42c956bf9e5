//! The harness's Python programs (timer, guard) run as the warden (see `broker`) with an
//! interpreter pinned when the image was built, never one found on the image's PATH:
//! `python3` there may be a file the sandbox user wrote (a virtualenv's `bin` first on PATH,
//! opened to the user).
//!
//! The image's lock step (container/programs/guard.py lock-image, run as root before any code under
//! test) records the interpreter it ran under and its standard library's folders in
//! `/opt/harness-build/interpreter.json`, and makes them root's and read-only to everyone
//! else. Before each start this checks that nobody but root can have changed them since:
//! the file and its library folders, and every folder above them, are root's and writable
//! by no one else. Then it execs the interpreter by its path, isolated (`-I -S`), in an
//! environment of the harness's own: no `LD_*` or other variable of the image reaches it.
//! The image's environment is handed to the program in `HARNESS_CHILD_ENV` (JSON), for the
//! commands it starts as the sandbox user.

use std::os::unix::fs::MetadataExt;

use crate::sys::{self, Result};

pub const RECORD: &str = "/opt/harness-build/interpreter.json";
/// Where the warden's interpreter keeps the bytecode of the harness's programs.
const PYCACHE: &str = "/opt/harness/var/pycache";
const SAFE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

pub struct Pinned {
    pub executable: String,
    pub library: Vec<String>,
}

pub fn load(path: &str) -> Result<Pinned> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read {path}: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let executable = v["executable"]
        .as_str()
        .ok_or_else(|| format!("{path}: no \"executable\""))?
        .to_string();
    let library = v["library"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Ok(Pinned {
        executable,
        library,
    })
}

/// Why `path` could have been changed by someone other than root, if it could: it or a
/// folder above it is not root's, is writable by group or others, or is a symlink.
pub fn not_roots(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some(format!("{path} is not an absolute path"));
    }
    let mut here = std::path::PathBuf::from(path);
    loop {
        let meta = match std::fs::symlink_metadata(&here) {
            Ok(m) => m,
            Err(e) => return Some(format!("{}: {e}", here.display())),
        };
        if meta.file_type().is_symlink() {
            return Some(format!("{} is a symlink", here.display()));
        }
        if meta.uid() != 0 {
            return Some(format!("{} belongs to uid {}", here.display(), meta.uid()));
        }
        if meta.mode() & 0o022 != 0 {
            return Some(format!(
                "{} is writable by others (mode {:o})",
                here.display(),
                meta.mode() & 0o7777
            ));
        }
        if !here.pop() {
            return None;
        }
    }
}

/// The environment the program runs in: the harness's variables, a fixed PATH, and the
/// image's whole environment as JSON for what the program starts.
pub fn clean_env() -> Vec<(String, String)> {
    let vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    // A program of the harness started by another (the test's timer, inside its sandbox)
    // hands on the image's environment it was given.
    let image = match vars.iter().find(|(k, _)| k == "HARNESS_CHILD_ENV") {
        Some((_, v)) => v.clone(),
        None => {
            let map: serde_json::Map<String, serde_json::Value> = vars
                .iter()
                .filter(|(k, _)| k != "HARNESS_NONCE" && k != "HARNESS_BENCH_SEEDS")
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect();
            serde_json::Value::Object(map).to_string()
        }
    };
    let mut env: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(k, _)| k.starts_with("HARNESS_") && k != "HARNESS_CHILD_ENV")
        .collect();
    env.push(("PATH".into(), SAFE_PATH.into()));
    env.push(("LC_ALL".into(), "C.UTF-8".into()));
    env.push(("HOME".into(), "/nonexistent".into()));
    env.push(("HARNESS_CHILD_ENV".into(), image));
    env
}

/// Execs the pinned interpreter on `script` as the warden (this process has become it),
/// under the supervisor's filter, with the broker's socket at `broker_fd`; returns only on
/// failure.
pub fn exec_as_warden(record: &str, script: &str, args: &[String], broker_fd: i32) -> String {
    let pinned = match load(record) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let own = [record.to_string(), script.to_string()];
    for path in own
        .iter()
        .chain(std::iter::once(&pinned.executable))
        .chain(&pinned.library)
    {
        if let Some(why) = not_roots(path) {
            return format!(
                "the harness's interpreter cannot be trusted: {why} (recorded in {record} \
                 when the image was built)"
            );
        }
    }
    // Bytecode of the harness's programs goes to the warden's own folder (the programs'
    // folder is root's): compiled once per container, not at every start.
    let mut argv = vec![
        pinned.executable.clone(),
        "-I".into(),
        "-S".into(),
        "-X".into(),
        format!("pycache_prefix={PYCACHE}"),
        script.to_string(),
    ];
    argv.extend(args.iter().cloned());
    let c_argv: Vec<std::ffi::CString> = match argv.iter().map(sys::cstr).collect() {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut env = clean_env();
    env.push(("HARNESS_BROKER_FD".into(), broker_fd.to_string()));
    let c_env: Vec<std::ffi::CString> = match env
        .into_iter()
        .map(|(k, v)| sys::cstr(format!("{k}={v}")))
        .collect()
    {
        Ok(v) => v,
        Err(e) => return e,
    };
    if let Err(e) = crate::seccomp::restrict() {
        return e;
    }
    let mut argp: Vec<*const libc::c_char> = c_argv.iter().map(|c| c.as_ptr()).collect();
    argp.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = c_env.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: NULL-terminated arrays of valid C strings; on success this does not return.
    unsafe {
        libc::execve(argp[0], argp.as_ptr(), envp.as_ptr());
    }
    format!(
        "cannot start {}: {}",
        pinned.executable,
        std::io::Error::last_os_error()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_anyone_may_change_is_refused() {
        let dir = std::env::temp_dir().join(format!("pin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("python3");
        std::fs::write(&file, "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = not_roots(file.to_str().unwrap()).unwrap();
        // Either not root's (tests as a user) or writable by others (tests as root).
        assert!(
            why.contains("belongs to uid") || why.contains("writable by others"),
            "{why}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(not_roots("relative/python3").is_some());
        if std::fs::symlink_metadata("/bin").is_ok_and(|m| m.file_type().is_symlink()) {
            assert!(not_roots("/bin/sh").unwrap().contains("symlink"));
        }
    }
}
