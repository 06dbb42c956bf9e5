//! The run's file systems: every mount of the container, remade in a fresh mount namespace
//! so that nothing a run writes outlives it.
//!
//! The rule, applied to each mount of `/proc/self/mountinfo` (not to a list of places):
//! - a writable directory mount (the root, /tmp, /dev/shm, a volume...) gets an overlay: its
//!   lower layer is the mount itself, bound read-only without access-time updates, its upper
//!   layer a folder on one tmpfs made for this run alone;
//! - `/dev` and every other writable mount that is not a directory (a file bound in, a
//!   device) is bound read-only (device nodes stay usable: writing to a device is no write
//!   to the file system);
//! - `/proc` and `/dev/mqueue` are made new for the run's PID and IPC namespaces, with the
//!   container's masks over /proc remade;
//! - what is read-only already (sysfs, cgroups, masks) is bound as it is; devpts too.
//!
//! The new tree is moved onto `/` and the run chroots into it; the tmpfs of upper layers is
//! reachable from nowhere inside. When the run's last process is gone the namespace, its
//! mounts and the tmpfs go with it.

use crate::sys::{self, Result};

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq)]
pub struct MountInfo {
    /// The folder (or file) the mount covers.
    pub point: String,
    /// The part of its file system it shows (`/` for the whole; `/null` for a bound file).
    pub root: String,
    pub fstype: String,
    /// Per-mount options: `rw`/`ro`, `nosuid`, `nodev`, `noexec`, `noatime`, ...
    pub options: Vec<String>,
}

impl MountInfo {
    pub fn writable(&self) -> bool {
        self.options.iter().any(|o| o == "rw")
    }

    /// MS_NOSUID, MS_NODEV, MS_NOEXEC as the mount has them.
    pub fn restrict_flags(&self) -> libc::c_ulong {
        let mut f = 0;
        for o in &self.options {
            f |= match o.as_str() {
                "nosuid" => libc::MS_NOSUID,
                "nodev" => libc::MS_NODEV,
                "noexec" => libc::MS_NOEXEC,
                _ => 0,
            };
        }
        f
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 4 <= bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(v as u8);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn parse(text: &str) -> Vec<MountInfo> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if fields.len() < 6 || sep + 1 >= fields.len() {
            continue;
        }
        out.push(MountInfo {
            root: unescape(fields[3]),
            point: unescape(fields[4]),
            options: fields[5].split(',').map(str::to_string).collect(),
            fstype: fields[sep + 1].to_string(),
        });
    }
    out
}

/// What the run does with one mount.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A copy-on-write layer over it.
    Overlay(MountInfo),
    /// Bound as it is, read-only when `read_only`.
    Bind { mount: MountInfo, read_only: bool },
    /// A new mqueue file system (the run's IPC namespace's queues).
    Mqueue(MountInfo),
}

/// File systems with no files of their own to keep, or none the sandbox user may write.
const PSEUDO: &[&str] = &[
    "sysfs",
    "cgroup",
    "cgroup2",
    "devpts",
    "securityfs",
    "debugfs",
    "tracefs",
    "bpf",
    "fusectl",
    "pstore",
    "configfs",
    "binfmt_misc",
    "nsfs",
    "hugetlbfs",
];

fn under(path: &str, top: &str) -> bool {
    path == top || path.starts_with(&format!("{}/", top.trim_end_matches('/')))
}

/// The steps for every mount but `/` (the root's overlay is made first) and /proc's
/// (remade after the new /proc), parents before children. `is_dir` says whether a mount
/// point is a folder.
pub fn plan(mounts: &[MountInfo], staging: &str, is_dir: &dyn Fn(&str) -> bool) -> Vec<Step> {
    let mut list: Vec<&MountInfo> = mounts
        .iter()
        .filter(|m| m.point != "/" && !under(&m.point, "/proc") && !under(&m.point, staging))
        .collect();
    list.sort_by_key(|m| m.point.matches('/').count());
    list.into_iter()
        .map(|m| {
            let m = m.clone();
            if m.fstype == "mqueue" {
                Step::Mqueue(m)
            } else if PSEUDO.contains(&m.fstype.as_str()) {
                Step::Bind {
                    read_only: m.fstype != "devpts",
                    mount: m,
                }
            } else if m.writable() && m.point != "/dev" && is_dir(&m.point) {
                Step::Overlay(m)
            } else {
                Step::Bind {
                    read_only: true,
                    mount: m,
                }
            }
        })
        .collect()
}

