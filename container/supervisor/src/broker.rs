//! `harness-supervisor warden SCRIPT [ARG...]`: one of the harness's Python programs (the
//! timer, the guard, the agent's runner), run as the warden, an unprivileged user of the
//! harness's own (uid 10002: no capability, no_new_privs, the seccomp filter of every
//! program the supervisor starts), with the interpreter pinned at image build. Nothing of
//! the image runs as root: this process, the harness's static program, stays root and does
//! on the warden's behalf what needs root, asked over a socket (SOCK_SEQPACKET, one JSON
//! request a message, descriptors beside it):
//!
//!   {"op": "run", "options": [...], "argv": [...], "env": {...}, "fds": [1, 2, ...]}
//!       the command as the sandbox user, in a sandbox (`run`'s options), with the
//!       descriptors sent beside the request at the numbers `fds` gives; the reply says
//!       it started, the run's result descriptor says when it ended
//!   {"op": "kill-user"}             every process of the sandbox user
//!   {"op": "chown", "path", "uid", "gid", "mode"}   (the tree and home only, see fsops)
//!   {"op": "remove", "path"}        a file or folder (likewise)
//!   {"op": "open", "path"}          a descriptor for reading, sent back (likewise)
//!   {"op": "du", "path"}            bytes it and what is under it take on disk (likewise)
//!   {"op": "held"}                  bytes of deleted files still held open on the tree's
//!                                   and home's file systems
//!
//! The warden's exit status is this program's.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde_json::{Value, json};

use crate::fsops::{self, Roots};
use crate::sys::{self, Result};

pub const WARDEN_UID: u32 = 10002;
pub const WARDEN_GID: u32 = 10002;
const MAX_MESSAGE: usize = 1 << 20;
const MAX_FDS: usize = 16;

/// Runs `script` as the warden and serves it until it exits; the exit code.
pub fn main(record: &str, script: &str, args: &[String]) -> i32 {
    match serve(record, script, args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harness-supervisor: {e}");
            125
        }
    }
}

