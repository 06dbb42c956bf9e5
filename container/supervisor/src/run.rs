//! One run of the code under test in a sandbox made for it alone.
//!
//! The supervisor clones the run's init into a new user namespace (every id mapped to
//! itself), with new mount and IPC namespaces owned by it (and a network one where the
//! task has none: a loopback of the run's own). The init's capabilities are its own in that
//! user namespace: it can make the run's mounts and nothing the container could not do
//! without it (the kernel refuses a cgroup, sysfs or proc mount there). It remakes the
//! container's tree (see `mounts`), enters it and starts the command. Every process of the
//! run stays below the init (it is their subreaper); when the command ends the init kills
//! every process of the sandbox user (nothing outlives the run), copies out the files asked
//! for, reports, and exits; the namespaces, the mounts and the IPC objects go with it.
//!
//! There is no PID namespace: the container's /proc cannot be remade without a capability
//! on the host (Docker's masks over it make the kernel refuse), and under another PID
//! namespace it would show every process under another number than its own.
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
    /// No sandbox: the command's writes stay (the install, a patch's application). It still
    /// runs as the sandbox user, under the filter, and nothing it starts outlives it.
    pub persist: bool,
    /// List what the run wrote in its layers (the test: what it wrote is checked).
    pub report_writes: bool,
    /// Stop every process of the user once the layers are full (an agent).
    pub stop_when_full: bool,
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
    /// Folders the sandbox user may write on a mount that is otherwise made read-only (the
    /// tree, its home): each gets a copy-on-write layer of its own.
    pub layers: Vec<String>,
    /// The command's environment (else this process's).
    pub env: Option<Vec<(String, String)>>,
    /// A program run after the command, in the run's tree before it goes (an agent's diff).
    pub after: Option<After>,
    pub argv: Vec<String>,
}

/// What runs after the command, every process of the sandbox user gone: `argv` as `uid`
/// (the warden), under the filter, its output on `out_fd`. What the run wrote is made
/// readable to it first (a file the sandbox user made private is still part of the diff).
#[derive(Debug, Clone)]
pub struct After {
    pub uid: u32,
    pub gid: u32,
    pub out_fd: i32,
    pub argv: Vec<String>,
}

/// Where a run's layers are staged (a tmpfs of the run's own is mounted there).
pub const STAGING: &str = "/opt/harness/layers";

/// The sandbox user the code under test runs as.
pub const RUN_UID: u32 = 10001;
pub const RUN_GID: u32 = 10001;

/// The run's namespaces. The user namespace comes first: the capabilities the run's init
/// holds to make mounts are its own there, over what that namespace owns, never the
/// container's; the container itself gets no capability beyond Docker's default set.
const NAMESPACES: libc::c_int = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;

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
        // A persistent run without a result descriptor reports by its exit code alone.
        None if opts.persist => {}
        None => println!("{value}"),
    }
}

fn outer(opts: &Options) -> Result<i32> {
    let setup_start = sys::monotonic_ns();
    if opts.persist {
        // SAFETY: a flag of this process: what the command leaves orphaned becomes its child.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        return as_user(opts, setup_start, &[], None);
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("read /proc/self/mountinfo: {e}"))?;
    let mounts = mounts::parse(&info);
    sys::mkdir_p(&opts.staging, 0o700)?;
    // Without a network (the container has loopback alone) the run gets a loopback of its
    // own too: sockets in TIME_WAIT, which outlive their process, are listed in
    // /proc/net/tcp, and would carry bits to the next run. With one, it keeps the
    // container's (what a run stores elsewhere on the network is beyond any sandbox).
    let own_net = loopback_only();
    let (mapped_r, mapped_w) = sys::pipe()?;
    let init = sys::clone_into(NAMESPACES | if own_net { libc::CLONE_NEWNET } else { 0 })?;
    if init == 0 {
        sys::close(mapped_w);
        let mapped = sys::read_byte(mapped_r) == Some(b'm');
        sys::close(mapped_r);
        let code = match in_namespaces(opts, &mounts, own_net, setup_start, mapped) {
            Ok(code) => code,
            Err(e) => {
                report(opts, json!({ "error": e }));
                eprintln!("harness-supervisor: {e}");
                125
            }
        };
        sys::exit(code);
    }
    sys::close(mapped_r);
    let mapped = map_ids(init);
    let _ = sys::write_all(mapped_w, if mapped.is_ok() { b"m" } else { b"x" });
    sys::close(mapped_w);
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
    mapped?;
    Ok(match sys::exit_code(status) {
        c if c < 0 => 128 - c as i32,
        c => c as i32,
    })
}

/// The ids of the run's user namespace. Started by root (the harness's exec), every id maps
/// to itself, so files keep the owners they have in the container and the init can become
/// the sandbox user; otherwise the caller's own ids alone.
fn map_ids(pid: libc::pid_t) -> Result<()> {
    // SAFETY: plain queries of this process's ids.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let proc = format!("/proc/{pid}");
    if uid == 0 {
        sys::write_file(
            &format!("{proc}/uid_map"),
            &identity_of("/proc/self/uid_map")?,
        )?;
        sys::write_file(
            &format!("{proc}/gid_map"),
            &identity_of("/proc/self/gid_map")?,
        )
    } else {
        sys::write_file(&format!("{proc}/setgroups"), "deny")?;
        sys::write_file(&format!("{proc}/uid_map"), &format!("{uid} {uid} 1\n"))?;
        sys::write_file(&format!("{proc}/gid_map"), &format!("{gid} {gid} 1\n"))
    }
}

