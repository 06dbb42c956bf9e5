//! What a container is made with, and the body Docker's create call gets from it: the
//! image, limits, mounts, labels and GPUs of one variant's container.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig};

use super::{LABEL_MANAGED, LABEL_OWNER};
use harness_core::task::{Resources, WORKDIR};

/// A tmpfs in every container, where the in-container timer puts a bench's stdout and
/// stderr: on the container's own file system (an overlay, FUSE on some hosts) the bench's
/// last writes and their flush at exit cost about half a millisecond more per run (measured
/// here), and that would be in the figure.
pub const BENCH_OUTPUT_MOUNT: &str = "/run/harness";
pub const BENCH_OUTPUT_DIR: &str = "/run/harness/bench";

/// What root keeps in a task container: a part of Docker's default set, never more. The
/// harness's static supervisor, the only program root runs once the container runs, needs
/// these: to hand files to their owners and lock them (CHOWN, DAC_OVERRIDE, FOWNER), to run
/// a program as another user and map the ids of each run's user namespace (SETUID, SETGID,
/// and SETFCAP, which the kernel asks of whoever maps root), to stop what is left (KILL),
/// and SYS_CHROOT, on which Docker's seccomp profile conditions chroot(2), which each run's
/// init makes inside its own user namespace.
pub const ROOT_CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "SETUID",
    "SETGID",
    "SETFCAP",
    "KILL",
    "SYS_CHROOT",
];

/// Docker's own default capability set (its engine's `caps.DefaultCapabilities`): what a
/// plain `docker run` gives root. No container of the harness gets one outside it.
pub const DOCKER_DEFAULT_CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// The seccomp profile of every container: Docker's default plus exactly the namespace and
/// mount calls each run's sandbox is made with (scripts/seccomp_profile.py writes it and
/// says why), which the supervisor takes away again from every program it starts.
pub const SECCOMP_PROFILE: &str = include_str!("../../../../container/seccomp.json");

/// The profile as the engine takes it in a security option: `seccomp=` and compact JSON.
pub fn seccomp_option() -> String {
    let compact = serde_json::from_str::<serde_json::Value>(SECCOMP_PROFILE)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| SECCOMP_PROFILE.to_string());
    format!("seccomp={compact}")
}

/// What a container is made with.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    pub image: String,
    /// A readable prefix; a unique suffix is added.
    pub name_hint: String,
    pub labels: HashMap<String, String>,
    pub resources: Resources,
    /// Cores to pin the container to (`"0-1"`), when the plan assigns them.
    pub cpuset: Option<String>,
    /// Whole GPUs by device id.
    pub gpu_ids: Vec<String>,
    /// Environment variables of every process (name, value): the task's `[env] pass`. Their
    /// values are secrets: redacted from every output an exec returns.
    pub env: Vec<(String, String)>,
    /// Host folders mounted in the container (`host:container:ro`): the model gateway's
    /// socket folder for an agent, nothing else.
    pub binds: Vec<String>,
}

/// The security options of every container: no-new-privileges, the harness's seccomp
/// profile, and AppArmor's profile when `HARNESS_APPARMOR_PROFILE` names one loaded on the
/// host (container/apparmor/harness-sandbox: for hosts whose docker-default refuses the
/// sandbox's mounts); otherwise the engine's own.
pub fn security_options() -> Vec<String> {
    let mut out = vec!["no-new-privileges".to_string(), seccomp_option()];
    if let Ok(profile) = std::env::var("HARNESS_APPARMOR_PROFILE")
        && !profile.is_empty()
    {
        out.push(format!("apparmor={profile}"));
    }
    out
}

/// A device request as the engine recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuRequest {
    pub driver: String,
    pub device_ids: Vec<String>,
    pub count: Option<i64>,
    pub capabilities: Vec<Vec<String>>,
}