fn socketpair() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(format!("socketpair: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: two descriptors this process just made.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Blocks SIGCHLD and returns a descriptor that reads it (the serve loop polls it).
fn child_signals() -> Result<OwnedFd> {
    // SAFETY: a signal set built and used by value.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            return Err(format!("signalfd: {}", std::io::Error::last_os_error()));
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// In a child: SIGCHLD as a new program expects it (unblocked).
pub fn unblock_child_signals() {
    // SAFETY: as in child_signals.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

fn serve(record: &str, script: &str, args: &[String]) -> Result<i32> {
    let (ours, theirs) = socketpair()?;
    let signals = child_signals()?;
    let warden = sys::fork()?;
    if warden == 0 {
        unblock_child_signals();
        drop(ours);
        drop(signals);
        // The warden's end, kept across exec at a number the program is told.
        // SAFETY: clearing close-on-exec on a descriptor this process owns.
        unsafe { libc::fcntl(theirs.as_raw_fd(), libc::F_SETFD, 0) };
        let why = sys::become_id(WARDEN_UID, WARDEN_GID)
            .err()
            .unwrap_or_else(|| {
                crate::python::exec_as_warden(record, script, args, theirs.as_raw_fd())
            });
        eprintln!("harness-supervisor: {why}");
        sys::exit(125);
    }
    drop(theirs);
    let roots = Roots::from_harness_config();
    let mut warden_status = None;
    let mut runs: Vec<libc::pid_t> = Vec::new();
    let keep = [ours.as_raw_fd(), signals.as_raw_fd()];
    loop {
        let mut polls = [ours.as_raw_fd(), signals.as_raw_fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: a valid pollfd array of its length.
        if unsafe { libc::poll(polls.as_mut_ptr(), 2, -1) } < 0 {
            continue; // interrupted
        }
        if polls[1].revents != 0 {
            drain_signals(&signals);
            reap(warden, &mut warden_status, &mut runs);
        }
        if polls[0].revents & libc::POLLIN != 0 {
            if let Some((request, fds)) = receive(&ours) {
                let (reply, fd) = handle(&request, fds, &roots, &mut runs, &keep);
                send(&ours, &reply, fd.as_ref());
                continue;
            }
            break;
        }
        if polls[0].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            break;
        }
    }
    // The warden closed its end: it is ending. Nothing of the sandbox user outlives it.
    let status = match warden_status {
        Some(st) => st,
        None => {
            let mut st = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(warden, &mut st, 0) };
            st
        }
    };
    runs.retain(|p| *p != warden);
    if !runs.is_empty() {
        crate::run::kill_user(crate::run::RUN_UID, crate::run::RUN_GID);
        for pid in runs.drain(..) {
            let mut st = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
        }
    }
    Ok(match sys::exit_code(status) {
        c if c < 0 => 128 - c as i32,
        c => c as i32,
    })
}

fn drain_signals(signals: &OwnedFd) {
    let mut buf = [0u8; 128];
    // SAFETY: a non-blocking read into a buffer of its length.
    while unsafe { libc::read(signals.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}

/// Reaps every child that ended: the warden's status, and the runs that are over.
fn reap(warden: libc::pid_t, status: &mut Option<libc::c_int>, runs: &mut Vec<libc::pid_t>) {
    loop {
        let mut st = 0;
        // SAFETY: a valid out-pointer.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        if pid == warden {
            *status = Some(st);
        }
        runs.retain(|p| *p != pid);
    }
}

/// One request and the descriptors beside it; None when the warden closed its end.
fn receive(sock: &OwnedFd) -> Option<(Value, Vec<OwnedFd>)> {
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut control = vec![0u8; unsafe { libc::CMSG_SPACE((MAX_FDS * 4) as u32) } as usize];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain old data; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() as _;
    // SAFETY: a valid socket and message header.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n <= 0 {
        return None;
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const libc::c_int;
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    let request = serde_json::from_slice(&buf[..n as usize]).unwrap_or(Value::Null);
    Some((request, fds))
}

fn send(sock: &OwnedFd, reply: &Value, fd: Option<&OwnedFd>) {
    let text = reply.to_string();
    let mut iov = libc::iovec {
        iov_base: text.as_ptr() as *mut libc::c_void,
        iov_len: text.len(),
    };
    let mut control = vec![0u8; unsafe { libc::CMSG_SPACE(4) } as usize];
    // SAFETY: msghdr is plain old data; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        // SAFETY: one SCM_RIGHTS message with one descriptor, in `control`.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
            *(libc::CMSG_DATA(cmsg) as *mut libc::c_int) = fd.as_raw_fd();
        }
    }
    // SAFETY: a valid socket and message header.
    unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
}

fn handle(
    request: &Value,
    fds: Vec<OwnedFd>,
    roots: &Roots,
    runs: &mut Vec<libc::pid_t>,
    close_in_run: &[i32],
) -> (Value, Option<OwnedFd>) {
    let path = || request["path"].as_str().unwrap_or("");
    let outcome: Result<(Value, Option<OwnedFd>)> = match request["op"].as_str() {
        Some("run") => start_run(request, fds, close_in_run).map(|pid| {
            runs.push(pid);
            (json!({ "ok": true, "pid": pid }), None)
        }),
        Some("kill-user") => {
            let (killed, survivors) =
                crate::run::kill_user(crate::run::RUN_UID, crate::run::RUN_GID);
            Ok((
                json!({ "ok": true, "killed": killed, "survivors": survivors }),
                None,
            ))
        }
        Some("chown") => fsops::chown(
            roots,
            path(),
            request["uid"].as_u64().unwrap_or(0) as u32,
            request["gid"].as_u64().unwrap_or(0) as u32,
            request["mode"].as_u64().map(|m| m as u32),
        )
        .map(|_| (json!({ "ok": true }), None)),
        Some("remove") => {
            fsops::remove(roots, path()).map(|r| (json!({ "ok": true, "removed": r }), None))
        }
        Some("open") => fsops::open(roots, path()).map(|fd| (json!({ "ok": true }), Some(fd))),
        Some("du") => fsops::du(roots, path()).map(|b| (json!({ "ok": true, "bytes": b }), None)),
        Some("held") => Ok((
            json!({
                "ok": true,
                "bytes": fsops::held_deleted(roots, crate::run::RUN_UID, crate::run::RUN_GID)
            }),
            None,
        )),
        other => Err(format!("unknown request {other:?}")),
    };
    outcome.unwrap_or_else(|e| (json!({ "error": e }), None))
}

/// What the warden may ask for: a run as the sandbox user (its diff after it as the warden),
/// in the tree or the home, touching files there only, staged where the supervisor stages.
/// The warden runs the image's interpreter: its requests are not trusted.
fn allowed(opts: &crate::run::Options) -> Result<()> {
    use crate::run::{RUN_GID, RUN_UID};
    if (opts.uid, opts.gid) != (RUN_UID, RUN_GID) {
        return Err(format!(
            "run: only as {RUN_UID}:{RUN_GID}, not {}:{}",
            opts.uid, opts.gid
        ));
    }
    if let Some(a) = &opts.after
        && (a.uid, a.gid) != (WARDEN_UID, WARDEN_GID)
    {
        return Err(format!(
            "run: --after only as the warden, not {}:{}",
            a.uid, a.gid
        ));
    }
    if opts.staging != crate::run::STAGING {
        return Err("run: --staging is the supervisor's".into());
    }
    let roots = Roots::from_harness_config();
    let in_reach = |p: &str| {
        !p.split('/').any(|c| c == "..")
            && (!p.starts_with('/')
                || roots
                    .0
                    .iter()
                    .any(|root| p == root || p.starts_with(&format!("{root}/"))))
    };
    let paths = std::iter::once(&opts.cwd)
        .chain(&opts.remove)
        .chain(opts.copy_out.iter().map(|(p, _)| p))
        .chain(&opts.layers);
    for p in paths {
        if !in_reach(p) || (p == &opts.cwd && !p.starts_with('/')) {
            return Err(format!("run: {p:?} is outside the tree and the home"));
        }
    }
    Ok(())
}

/// Forks the run: its descriptors put at their numbers, its environment, then `run`.
fn start_run(request: &Value, fds: Vec<OwnedFd>, close: &[i32]) -> Result<libc::pid_t> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut args = strings(&request["options"]);
    args.push("--".into());
    args.extend(strings(&request["argv"]));
    let mut opts = crate::parse_run(&args)?;
    allowed(&opts)?;
    let env: HashMap<String, String> = request["env"]
        .as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    opts.env = Some(env.into_iter().collect());
    let targets: Vec<i32> = request["fds"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_i64().map(|n| n as i32))
                .collect()
        })
        .unwrap_or_default();
    if targets.len() != fds.len() {
        return Err(format!(
            "run: {} descriptor(s) sent for {} number(s)",
            fds.len(),
            targets.len()
        ));
    }
    let pid = sys::fork()?;
    if pid == 0 {
        unblock_child_signals();
        for fd in close {
            sys::close(*fd);
        }
        // First every descriptor above the numbers it goes to, then each to its number.
        let high: Vec<i32> = fds
            .iter()
            // SAFETY: duplicating descriptors this process holds.
            .map(|fd| unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 100) })
            .collect();
        drop(fds);
        for (from, to) in high.iter().zip(&targets) {
            if sys::dup2(*from, *to).is_err() {
                sys::exit(125);
            }
        }
        for fd in high {
            sys::close(fd);
        }
        sys::exit(crate::run::main(&opts));
    }
    Ok(pid)
}