/// Every id this process's own namespace maps, mapped to itself: under a plain engine the
/// whole range (`0 0 4294967295`), under a rootless one the ranges it was given.
fn identity_of(own_map: &str) -> Result<String> {
    let text = std::fs::read_to_string(own_map).map_err(|e| format!("{own_map}: {e}"))?;
    Ok(identity_map(&text))
}

fn identity_map(own: &str) -> String {
    own.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3).then(|| format!("{} {} {}\n", f[0], f[0], f[2]))
        })
        .collect()
}

/// The init's first steps in its namespaces, once its ids are mapped.
fn in_namespaces(
    opts: &Options,
    mounts: &[mounts::MountInfo],
    own_net: bool,
    setup_start: u64,
    mapped: bool,
) -> Result<i32> {
    if !mapped {
        return Err("the run's user namespace could not be mapped".into());
    }
    // SAFETY: a flag of this process: what the run leaves orphaned becomes its child.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    if own_net {
        sys::loopback_up()?;
    }
    sys::mount("none", "/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    run_init(opts, mounts, setup_start)
}

/// Whether the container's network is loopback alone.
fn loopback_only() -> bool {
    match std::fs::read_dir("/sys/class/net") {
        Ok(dir) => dir.filter_map(|e| e.ok()).all(|e| e.file_name() == "lo"),
        Err(_) => false,
    }
}

/// The run's init: the fresh tree, then the command.
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
    let layers = mounts::enter_fresh_root(mounts, &opts.staging, &opts.layers)?;
    mounts::own_proc(&mounts::proc_masks(mounts))?;
    as_user(opts, setup_start, &layers, Some(&staging_dir))
}

/// [`reap_until`], watching the run's layers every 50 ms: once they are full the run has
/// written all the task's disk limit allows (no write went past it) and every process of
/// the sandbox user is stopped (an agent: its run ends there, not at its time limit).
fn reap_or_stop_when_full(
    pid: libc::pid_t,
    staging: &std::fs::File,
    opts: &Options,
) -> Result<(libc::c_int, libc::rusage)> {
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain old data, filled in by wait4.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointers.
        let rc = unsafe { libc::wait4(-1, &mut status, libc::WNOHANG, &mut usage) };
        if rc == pid {
            return Ok((status, usage));
        }
        if rc > 0 {
            continue;
        }
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("wait: {e}"));
            }
        }
        if layer_use(staging).1 {
            let _ = kill_as(opts.uid, opts.gid);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
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

/// kill(-1, SIGKILL) from a helper that has become `uid`: every process `uid` may signal,
/// that is every process of it and nothing else, whatever its state, name or session; the
/// kernel lets no fork slip past one such call. The helper's pid: it is the sandbox user's
/// while it lives, and a timer watching that user's processes must not take it for the
/// run's.
fn kill_as(uid: u32, gid: u32) -> Option<libc::pid_t> {
    let Ok(pid) = sys::fork() else { return None };
    if pid == 0 {
        if sys::become_id(uid, gid).is_ok() {
            // SAFETY: a signal to every process this helper may signal.
            unsafe {
                libc::kill(-1, libc::SIGKILL);
            }
        }
        sys::exit(0);
    }
    let mut status = 0;
    // SAFETY: waiting for the helper.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Some(pid)
}

/// Processes of `uid` that still run (not zombies): by /proc.
fn live_processes(uid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut live = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key));
        let ours =
            field("Uid:").is_some_and(|u| u.split_whitespace().any(|x| x == uid.to_string()));
        let zombie = field("State:").is_some_and(|st| st.trim_start().starts_with('Z'));
        if ours && !zombie {
            live += 1;
        }
    }
    live
}

