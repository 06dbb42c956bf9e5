//! One run of the code under test in a sandbox made for it alone.
//!
//! The supervisor enters new mount, IPC and PID namespaces (and network, where the task has
//! none: a loopback of the run's own), and forks the run's init (PID 1
//! of the new PID namespace), which remakes every mount of the container (see `mounts`),
//! enters the new tree and starts the command. When the command ends the init kills every
//! other process of the namespace (nothing outlives the run), copies out the files asked
//! for, reports, and exits; the namespace, its mounts and its IPC objects go with it.
//!
//! As the sandbox user (the default): the command is the timed process. The init starts it
//! through a launcher that drops to the user, says it is ready and waits; the caller (the
//! harness's timer) is told when it is ready and says when to go; the clock (CLOCK_MONOTONIC)
//! starts at the go and stops when the command is reaped, as the harness's timer always
//! timed. The figures go to `--result-fd` as one JSON object.
//!
//! With `--as-root`: the command is one of the harness's own (the test phase's timer),
//! started as root inside the sandbox with the caller's descriptors; the supervisor exits
//! with its exit code.

use serde_json::{Value, json};

use crate::mounts;
use crate::sys::{self, Result};

#[derive(Debug)]
pub struct Options {
    pub as_root: bool,
    pub uid: u32,
    pub gid: u32,
    pub cwd: String,
    /// RLIMIT_FSIZE of the command (0: none).
    pub fsize: u64,
    /// Size of the tmpfs that holds every upper layer of the run.
    pub layer_size: u64,
    pub staging: String,
    pub ready_fd: Option<i32>,
    pub go_fd: Option<i32>,
    pub result_fd: Option<i32>,
    /// Descriptors handed to the command besides 0, 1 and 2.
    pub keep_fds: Vec<i32>,
    /// Files of the run's tree (relative to `cwd` unless absolute) copied into descriptors
    /// after the run, at most `copy_limit` bytes each.
    pub copy_out: Vec<(String, i32)>,
    pub copy_limit: u64,
    /// Files of the run's tree removed before the command starts (its own output files: one
    /// the install left does not count).
    pub remove: Vec<String>,
    /// Start `true` once as the user before the timed start (a fresh namespace's first exec
    /// costs more than later ones).
    pub warm: bool,
    pub argv: Vec<String>,
}

const NAMESPACES: libc::c_int = libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWPID;

/// Runs the command in a fresh sandbox; the process's exit code.
pub fn main(opts: &Options) -> i32 {
    match outer(opts) {
        Ok(code) => code,
        Err(e) => {
            report(opts, json!({ "error": e }));
            eprintln!("harness-supervisor: {e}");
            125
        }
    }
}

fn report(opts: &Options, value: Value) {
    match opts.result_fd {
        Some(fd) => {
            let _ = sys::write_all(fd, format!("{value}\n").as_bytes());
        }
        None if !opts.as_root => println!("{value}"),
        // The harness's program never started: its result line says why, as the harness's
        // failure (the nonce is the caller's, which the code under test cannot read).
        None => {
            if let (Some(e), Ok(nonce)) = (value.get("error"), std::env::var("HARNESS_NONCE")) {
                println!(
                    "\n{}:{nonce} {}",
                    result_prefix(),
                    json!({ "harness_error": e })
                );
            }
        }
    }
}

/// The harness's result lines' prefix, as the timer's contract defines it (one file for
/// the timer, the harness and this program: container/programs/timer_result.schema.json).
fn result_prefix() -> String {
    const SCHEMA: &str = include_str!("../../programs/timer_result.schema.json");
    let schema: Value = serde_json::from_str(SCHEMA).expect("timer_result.schema.json reads");
    schema["prefix"]
        .as_str()
        .expect("timer_result.schema.json has a prefix")
        .to_string()
}

fn outer(opts: &Options) -> Result<i32> {
    let setup_start = sys::monotonic_ns();
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("read /proc/self/mountinfo: {e}"))?;
    let mounts = mounts::parse(&info);
    sys::mkdir_p(&opts.staging, 0o700)?;
    // Without a network (the container has loopback alone) the run gets a loopback of its
    // own too: sockets in TIME_WAIT, which outlive their process, are listed in
    // /proc/net/tcp, and would carry bits to the next run. With one, it keeps the
    // container's (what a run stores elsewhere on the network is beyond any sandbox).
    let own_net = loopback_only();
    sys::unshare(NAMESPACES | if own_net { libc::CLONE_NEWNET } else { 0 })?;
    if own_net {
        sys::loopback_up()?;
    }
    sys::mount("none", "/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    let init = sys::fork()?;
    if init == 0 {
        let code = match run_init(opts, &mounts, setup_start) {
            Ok(code) => code,
            Err(e) => {
                report(opts, json!({ "error": e }));
                eprintln!("harness-supervisor: {e}");
                125
            }
        };
        sys::exit(code);
    }
    // The init holds every descriptor the run needs; without these copies, the caller sees
    // the end of its pipes as soon as the init is gone.
    for fd in [opts.ready_fd, opts.go_fd, opts.result_fd]
        .into_iter()
        .flatten()
    {
        sys::close(fd);
    }
    for (_, fd) in &opts.copy_out {
        sys::close(*fd);
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for this process's own child.
        let rc = unsafe { libc::waitpid(init, &mut status, 0) };
        if rc == init {
            break;
        }
        if rc < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err("lost the run's init".into());
        }
    }
    Ok(match sys::exit_code(status) {
        c if c < 0 => 128 - c as i32,
        c => c as i32,
    })
}

