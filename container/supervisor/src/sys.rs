//! Thin wrappers over the system calls the supervisor makes: each returns `Err` with the
//! call, its argument and the OS error, so a failure names what failed.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;

pub type Result<T> = std::result::Result<T, String>;

pub fn cstr(s: impl AsRef<OsStr>) -> Result<CString> {
    CString::new(s.as_ref().as_bytes()).map_err(|_| format!("{:?} holds a NUL byte", s.as_ref()))
}

fn check(rc: libc::c_int, what: impl FnOnce() -> String) -> Result<libc::c_int> {
    if rc < 0 {
        Err(format!("{}: {}", what(), io::Error::last_os_error()))
    } else {
        Ok(rc)
    }
}

pub fn mount(
    source: &str,
    target: &str,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<()> {
    let s = cstr(source)?;
    let t = cstr(target)?;
    let f = fstype.map(cstr).transpose()?;
    let d = data.map(cstr).transpose()?;
    // SAFETY: every pointer is a valid NUL-terminated string or null, as mount(2) takes.
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            f.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            flags,
            d.as_ref()
                .map_or(std::ptr::null(), |c| c.as_ptr().cast::<libc::c_void>()),
        )
    };
    check(rc, || {
        format!(
            "mount {source} on {target} ({}, flags {flags:#x}, {})",
            fstype.unwrap_or("bind"),
            data.unwrap_or("")
        )
    })
    .map(|_| ())
}

pub fn mkdir_p(path: &str, mode: u32) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(|e| format!("mkdir {path}: {e}"))
}

/// clone(2) with new namespaces and no new stack: like fork, the child goes on from here
/// with a copy of this process (`Ok(0)` in the child, its pid in the parent). The
/// supervisor is single-threaded, so the copy holds no lock another thread had.
pub fn clone_into(flags: libc::c_int) -> Result<libc::pid_t> {
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: clone without a stack or thread pointers behaves as fork does.
    let rc = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if rc < 0 {
        return Err(format!(
            "clone into new namespaces ({flags:#x}): {} (the container's seccomp profile must \
             be the harness's, see `harness doctor`)",
            io::Error::last_os_error()
        ));
    }
    Ok(rc as libc::pid_t)
}

/// Detaches the mount at `path` (and those under it).
pub fn umount_detach(path: &str) -> Result<()> {
    let p = cstr(path)?;
    // SAFETY: a valid C string.
    check(
        unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) },
        || format!("umount {path}"),
    )
    .map(|_| ())
}

/// Writes `text` to an existing file (a /proc file: one write).
pub fn write_file(path: &str, text: &str) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .map_err(|e| format!("write {path}: {e}"))
}

pub fn chdir(path: &str) -> Result<()> {
    let p = cstr(path)?;
    // SAFETY: a valid C string.
    check(unsafe { libc::chdir(p.as_ptr()) }, || {
        format!("chdir {path}")
    })
    .map(|_| ())
}

pub fn chroot(path: &str) -> Result<()> {
    let p = cstr(path)?;
    // SAFETY: a valid C string.
    check(unsafe { libc::chroot(p.as_ptr()) }, || {
        format!("chroot {path}")
    })
    .map(|_| ())
}

/// fork(2): `Ok(0)` in the child, the child's pid in the parent.
pub fn fork() -> Result<libc::pid_t> {
    // SAFETY: the supervisor is single-threaded; the child only makes system calls and
    // execs or exits.
    check(unsafe { libc::fork() }, || "fork".to_string())
}

pub fn pipe() -> Result<(i32, i32)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    check(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
        || "pipe".to_string(),
    )?;
    Ok((fds[0], fds[1]))
}

pub fn close(fd: i32) {
    // SAFETY: closing a descriptor this process owns.
    unsafe {
        libc::close(fd);
    }
}