/// The masks Docker puts over /proc, to remake on the new /proc: (path, how).
pub fn proc_masks(mounts: &[MountInfo]) -> Vec<(String, ProcMask)> {
    let mut out = Vec::new();
    for m in mounts {
        if !m.point.starts_with("/proc/") {
            continue;
        }
        let how = if m.fstype == "proc" {
            ProcMask::ReadOnly
        } else if m.root == "/" && !m.writable() {
            ProcMask::EmptyDir
        } else if m.root != "/" {
            ProcMask::Null
        } else {
            // Not one of Docker's masks (a runtime's own files under /proc, as NVIDIA's
            // /proc/driver/nvidia): the new /proc shows the kernel's own there.
            continue;
        };
        out.push((m.point.clone(), how));
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProcMask {
    /// A part of /proc bound onto itself read-only (/proc/sys, /proc/irq...).
    ReadOnly,
    /// A folder hidden under an empty read-only tmpfs (/proc/acpi).
    EmptyDir,
    /// A file hidden under /dev/null (/proc/kcore, /proc/keys...).
    Null,
}

/// Builds the run's tree under `staging` (a tmpfs already mounted there) and enters it.
/// Returns the number of overlays made.
pub fn enter_fresh_root(mounts: &[MountInfo], staging: &str) -> Result<usize> {
    let root = format!("{staging}/root");
    let root_info = mounts
        .iter()
        .rev()
        .find(|m| m.point == "/")
        .cloned()
        .ok_or("no root mount in /proc/self/mountinfo")?;
    overlay(&root_info, "/", &root, staging, 0)?;
    let is_dir = |p: &str| std::fs::metadata(p).map(|m| m.is_dir()).unwrap_or(false);
    let steps = plan(mounts, staging, &is_dir);
    let mut overlays = 1;
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Overlay(m) => {
                overlay(m, &m.point, &format!("{root}{}", m.point), staging, i + 1)?;
                overlays += 1;
            }
            Step::Bind { mount, read_only } => {
                let target = format!("{root}{}", mount.point);
                ensure_target(&target, is_dir(&mount.point))?;
                bind(&mount.point, &target, *read_only, mount.restrict_flags())?;
            }
            Step::Mqueue(m) => {
                let target = format!("{root}{}", m.point);
                ensure_target(&target, true)?;
                sys::mount(
                    "mqueue",
                    &target,
                    Some("mqueue"),
                    m.restrict_flags() | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    None,
                )?;
            }
        }
    }
    sys::chdir(&root)?;
    sys::mount(".", "/", None, libc::MS_MOVE, None)?;
    sys::chroot(".")?;
    sys::chdir("/")?;
    Ok(overlays)
}

fn ensure_target(target: &str, dir: bool) -> Result<()> {
    if std::fs::symlink_metadata(target).is_ok() {
        return Ok(());
    }
    if dir {
        sys::mkdir_p(target, 0o755)
    } else {
        if let Some(parent) = std::path::Path::new(target).parent() {
            sys::mkdir_p(&parent.to_string_lossy(), 0o755)?;
        }
        std::fs::File::create(target)
            .map(|_| ())
            .map_err(|e| format!("create {target}: {e}"))
    }
}

/// Binds `source` (one mount, not those under it) onto `target`.
fn bind(source: &str, target: &str, read_only: bool, restrict: libc::c_ulong) -> Result<()> {
    sys::mount(source, target, None, libc::MS_BIND, None)?;
    if read_only {
        sys::mount(
            "none",
            target,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | restrict,
            None,
        )?;
    }
    Ok(())
}

/// An overlay at `target` whose lower layer is the mount at `source`, read-only and with no
/// access-time updates, and whose upper layer is new, on the staging tmpfs.
fn overlay(m: &MountInfo, source: &str, target: &str, staging: &str, n: usize) -> Result<()> {
    let lower = format!("{staging}/l{n}");
    let upper = format!("{staging}/u{n}");
    let work = format!("{staging}/w{n}");
    for d in [&lower, &upper, &work] {
        sys::mkdir_p(d, 0o755)?;
    }
    sys::mount(source, &lower, None, libc::MS_BIND, None)?;
    sys::mount(
        "none",
        &lower,
        None,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOATIME | m.restrict_flags(),
        None,
    )?;
    // The upper layer's root starts as the lower's root is: same owner and mode.
    if let Ok(meta) = std::fs::metadata(&lower) {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let _ = std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(meta.mode()));
        let c = sys::cstr(&upper)?;
        // SAFETY: a valid C string; chown of a folder this process made.
        unsafe {
            libc::chown(c.as_ptr(), meta.uid(), meta.gid());
        }
    }
    ensure_target(target, true)?;
    sys::mount(
        "overlay",
        target,
        Some("overlay"),
        libc::MS_NOATIME | m.restrict_flags(),
        Some(&format!("lowerdir={lower},upperdir={upper},workdir={work}")),
    )
}

