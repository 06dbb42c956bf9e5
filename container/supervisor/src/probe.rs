//! `harness-supervisor probe`: what root may do in this container, as one JSON object, for
//! `harness doctor`, the run's check of the host before any task container, and the tests.
//!
//!   uid, cap_effective, cap_bounding   root's identity and capabilities (names)
//!   no_new_privs, seccomp              the kernel's view: 1 and 2 (a filter) expected
//!   apparmor                           the confinement AppArmor reports, when it is on
//!   cgroup_mount                       "refused: ..." (the host's cgroups out of reach), or
//!                                      "mounted" (undone at once: the container holds too
//!                                      much)
//!   sandbox                            "ok" when a run's sandbox is made, else why not

use serde_json::{Value, json};

const CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

fn status_field(status: &str, key: &str) -> Option<String> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

fn cap_names(hex: &str) -> Vec<&'static str> {
    let bits = u64::from_str_radix(hex, 16).unwrap_or(0);
    CAPS.iter()
        .enumerate()
        .filter(|(i, _)| bits & (1u64 << i) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// Tries a read-only cgroup mount (v1's memory controller, then v2) on a new folder.
fn cgroup_mount() -> String {
    let dir = format!("/tmp/harness-probe-{}", std::process::id());
    if let Err(e) = crate::sys::mkdir_p(&dir, 0o700) {
        return format!("not tried: {e}");
    }
    let tries = [("cgroup", Some("memory")), ("cgroup2", None)];
    let mut why = Vec::new();
    for (fstype, data) in tries {
        match crate::sys::mount(fstype, &dir, Some(fstype), libc::MS_RDONLY, data) {
            Ok(()) => {
                let _ = crate::sys::umount_detach(&dir);
                let _ = std::fs::remove_dir(&dir);
                return format!("mounted ({fstype}, undone at once)");
            }
            Err(e) => why.push(e),
        }
    }
    let _ = std::fs::remove_dir(&dir);
    format!("refused: {}", why.join("; "))
}

/// A run's sandbox made once around `harness-supervisor true`.
fn sandbox() -> String {
    let me = match std::env::current_exe() {
        Ok(p) => p.to_string_lossy().into_owned(),
        Err(e) => return format!("not tried: {e}"),
    };
    let (r, w) = match crate::sys::pipe() {
        Ok(p) => p,
        Err(e) => return e,
    };
    // As nobody: the run ends by killing every process of its user, and the harness's own
    // runs in this container (the sandbox user's) must not be touched by a probe.
    let args: Vec<String> = [
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--cwd",
        "/",
        "--result-fd",
        &w.to_string(),
        "--",
        &me,
        "true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let opts = match crate::parse_run(&args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let Ok(pid) = crate::sys::fork() else {
        return "cannot fork".into();
    };
    if pid == 0 {
        crate::sys::close(r);
        crate::sys::exit(crate::run::main(&opts));
    }
    crate::sys::close(w);
    let mut text = Vec::new();
    while let Some(b) = crate::sys::read_byte(r) {
        text.push(b);
    }
    crate::sys::close(r);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let report: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
    match (report.get("error"), report.get("exit_code")) {
        (Some(e), _) => e.as_str().unwrap_or("failed").to_string(),
        (None, Some(c)) if c == 0 => "ok".into(),
        _ => format!("no report (exit {})", crate::sys::exit_code(status)),
    }
}

pub fn report() -> Value {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let apparmor = std::fs::read_to_string("/proc/self/attr/apparmor/current")
        .or_else(|_| std::fs::read_to_string("/proc/self/attr/current"))
        .map(|s| s.trim_end_matches(['\n', '\0']).to_string())
        .ok();
    json!({
        // SAFETY: plain queries.
        "uid": unsafe { libc::geteuid() },
        "cap_effective": cap_names(&status_field(&status, "CapEff:").unwrap_or_default()),
        "cap_bounding": cap_names(&status_field(&status, "CapBnd:").unwrap_or_default()),
        "no_new_privs": status_field(&status, "NoNewPrivs:"),
        "seccomp": status_field(&status, "Seccomp:"),
        "apparmor": apparmor,
        "cgroup_mount": cgroup_mount(),
        "sandbox": sandbox(),
    })
}

/// Processes of this container the kernel's OOM killer has killed so far (its memory
/// cgroup's count).
pub fn oom_kills() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.events",
        "/sys/fs/cgroup/memory/memory.oom_control",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .find_map(|text| {
        text.lines().find_map(|l| {
            l.strip_prefix("oom_kill ")
                .and_then(|n| n.trim().parse().ok())
        })
    })
}