/// The create body: limits, labels, no network, an init as PID 1.
pub fn create_body(spec: &SandboxSpec, owner: &str) -> ContainerCreateBody {
    let mut labels = spec.labels.clone();
    labels.insert(LABEL_MANAGED.into(), "true".into());
    labels.insert(LABEL_OWNER.into(), owner.into());
    let r = &spec.resources;
    let device_requests = (!spec.gpu_ids.is_empty()).then(|| {
        vec![DeviceRequest {
            driver: Some("nvidia".into()),
            device_ids: Some(spec.gpu_ids.clone()),
            capabilities: Some(vec![vec!["gpu".into()]]),
            ..Default::default()
        }]
    });
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        // The harness's supervisor (uploaded before the start), never a program of the
        // image; the init (below) makes stop/kill immediate.
        entrypoint: Some(vec![crate::assets::SUPERVISOR.into(), "idle".into()]),
        cmd: Some(Vec::new()),
        working_dir: Some(WORKDIR.into()),
        user: Some(crate::protect::ROOT.into()),
        labels: Some(labels),
        network_disabled: Some(!r.network),
        env: (!spec.env.is_empty())
            .then(|| spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        tty: Some(false),
        host_config: Some(HostConfig {
            init: Some(true),
            // Pinned to as many cores as it may use, a CPU quota adds nothing but the
            // chance of being throttled; it stays for fractional shares.
            nano_cpus: match &spec.cpuset {
                Some(set) if r.cpus >= harness_core::cpu_plan::cpuset_len(set) as f64 => None,
                _ => Some((r.cpus * 1e9) as i64),
            },
            cpuset_cpus: spec.cpuset.clone(),
            memory: Some(r.memory_bytes),
            // Equal to memory: no swap, so a memory hog is an OOM and not a slow bench.
            memory_swap: Some(r.memory_bytes),
            pids_limit: Some(r.pids),
            network_mode: Some(if r.network { "bridge" } else { "none" }.into()),
            privileged: Some(false),
            // No setuid program gains anything; the seccomp profile is Docker's default
            // plus the run sandbox's calls (see SECCOMP_PROFILE); AppArmor, where the host
            // has it, stays the engine's default.
            security_opt: Some(security_options()),
            // Root keeps a part of Docker's default set (ROOT_CAPABILITIES); the code under
            // test runs as the sandbox user, with no capabilities at all and no_new_privs.
            cap_drop: Some(vec!["ALL".into()]),
            cap_add: Some(ROOT_CAPABILITIES.iter().map(|c| c.to_string()).collect()),
            device_requests,
            // Every place the code under test may write besides the tree and its home is a
            // tmpfs of bounded size, charged to the container's memory: nothing it does
            // fills the host's disk (the tree and the home are bounded by the in-container
            // watchdog, see container/programs/timed_run.py).
            tmpfs: Some(tmpfs_mounts(r)),
            // A private IPC namespace whose /dev/shm is one of the tmpfs above (Docker's own
            // would update access times, which a run could read).
            ipc_mode: Some("none".into()),
            binds: (!spec.binds.is_empty()).then(|| spec.binds.clone()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The tmpfs mounts of a task container: the bench's output (the warden's, not writable by
/// the sandbox user: the timer's files there are reachable only through the descriptors it
/// hands the bench), /tmp, /var/tmp and /dev/shm. None updates access times: each run's
/// layers lie over them, and an access time a run changed below its layer would be seen by
/// the next.
pub fn tmpfs_mounts(r: &Resources) -> HashMap<String, String> {
    HashMap::from([
        (
            BENCH_OUTPUT_MOUNT.to_string(),
            format!(
                "rw,noexec,nosuid,noatime,mode=0755,uid={w},gid={w},size={}",
                r.bench_output_tmpfs(),
                w = crate::protect::WARDEN_UID
            ),
        ),
        (
            "/tmp".to_string(),
            format!("rw,nosuid,nodev,noatime,mode=1777,size={}", r.tmp_tmpfs()),
        ),
        (
            "/var/tmp".to_string(),
            format!(
                "rw,nosuid,nodev,noatime,mode=1777,size={}",
                r.tmp_tmpfs() / 2
            ),
        ),
        (
            "/dev/shm".to_string(),
            format!(
                "rw,nosuid,nodev,noexec,noatime,mode=1777,size={}",
                r.tmp_tmpfs().min(64 << 20)
            ),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_body_limits_and_labels() {
        let spec = SandboxSpec {
            image: "img".into(),
            name_hint: "x".into(),
            labels: HashMap::new(),
            resources: Resources {
                cpus: 1.5,
                memory_bytes: 512 << 20,
                pids: 256,
                network: false,
                gpus: 1,
                disk_bytes: 1 << 30,
            },
            cpuset: Some("1-2".into()),
            gpu_ids: vec!["0".into()],
            env: vec![("HF_TOKEN".into(), "hf_secret".into())],
            binds: Vec::new(),
        };
        let mut one_core = spec.clone();
        one_core.cpuset = Some("1".into());
        let hc1 = create_body(&one_core, "owner").host_config.unwrap();
        assert_eq!(
            hc1.nano_cpus, None,
            "pinned to fewer cores than its share: no quota"
        );
        let body = create_body(&spec, "owner");
        assert_eq!(body.env, Some(vec!["HF_TOKEN=hf_secret".to_string()]));
        let hc = body.host_config.unwrap();
        assert_eq!(
            hc.nano_cpus,
            Some(1_500_000_000),
            "1.5 cpus on 2 cores keeps the quota"
        );
        assert_eq!(hc.memory, Some(512 << 20));
        assert_eq!(hc.memory_swap, Some(512 << 20));
        assert_eq!(hc.pids_limit, Some(256));
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(hc.cpuset_cpus.as_deref(), Some("1-2"));
        assert_eq!(hc.privileged, Some(false));
        assert_eq!(hc.init, Some(true));
        assert_eq!(hc.cap_drop, Some(vec!["ALL".to_string()]));
        let caps = hc.cap_add.unwrap();
        for c in &caps {
            assert!(DOCKER_DEFAULT_CAPABILITIES.contains(&c.as_str()), "{c}");
        }
        assert!(!caps.iter().any(|c| c == "SYS_ADMIN" || c == "NET_ADMIN"));
        let opts = hc.security_opt.unwrap();
        assert!(opts.iter().any(|o| o == "no-new-privileges"));
        assert!(!opts.iter().any(|o| o.starts_with("apparmor")), "{opts:?}");
        assert!(opts.iter().any(|o| o.starts_with("seccomp={")));
        assert_eq!(body.user.as_deref(), Some("0:0"));
        let tmpfs = hc.tmpfs.unwrap();
        assert_eq!(
            tmpfs[BENCH_OUTPUT_MOUNT],
            format!(
                "rw,noexec,nosuid,noatime,mode=0755,uid=10002,gid=10002,size={}",
                (2 * (64u64 << 20)) + (4 << 20)
            )
        );
        // The writable places besides the tree and home are bounded memory file systems.
        assert_eq!(
            tmpfs["/tmp"],
            format!("rw,nosuid,nodev,noatime,mode=1777,size={}", 128u64 << 20)
        );
        assert!(tmpfs["/var/tmp"].contains("size="));
        assert!(tmpfs["/dev/shm"].ends_with(&format!("size={}", 64 << 20)));
        assert_eq!(hc.ipc_mode.as_deref(), Some("none"));
        let dr = &hc.device_requests.unwrap()[0];
        assert_eq!(dr.driver.as_deref(), Some("nvidia"));
        assert_eq!(dr.device_ids.as_deref(), Some(&["0".to_string()][..]));
        assert_eq!(dr.capabilities, Some(vec![vec!["gpu".to_string()]]));
        assert_eq!(body.network_disabled, Some(true));
        assert_eq!(body.labels.unwrap()[LABEL_MANAGED], "true");
    }
}