/// Stops every process of `uid`: (how many ran, how many still run after five seconds of
/// trying: a fork bomb refills, a dying process takes a moment).
pub fn kill_user(uid: u32, gid: u32) -> (u64, u64) {
    let before = live_processes(uid);
    let deadline = sys::monotonic_ns() + 5_000_000_000;
    loop {
        let _ = kill_as(uid, gid);
        let live = live_processes(uid);
        if live == 0 || sys::monotonic_ns() > deadline {
            return (before, live);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Kills every process of the sandbox user (twice: a fork under way the first time is
/// caught the second) and reaps what the init inherited: how many there were. The
/// helpers' pids join `helpers`.
fn end_everything(opts: &Options, helpers: &mut Vec<libc::pid_t>) -> u64 {
    helpers.extend(kill_as(opts.uid, opts.gid));
    helpers.extend(kill_as(opts.uid, opts.gid));
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

/// What the launcher does before it execs: the limits, the user, the folder.
fn become_user(opts: &Options) -> Result<()> {
    if opts.uid == 0 || opts.gid == 0 {
        return Err("a run never runs as root".into());
    }
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
    crate::seccomp::restrict()?;
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

/// Starts root's `true` as the user and waits for it (none: no warm-up); its pid.
fn warm_up(opts: &Options) -> Result<Option<libc::pid_t>> {
    let Some(program) = trusted_true() else {
        return Ok(None);
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
                sys::exec_path(&[program.to_string()], Some(&[]));
            }
        }
        sys::exit(127);
    }
    reap_until(pid).map(|_| Some(pid))
}

/// The command as the sandbox user, from the launcher's ready to its end, and the report.
/// `layers`: the run's overlays, (where, its upper folder in the staging tmpfs).
fn as_user(
    opts: &Options,
    setup_start: u64,
    layers: &[(String, String)],
    staging: Option<&std::fs::File>,
) -> Result<i32> {
    for path in &opts.remove {
        let _ = std::fs::remove_file(in_tree(opts, path));
    }
    let mut helpers = Vec::new();
    if opts.warm {
        helpers.extend(warm_up(opts)?);
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
        eprintln!("{}", sys::exec_path(&opts.argv, opts.env.as_deref()));
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
        end_everything(opts, &mut helpers);
        return Err("the timer never said go".into());
    }
    let start = sys::monotonic_ns();
    let _ = sys::write_all(go_w, b"g");
    sys::close(go_w);
    let (status, usage) = match (opts.stop_when_full, staging) {
        (true, Some(staging)) => reap_or_stop_when_full(child, staging, opts)?,
        _ => reap_until(child)?,
    };
    let end = sys::monotonic_ns();
    let lingering = end_everything(opts, &mut helpers);
    let after_exit = match (&opts.after, staging) {
        (Some(after), Some(staging)) => Some(run_after(after, staging, layers, opts)),
        _ => None,
    };
    let copied = copy_out(opts);
    let (layer_bytes, layer_full) = staging.map(layer_use).unwrap_or((0, false));
    let mut fresh = json!({
        "overlays": layers.len(),
        "setup_ns": setup_ns,
        "layer_bytes": layer_bytes,
        "layer_full": layer_full,
    });
    if let (true, Some(staging)) = (opts.report_writes, staging) {
        fresh["written"] = crate::layers::written(staging, layers);
    }
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
            "helpers": helpers,
            "copied": copied,
            "after_exit": after_exit,
            "fresh": fresh,
        }),
    );
    // A persistent run without a result descriptor (a patch's application) ends as its
    // command did.
    if opts.persist && opts.result_fd.is_none() {
        return Ok(match sys::exit_code(status) {
            c if c < 0 => 128 - c as i32,
            c => c as i32,
        });
    }
    Ok(0)
}

/// The program after the command (see [`After`]): its exit code.
fn run_after(
    after: &After,
    staging: &std::fs::File,
    layers: &[(String, String)],
    opts: &Options,
) -> i64 {
    crate::layers::make_readable(staging, layers, opts.uid);
    let Ok(pid) = sys::fork() else { return -1 };
    if pid == 0 {
        let setup = || -> Result<()> {
            sys::dup2(after.out_fd, 1)?;
            if after.uid == 0 || after.gid == 0 {
                return Err("a run's after-command never runs as root".into());
            }
            // A /tmp of its own: the run's layers may be full (an agent stopped at its disk
            // limit), and the after-command needs room for its work (the diff's index).
            let size = format!(
                "size={},mode=1777",
                opts.layer_size.max(1 << 20) + (64 << 20)
            );
            sys::mount(
                "tmpfs",
                "/tmp",
                Some("tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(&size),
            )?;
            sys::become_id(after.uid, after.gid)?;
            crate::seccomp::restrict()?;
            sys::chdir("/")
        };
        if let Err(e) = setup() {
            eprintln!("harness-supervisor: {e}");
            sys::exit(126);
        }
        if !sys::cloexec_all_but(&[]) {
            sys::exit(126);
        }
        eprintln!("{}", sys::exec_path(&after.argv, opts.env.as_deref()));
        sys::exit(127);
    }
    sys::close(after.out_fd);
    match reap_until(pid) {
        Ok((status, _)) => sys::exit_code(status),
        Err(_) => -1,
    }
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
    let mut out = serde_json::Map::new();
    let roots = crate::fsops::Roots::from_harness_config();
    for (path, fd) in &opts.copy_out {
        let full = in_tree(opts, path);
        // No link anywhere on the path (the run made the tree: this reads as the namespace's
        // root), in the tree or the home only, never a FIFO the run left to block this read.
        let entry = crate::fsops::open(&roots, &full)
            .map(std::fs::File::from)
            .map_err(std::io::Error::other)
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
    use super::identity_map;

    #[test]
    fn the_runs_ids_are_those_the_container_has_each_to_itself() {
        assert_eq!(
            identity_map("         0          0 4294967295\n"),
            "0 0 4294967295\n"
        );
        // A rootless engine's container: its root is the engine's user, the rest a range.
        assert_eq!(
            identity_map("0 1001 1\n1 100000 65536\n"),
            "0 0 1\n1 1 65536\n"
        );
    }
}
