//! The run's file systems: the container's tree, remade in a fresh mount namespace (owned by
//! the run's user namespace) so that nothing a run writes outlives it.
//!
//! The tree is the container's, bound whole (its masks over /proc and /sys come with it,
//! fixed by the kernel), and then, for each mount of `/proc/self/mountinfo` (not a list of
//! places):
//! - a writable tmpfs with nothing mounted inside it (/tmp, /var/tmp, /dev/shm) is replaced
//!   by a fresh, empty folder of that tmpfs's owner and mode: nothing the install, the test
//!   or an earlier run left there, nor the pages a read of it would allocate, is under a run
//!   (a tmpfs allocates a page when a hole of its file is read through a mapping: a lower
//!   layer on one would be memory a run can shape and the next one read);
//! - another writable directory mount with nothing mounted inside it (a volume...) gets an
//!   overlay: its lower layer is the mount itself, bound read-only, its upper layer a folder
//!   on one tmpfs made for this run alone;
//! - every other writable mount (the root, /dev, a file bound in) is made read-only where
//!   it is (device nodes stay usable: writing to a device is no write to the file system),
//!   and the folders of it the sandbox user may write (`--layer`: the tree, its home) get
//!   an overlay each;
//! - `/dev/mqueue` is made new for the run's IPC namespace; devpts and what is read-only
//!   already stay as they are.
//!
//! So the run can write nowhere but in a layer of its own, whatever the permissions say.
//! The new tree is moved onto `/` and the run chroots into it; the tmpfs of upper layers is
//! reachable from nowhere inside. When the run's last process is gone the namespace, its
//! mounts and the tmpfs go with it.
//!
//! /proc: a run gets a /proc of its own PID namespace where the kernel allows one (only
//! where no mask hides part of the container's /proc); under Docker's masks it keeps the
//! container's /proc, masks and all.

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
    /// A fresh, empty folder in its place (a tmpfs: nothing of it is under the run).
    Fresh(MountInfo),
    /// Made read-only where it is.
    ReadOnly(MountInfo),
    /// A new mqueue file system (the run's IPC namespace's queues).
    Mqueue(MountInfo),
    /// Left as the container has it: read-only already, a pseudo-terminal's devpts, /proc.
    Keep(MountInfo),
}