#[cfg(test)]
mod allowed_tests {
    use super::allowed;

    fn opts(extra: &[&str]) -> Result<(), String> {
        let mut args: Vec<String> = ["--uid", "10001", "--gid", "10001", "--cwd", "/testbed"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["--".to_string(), "true".to_string()]);
        allowed(&crate::parse_run(&args)?)
    }

    #[test]
    fn the_warden_asks_only_for_the_sandbox_users_runs_in_the_tree() {
        assert!(opts(&[]).is_ok());
        assert!(opts(&["--remove", "out.json", "--copy-out", "out.json=9"]).is_ok());
        assert!(opts(&["--layer", "/testbed", "--layer", "/home/harnessrun"]).is_ok());
        assert!(opts(&["--after", r#"[10002, 10002, 9, "python3", "x.py"]"#]).is_ok());
        for bad in [
            &["--uid", "0"][..],
            &["--gid", "0"],
            &["--after", r#"[0, 0, 9, "sh"]"#],
            &["--staging", "/etc"],
            &["--cwd", "/etc"],
            &["--remove", "/etc/passwd"],
            &["--copy-out", "/etc/shadow=9"],
            &["--copy-out", "../../etc/shadow=9"],
            &["--layer", "/opt/harness"],
        ] {
            assert!(opts(bad).is_err(), "{bad:?} allowed");
        }
    }
}