pub fn write_all(fd: i32, mut bytes: &[u8]) -> Result<()> {
    while !bytes.is_empty() {
        // SAFETY: bytes is a valid buffer of its length.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("write to descriptor {fd}: {e}"));
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// One byte from `fd`, or `None` at end of file (the writer is gone).
pub fn read_byte(fd: i32) -> Option<u8> {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: b has room for one byte.
        let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
        if n == 1 {
            return Some(b[0]);
        }
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

pub fn dup2(from: i32, to: i32) -> Result<()> {
    // SAFETY: both are descriptor numbers.
    check(unsafe { libc::dup2(from, to) }, || {
        format!("dup2 {from} -> {to}")
    })
    .map(|_| ())
}

/// Marks every descriptor from 3 up close-on-exec, but those in `keep` (by close_range, or
/// by /proc/self/fd where the kernel lacks it). False when neither worked: the caller must
/// not exec, or the harness's own descriptors would reach the command.
pub fn cloexec_all_but(keep: &[i32]) -> bool {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    let mut keep: Vec<i32> = keep.iter().copied().filter(|fd| *fd > 2).collect();
    keep.sort_unstable();
    let mut from = 3u32;
    let mut ok = true;
    for k in keep.iter().copied().chain(std::iter::once(i32::MAX)) {
        let to = (k as u32).saturating_sub(1);
        if to >= from {
            // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only sets a flag.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    from,
                    to.min(u32::MAX - 1),
                    CLOSE_RANGE_CLOEXEC,
                )
            };
            ok &= rc == 0;
        }
        from = (k as u32).saturating_add(1);
    }
    if ok {
        return true;
    }
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds {
        if fd > 2 && !keep.contains(&fd) {
            // SAFETY: setting a flag on a descriptor number; an invalid one fails harmlessly.
            unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
    true
}

/// Clears close-on-exec on `fd` (a descriptor handed on to the command).
pub fn inherit(fd: i32) {
    // SAFETY: clearing a flag on a descriptor number.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, 0);
    }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// An exit status as the harness reports it: the exit code, or minus the signal.
pub fn exit_code(status: libc::c_int) -> i64 {
    if libc::WIFSIGNALED(status) {
        -(libc::WTERMSIG(status) as i64)
    } else {
        libc::WEXITSTATUS(status) as i64
    }
}

/// execve with a PATH search like execvp's, in `env` (else this process's environment):
/// the program is looked up in that environment's PATH. Returns only on failure, with why.
pub fn exec_path(argv: &[String], env: Option<&[(String, String)]>) -> String {
    let Some(program) = argv.first() else {
        return "no command".to_string();
    };
    let vars: Vec<(String, String)> = match env {
        Some(e) => e.to_vec(),
        None => std::env::vars().collect(),
    };
    let c_argv: Vec<CString> = match argv.iter().map(cstr).collect() {
        Ok(v) => v,
        Err(e) => return e,
    };
    let c_env: Vec<CString> = match vars.iter().map(|(k, v)| cstr(format!("{k}={v}"))).collect() {
        Ok(v) => v,
        Err(e) => return e,
    };
    let path = vars
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let candidates: Vec<String> = if program.contains('/') {
        vec![program.clone()]
    } else {
        path.split(':')
            .map(|d| format!("{}/{program}", if d.is_empty() { "." } else { d }))
            .collect()
    };
    let mut argp: Vec<*const libc::c_char> = c_argv.iter().map(|c| c.as_ptr()).collect();
    argp.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = c_env.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut last = io::Error::from_raw_os_error(libc::ENOENT);
    for candidate in candidates {
        let Ok(c) = cstr(&candidate) else { continue };
        // SAFETY: NULL-terminated arrays of valid C strings; on success this does not return.
        unsafe {
            libc::execve(c.as_ptr(), argp.as_ptr(), envp.as_ptr());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOENT) || last.raw_os_error() == Some(libc::ENOENT) {
            last = e;
        }
    }
    format!("cannot start {program:?}: {last}")
}

pub fn exit(code: i32) -> ! {
    // SAFETY: ends the process without running anything else of it (the child of a fork).
    unsafe { libc::_exit(code) }
}

/// Brings up `lo` of the current network namespace (a new one starts with it down).
pub fn loopback_up() -> Result<()> {
    // SAFETY: a socket for the ioctl, closed below; ifreq is plain old data.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(fd, || "socket for the loopback".to_string())?;
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo".iter().enumerate() {
        ifr.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: fd is a socket; ifr a valid ifreq naming `lo`.
    let got = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr) };
    let set = if got == 0 {
        // SAFETY: the flags member of the union, set by SIOCGIFFLAGS.
        unsafe {
            ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr)
        }
    } else {
        got
    };
    let result = check(set, || "bring up the run's loopback".to_string());
    close(fd);
    result.map(|_| ())
}

/// Becomes `uid:gid` with no supplementary group and no capability, for good.
pub fn become_id(uid: u32, gid: u32) -> Result<()> {
    // SAFETY: ids are plain numbers; setgroups with an empty list.
    let ok = unsafe {
        libc::setgroups(0, std::ptr::null()) == 0
            && libc::setresgid(gid, gid, gid) == 0
            && libc::setresuid(uid, uid, uid) == 0
    };
    if !ok {
        return Err(format!(
            "cannot become {uid}:{gid}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}