/// File systems with no files of their own to keep, or none the sandbox user may write.
const PSEUDO: &[&str] = &[
    "sysfs",
    "cgroup",
    "cgroup2",
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

/// Whether something is mounted inside `m` (below its mount point).
fn has_mounts_inside(mounts: &[MountInfo], point: &str) -> bool {
    mounts
        .iter()
        .any(|o| o.point != point && under(&o.point, point) && point != "/")
        || (point == "/" && mounts.iter().any(|o| o.point != "/"))
}

/// The steps for every mount but `/` (made read-only last), parents before children.
/// `is_dir` says whether a mount point is a folder.
pub fn plan(mounts: &[MountInfo], staging: &str, is_dir: &dyn Fn(&str) -> bool) -> Vec<Step> {
    let mut list: Vec<&MountInfo> = mounts
        .iter()
        .filter(|m| m.point != "/" && !under(&m.point, staging))
        .collect();
    list.sort_by_key(|m| m.point.matches('/').count());
    list.into_iter()
        .map(|m| {
            let m = m.clone();
            if under(&m.point, "/proc") || !m.writable() || m.fstype == "devpts" {
                Step::Keep(m)
            } else if m.fstype == "mqueue" {
                Step::Mqueue(m)
            } else if !PSEUDO.contains(&m.fstype.as_str())
                && m.point != "/dev"
                && is_dir(&m.point)
                && !has_mounts_inside(mounts, &m.point)
            {
                if m.fstype == "tmpfs" {
                    Step::Fresh(m)
                } else {
                    Step::Overlay(m)
                }
            } else {
                Step::ReadOnly(m)
            }
        })
        .collect()
}

/// The mount that holds `path`: the last one whose point is `path` or above it.
pub fn holding(mounts: &[MountInfo], path: &str) -> Option<MountInfo> {
    mounts
        .iter()
        .filter(|m| under(path, &m.point))
        .max_by_key(|m| m.point.len())
        .cloned()
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

/// Builds the run's tree under `staging` (a tmpfs already mounted there) and enters it, with
/// a layer over each folder of `layers` (folders the sandbox user may write on a mount that
/// is otherwise made read-only). Returns the overlays made: (where, the name of its upper
/// folder in `staging`).
pub fn enter_fresh_root(
    mounts: &[MountInfo],
    staging: &str,
    layers: &[String],
) -> Result<Vec<(String, String)>> {
    let root = format!("{staging}/root");
    let root_info = holding(mounts, "/").ok_or("no root mount in /proc/self/mountinfo")?;
    sys::mkdir_p(&root, 0o755)?;
    sys::mount("/", &root, None, libc::MS_BIND | libc::MS_REC, None)?;
    // The copy of the staging tmpfs in the run's tree (it was mounted when / was bound).
    sys::umount_detach(&format!("{root}{staging}"))?;
    let is_dir = |p: &str| std::fs::metadata(p).map(|m| m.is_dir()).unwrap_or(false);
    let mut overlays: Vec<(String, String)> = Vec::new();
    for dir in layers.iter().filter(|d| is_dir(d)) {
        if let Some(inside) = mounts
            .iter()
            .find(|m| m.point != *dir && under(&m.point, dir))
        {
            return Err(format!(
                "cannot make a layer over {dir}: {} is mounted inside it",
                inside.point
            ));
        }
        let holder = holding(mounts, dir).unwrap_or_else(|| root_info.clone());
        let n = overlays.len();
        overlay(&holder, dir, &format!("{root}{dir}"), staging, n)?;
        overlays.push((dir.clone(), format!("u{n}")));
    }
    for step in plan(mounts, staging, &is_dir) {
        match step {
            Step::Overlay(m) => {
                let n = overlays.len();
                overlay(&m, &m.point, &format!("{root}{}", m.point), staging, n)?;
                overlays.push((m.point.clone(), format!("u{n}")));
            }
            Step::Fresh(m) => {
                let n = overlays.len();
                fresh_place(&m, &format!("{root}{}", m.point), staging, n)?;
                overlays.push((m.point.clone(), format!("u{n}")));
            }
            Step::ReadOnly(m) => read_only(&format!("{root}{}", m.point), &m)?,
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
            Step::Keep(_) => {}
        }
    }
    read_only(&root, &root_info)?;
    sys::chdir(&root)?;
    sys::mount(".", "/", None, libc::MS_MOVE, None)?;
    sys::chroot(".")?;
    sys::chdir("/")?;
    Ok(overlays)
}

/// Makes the mount at `target` (a copy of `m`) read-only, keeping the flags the kernel
/// locks (nosuid, nodev, noexec; access times are kept by a bind remount).
fn read_only(target: &str, m: &MountInfo) -> Result<()> {
    sys::mount(
        "none",
        target,
        None,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | m.restrict_flags(),
        None,
    )
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

/// An empty folder of the staging tmpfs bound at `target` (where mount `m` was), with the
/// owner and mode of `m`'s root and its nosuid/nodev/noexec: the run's own place.
fn fresh_place(m: &MountInfo, target: &str, staging: &str, n: usize) -> Result<()> {
    let place = format!("{staging}/u{n}");
    sys::mkdir_p(&place, 0o755)?;
    copy_owner_and_mode(&m.point, &place);
    ensure_target(target, true)?;
    sys::mount(&place, target, None, libc::MS_BIND, None)?;
    sys::mount(
        "none",
        target,
        None,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NOATIME | m.restrict_flags(),
        None,
    )
}

/// `to` gets the owner and mode `from` has (best effort: a folder this process made).
fn copy_owner_and_mode(from: &str, to: &str) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(meta) = std::fs::metadata(from) else {
        return;
    };
    let _ = std::fs::set_permissions(to, std::fs::Permissions::from_mode(meta.mode()));
    if let Ok(c) = sys::cstr(to) {
        // SAFETY: a valid C string; chown of a folder this process made.
        unsafe {
            libc::chown(c.as_ptr(), meta.uid(), meta.gid());
        }
    }
}

/// An overlay at `target` whose lower layer is `source` (on mount `m`), bound read-only,
/// and whose upper layer is new, on the staging tmpfs.
fn overlay(m: &MountInfo, source: &str, target: &str, staging: &str, n: usize) -> Result<()> {
    let lower = format!("{staging}/l{n}");
    let upper = format!("{staging}/u{n}");
    let work = format!("{staging}/w{n}");
    for d in [&lower, &upper, &work] {
        sys::mkdir_p(d, 0o755)?;
    }
    sys::mount(source, &lower, None, libc::MS_BIND, None)?;
    read_only(&lower, m)?;
    // The upper layer's root starts as the lower's root is: same owner and mode.
    copy_owner_and_mode(&lower, &upper);
    ensure_target(target, true)?;
    let layers = format!("lowerdir={lower},upperdir={upper},workdir={work}");
    let flags = libc::MS_NOATIME | m.restrict_flags();
    // In a user namespace an overlay keeps its own marks in user.* attributes.
    sys::mount(
        "overlay",
        target,
        Some("overlay"),
        flags,
        Some(&format!("{layers},userxattr")),
    )
    .or_else(|_| sys::mount("overlay", target, Some("overlay"), flags, Some(&layers)))
}

/// A /proc of the run's own PID namespace, with the container's masks remade, where the
/// kernel allows it: true when made. Under a mask the kernel refuses it (a user namespace
/// may mount proc only where the container's /proc is fully visible) and the run keeps the
/// container's /proc, masks and all.
pub fn own_proc(masks: &[(String, ProcMask)]) -> Result<bool> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    if sys::mount("proc", "/proc", Some("proc"), flags, None).is_err() {
        return Ok(false);
    }
    for (path, how) in masks {
        if std::fs::symlink_metadata(path).is_err() {
            continue;
        }
        match how {
            ProcMask::ReadOnly => {
                sys::mount(path, path, None, libc::MS_BIND, None)?;
                sys::mount(
                    "none",
                    path,
                    None,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                    None,
                )?
            }
            ProcMask::EmptyDir => sys::mount(
                "tmpfs",
                path,
                Some("tmpfs"),
                libc::MS_RDONLY | flags,
                Some("size=0"),
            )?,
            ProcMask::Null => sys::mount("/dev/null", path, None, libc::MS_BIND, None)?,
        }
    }
    Ok(true)
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
        // The container's tmpfs: a fresh, empty place, nothing of it under the run; a
        // volume on a disk: a layer over it.
        assert!(matches!(find("/tmp"), Step::Fresh(_)));
        assert!(matches!(find("/dev/shm"), Step::Fresh(_)));
        assert!(matches!(find("/my data"), Step::Overlay(_)));
        // A writable mount with mounts inside it cannot be a layer (the kernel refuses a
        // lower layer with locked mounts under it): read-only.
        assert!(matches!(find("/sys/fs/cgroup"), Step::ReadOnly(_)));
        assert!(matches!(find("/sys/fs/cgroup/cpu"), Step::Keep(_)));
        assert!(matches!(find("/dev"), Step::ReadOnly(_)));
        assert!(matches!(find("/etc/hosts"), Step::ReadOnly(_)));
        assert!(matches!(find("/dev/pts"), Step::Keep(_)));
        assert!(matches!(find("/dev/mqueue"), Step::Mqueue(_)));
        assert!(
            steps
                .iter()
                .filter(|s| point(s).starts_with("/proc"))
                .all(|s| matches!(s, Step::Keep(_)))
        );
        // Every writable mount is covered by a rule that keeps nothing.
        for m in mounts
            .iter()
            .filter(|m| m.writable() && m.point != "/" && !m.point.starts_with("/proc"))
        {
            let kept = matches!(find(&m.point), Step::Keep(_)) && m.fstype != "devpts";
            assert!(!kept, "{} stays writable", m.point);
        }
        // Parents first.
        let pos = |p: &str| steps.iter().position(|s| point(s) == p).unwrap();
        assert!(pos("/dev") < pos("/dev/shm"));
        assert!(pos("/sys") < pos("/sys/fs/cgroup"));
        assert!(pos("/sys/fs/cgroup") < pos("/sys/fs/cgroup/cpu"));
        assert_eq!(holding(&mounts, "/testbed").unwrap().point, "/");
        assert_eq!(holding(&mounts, "/dev/shm/x").unwrap().point, "/dev/shm");
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
            Step::Overlay(m)
            | Step::Fresh(m)
            | Step::Mqueue(m)
            | Step::ReadOnly(m)
            | Step::Keep(m) => &m.point,
        }
    }
}