/// The new /proc of the run's PID namespace, with the container's masks remade.
pub fn mount_proc(masks: &[(String, ProcMask)]) -> Result<()> {
    sys::mount(
        "proc",
        "/proc",
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    for (path, how) in masks {
        if std::fs::symlink_metadata(path).is_err() {
            continue;
        }
        match how {
            ProcMask::ReadOnly => bind(path, path, true, libc::MS_NOSUID | libc::MS_NODEV)?,
            ProcMask::EmptyDir => sys::mount(
                "tmpfs",
                path,
                Some("tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                Some("size=0"),
            )?,
            ProcMask::Null => sys::mount("/dev/null", path, None, libc::MS_BIND, None)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKER: &str = "\
69 45 0:39 / / rw,nodev,noatime master:2 - fuse.fuse-overlayfs fuse-overlayfs rw
70 69 0:41 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
71 69 0:42 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
72 71 0:43 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
73 69 0:44 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
74 73 0:45 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
75 74 0:29 /docker/x /sys/fs/cgroup/cpu ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu
84 71 0:40 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw
85 71 0:46 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
86 69 0:47 / /tmp rw,nosuid,nodev,relatime - tmpfs tmpfs rw
87 69 254:0 /var/lib/docker/containers/x/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw
88 69 0:50 / /my\\040data rw,relatime - ext4 /dev/vdb rw
46 70 0:41 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw
50 70 0:48 / /proc/acpi ro,relatime - tmpfs tmpfs ro
51 70 0:42 /null /proc/keys rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
53 73 0:49 / /sys/firmware ro,relatime - tmpfs tmpfs ro
";

    #[test]
    fn every_writable_mount_is_a_layer_or_read_only() {
        let mounts = parse(DOCKER);
        assert_eq!(mounts[11].point, "/my data");
        let dirs = [
            "/dev",
            "/dev/pts",
            "/sys",
            "/sys/fs/cgroup",
            "/dev/shm",
            "/tmp",
            "/my data",
        ];
        let is_dir = |p: &str| dirs.contains(&p) || p.starts_with("/sys/");
        let steps = plan(&mounts, "/opt/harness/layers", &is_dir);
        let find = |p: &str| steps.iter().find(|s| point(s) == p).cloned().unwrap();
        assert!(matches!(find("/tmp"), Step::Overlay(_)));
        assert!(matches!(find("/dev/shm"), Step::Overlay(_)));
        assert!(matches!(find("/my data"), Step::Overlay(_)));
        assert!(matches!(find("/sys/fs/cgroup"), Step::Overlay(_)));
        assert!(matches!(
            find("/sys/fs/cgroup/cpu"),
            Step::Bind {
                read_only: true,
                ..
            }
        ));
        assert!(matches!(
            find("/dev"),
            Step::Bind {
                read_only: true,
                ..
            }
        ));
        assert!(matches!(
            find("/etc/hosts"),
            Step::Bind {
                read_only: true,
                ..
            }
        ));
        assert!(matches!(
            find("/dev/pts"),
            Step::Bind {
                read_only: false,
                ..
            }
        ));
        assert!(matches!(find("/dev/mqueue"), Step::Mqueue(_)));
        assert!(steps.iter().all(|s| !point(s).starts_with("/proc")));
        // Every writable mount is covered by a rule that keeps nothing.
        for m in mounts
            .iter()
            .filter(|m| m.writable() && m.point != "/" && !m.point.starts_with("/proc"))
        {
            let s = find(&m.point);
            let kept = matches!(
                s,
                Step::Bind {
                    read_only: false,
                    ..
                }
            ) && m.fstype != "devpts";
            assert!(!kept, "{} stays writable", m.point);
        }
        // Parents first.
        let pos = |p: &str| steps.iter().position(|s| point(s) == p).unwrap();
        assert!(pos("/dev") < pos("/dev/shm"));
        assert!(pos("/sys") < pos("/sys/fs/cgroup"));
        assert!(pos("/sys/fs/cgroup") < pos("/sys/fs/cgroup/cpu"));
    }

    #[test]
    fn proc_masks_are_remade_as_docker_made_them() {
        let masks = proc_masks(&parse(DOCKER));
        assert_eq!(
            masks,
            vec![
                ("/proc/sys".to_string(), ProcMask::ReadOnly),
                ("/proc/acpi".to_string(), ProcMask::EmptyDir),
                ("/proc/keys".to_string(), ProcMask::Null),
            ]
        );
    }

    fn point(s: &Step) -> &str {
        match s {
            Step::Overlay(m) | Step::Mqueue(m) | Step::Bind { mount: m, .. } => &m.point,
        }
    }
}