/// Whether the container's network is loopback alone.
fn loopback_only() -> bool {
    match std::fs::read_dir("/sys/class/net") {
        Ok(dir) => dir.filter_map(|e| e.ok()).all(|e| e.file_name() == "lo"),
        Err(_) => false,
    }
}

/// PID 1 of the run: the fresh tree, then the command.
fn run_init(opts: &Options, mounts: &[mounts::MountInfo], setup_start: u64) -> Result<i32> {
    sys::mount(
        "tmpfs",
        &opts.staging,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&format!("size={},mode=0700", opts.layer_size.max(1 << 20))),
    )?;
    let staging_dir =
        std::fs::File::open(&opts.staging).map_err(|e| format!("open {}: {e}", opts.staging))?;
    let overlays = mounts::enter_fresh_root(mounts, &opts.staging)?;
    mounts::mount_proc(&mounts::proc_masks(mounts))?;
    if opts.as_root {
        return as_root(opts);
    }
    as_user(opts, setup_start, overlays, &staging_dir)
}

/// Reaps children until `pid` ends: its status and resource use.
fn reap_until(pid: libc::pid_t) -> Result<(libc::c_int, libc::rusage)> {
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain old data, filled in by wait4.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointers.
        let rc = unsafe { libc::wait4(-1, &mut status, 0, &mut usage) };
        if rc == pid {
            return Ok((status, usage));
        }
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("wait: {e}"));
            }
        }
    }
}

/// Kills every other process of the namespace (the init is PID 1: kill(-1) reaches all of
/// them, whatever their user or state) and reaps them: how many there were.
fn end_everything() -> u64 {
    // SAFETY: a signal to every process the init may signal: all of its namespace.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
    }
    let mut reaped = 0;
    loop {
        let mut status = 0;
        // SAFETY: a valid out-pointer.
        let rc = unsafe { libc::waitpid(-1, &mut status, 0) };
        if rc > 0 {
            reaped += 1;
            continue;
        }
        if rc < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return reaped;
    }
}

fn as_root(opts: &Options) -> Result<i32> {
    let child = sys::fork()?;
    if child == 0 {
        let _ = sys::chdir(&opts.cwd);
        eprintln!("harness-supervisor: {}", sys::exec_path(&opts.argv));
        sys::exit(127);
    }
    let (status, _) = reap_until(child)?;
    end_everything();
    Ok(match sys::exit_code(status) {
        c if c < 0 => 128 - c as i32,
        c => c as i32,
    })
}

/// What the launcher does before it execs: the limits, the user, the folder.
fn become_user(opts: &Options) -> Result<()> {
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit structures; setgroups with an empty list; ids are plain numbers.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        if opts.fsize > 0 {
            let fsize = libc::rlimit {
                rlim_cur: opts.fsize,
                rlim_max: opts.fsize,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &fsize);
        }
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(opts.gid, opts.gid, opts.gid) != 0
            || libc::setresuid(opts.uid, opts.uid, opts.uid) != 0
        {
            return Err(format!(
                "cannot become the sandbox user: {}",
                std::io::Error::last_os_error()
            ));
        }
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    sys::chdir(&opts.cwd)?;
    let null = std::fs::File::open("/dev/null").map_err(|e| format!("open /dev/null: {e}"))?;
    use std::os::fd::AsRawFd;
    sys::dup2(null.as_raw_fd(), 0)
}

/// A `true` only root can have written (the image's PATH may lead to one the user wrote,
/// which would run before the clock).
fn trusted_true() -> Option<&'static str> {
    ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .find(|p| crate::python::not_roots(p).is_none())
}

/// Starts root's `true` as the user and waits for it (none: no warm-up).
fn warm_up(opts: &Options) -> Result<()> {
    let Some(program) = trusted_true() else {
        return Ok(());
    };
    let pid = sys::fork()?;
    if pid == 0 {
        if become_user(opts).is_ok() {
            let null = std::fs::OpenOptions::new().write(true).open("/dev/null");
            if let Ok(n) = null {
                use std::os::fd::AsRawFd;
                let _ = sys::dup2(n.as_raw_fd(), 1);
                let _ = sys::dup2(n.as_raw_fd(), 2);
            }
            if sys::cloexec_all_but(&[]) {
                sys::exec_path(&[program.to_string()]);
            }
        }
        sys::exit(127);
    }
    reap_until(pid).map(|_| ())
}

fn as_user(
    opts: &Options,
    setup_start: u64,
    overlays: usize,
    staging: &std::fs::File,
) -> Result<i32> {
    for path in &opts.remove {
        let _ = std::fs::remove_file(in_tree(opts, path));
    }
    if opts.warm {
        warm_up(opts)?;
    }
    let (go_r, go_w) = sys::pipe()?;
    let (ready_r, ready_w) = sys::pipe()?;
    let child = sys::fork()?;
    if child == 0 {
        sys::close(go_w);
        sys::close(ready_r);
        if let Err(e) = become_user(opts) {
            eprintln!("harness-supervisor: {e}");
            sys::exit(126);
        }
        let _ = sys::write_all(ready_w, b"r");
        sys::close(ready_w);
        if sys::read_byte(go_r).is_none() {
            sys::exit(126);
        }
        sys::close(go_r);
        if !sys::cloexec_all_but(&opts.keep_fds) {
            sys::exit(126); // the harness's descriptors could reach the bench
        }
        for fd in &opts.keep_fds {
            sys::inherit(*fd);
        }
        eprintln!("{}", sys::exec_path(&opts.argv));
        sys::exit(127);
    }
    sys::close(go_r);
    sys::close(ready_w);
    let launcher_ready = sys::read_byte(ready_r).is_some();
    sys::close(ready_r);
    if !launcher_ready {
        let (status, _) = reap_until(child)?;
        return Err(format!(
            "the launcher could not become the sandbox user (exit {})",
            sys::exit_code(status)
        ));
    }
    let setup_ns = sys::monotonic_ns().saturating_sub(setup_start);
    if let Some(fd) = opts.ready_fd {
        let _ = sys::write_all(fd, if launcher_ready { b"r" } else { b"x" });
        sys::close(fd);
    }
    let go = match opts.go_fd {
        Some(fd) => {
            let go = sys::read_byte(fd).is_some();
            sys::close(fd);
            go
        }
        None => true,
    };
    if !go {
        sys::close(go_w);
        end_everything();
        return Err("the timer never said go".into());
    }
    let start = sys::monotonic_ns();
    let _ = sys::write_all(go_w, b"g");
    sys::close(go_w);
    let (status, usage) = reap_until(child)?;
    let end = sys::monotonic_ns();
    let lingering = end_everything();
    let copied = copy_out(opts);
    let (layer_bytes, layer_full) = layer_use(staging);
    report(
        opts,
        json!({
            "start_ns": start,
            "end_ns": end,
            "wall_ns": end - start,
            "exit_code": sys::exit_code(status),
            "user_s": secs(usage.ru_utime),
            "sys_s": secs(usage.ru_stime),
            "max_rss_kb": usage.ru_maxrss,
            "voluntary_switches": usage.ru_nvcsw,
            "involuntary_switches": usage.ru_nivcsw,
            "lingering_killed": lingering,
            "copied": copied,
            "fresh": {
                "overlays": overlays,
                "setup_ns": setup_ns,
                "layer_bytes": layer_bytes,
                "layer_full": layer_full,
            },
        }),
    );
    Ok(0)
}

fn in_tree(opts: &Options, path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", opts.cwd.trim_end_matches('/'))
    }
}

fn secs(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// Bytes the run's upper layers hold, and whether their tmpfs is full.
fn layer_use(staging: &std::fs::File) -> (u64, bool) {
    use std::os::fd::AsRawFd;
    // SAFETY: statfs is plain old data, filled in by fstatfs.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and out-pointer.
    if unsafe { libc::fstatfs(staging.as_raw_fd(), &mut st) } != 0 {
        return (0, false);
    }
    let used = (st.f_blocks - st.f_bfree) as u64 * st.f_bsize as u64;
    (used, st.f_bavail == 0)
}

/// Copies each asked-for file of the run's tree into its descriptor: path -> {bytes} or
/// {error}.
fn copy_out(opts: &Options) -> Value {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = serde_json::Map::new();
    for (path, fd) in &opts.copy_out {
        let full = in_tree(opts, path);
        // Not a symlink, and never a FIFO the run left to block this read.
        let entry = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&full)
            .and_then(|f| {
                if !f.metadata()?.is_file() {
                    return Err(std::io::Error::other("not a regular file"));
                }
                // SAFETY: the descriptor was handed over for this; File takes ownership.
                let mut dest =
                    unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(*fd) };
                let mut limited = f.take(opts.copy_limit + 1);
                let mut buf = vec![0u8; 1 << 16];
                let mut total = 0u64;
                loop {
                    let n = limited.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    dest.write_all(&buf[..n])?;
                    total += n as u64;
                }
                Ok(total)
            });
        out.insert(
            path.clone(),
            match entry {
                Ok(bytes) if bytes > opts.copy_limit => {
                    json!({ "bytes": bytes, "truncated": true })
                }
                Ok(bytes) => json!({ "bytes": bytes }),
                Err(e) => json!({ "error": e.to_string() }),
            },
        );
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_result_prefix_is_the_schemas() {
        let prefix = super::result_prefix();
        assert!(!prefix.is_empty() && !prefix.contains(char::is_whitespace));
    }
}
