//! `harness doctor`: checks what a run needs — the Docker engine, its API, storage driver and
//! free disk, the base image, the NVIDIA runtime, NVML — and says what to do about each.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::core::task::DEFAULT_BASE_IMAGE;
use crate::sandbox::docker::{Engine, EngineInfo};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "OK",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        }
    }
}

/// One line of the diagnosis.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    /// What was found.
    pub found: String,
    /// What to do (empty when nothing is to be done).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fix: String,
}

fn check(name: &'static str, level: Level, found: String, fix: &str) -> Check {
    Check {
        name,
        level,
        found,
        fix: fix.to_string(),
    }
}

#[derive(Debug, Clone, Default)]
pub struct DoctorOptions {
    /// The NVML library to load (None: the driver's libnvidia-ml.so.1).
    pub nvml_lib: Option<PathBuf>,
    /// This host must run GPU tasks: a missing NVML or NVIDIA runtime is a FAIL, not a WARN.
    pub require_gpu: bool,
}

/// Free disk below this at the engine's data folder is a FAIL; below `DISK_WARN`, a WARN.
pub const DISK_FAIL: u64 = 2 << 30;
pub const DISK_WARN: u64 = 10 << 30;

pub use crate::sandbox::disk_gate::disk_space;

/// Bytes in GiB, one decimal.
fn gib(n: u64) -> String {
    format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64)
}

/// Where the engine is, as the harness connects to it.
pub fn docker_host() -> (String, bool) {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if !h.is_empty() => (format!("{h} (from DOCKER_HOST)"), h.starts_with("unix://")),
        _ => (
            "unix:///var/run/docker.sock (default; DOCKER_HOST is not set)".into(),
            true,
        ),
    }
}

fn parse_api(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Runs every check. Checks that need the engine are FAIL (or skipped) when it does not
/// answer; NVML is checked either way.
pub async fn diagnose(opts: &DoctorOptions) -> Vec<Check> {
    let mut out = Vec::new();
    let (host, local) = docker_host();
    let gpu_level = if opts.require_gpu {
        Level::Fail
    } else {
        Level::Warn
    };
    let engine = match Engine::connect().await {
        Ok(e) => {
            out.push(check(
                "docker daemon",
                Level::Ok,
                format!("answers at {host}"),
                "",
            ));
            Some(e)
        }
        Err(e) => {
            out.push(check(
                "docker daemon",
                Level::Fail,
                format!("no answer at {host}: {e:#}"),
                "start the Docker Engine (`sudo systemctl start docker`), check that DOCKER_HOST \
                 names it (unix:///path/docker.sock or tcp://host:2375; an ssh:// engine through a \
                 forwarded socket: `ssh -nNT -L /tmp/docker.sock:/var/run/docker.sock HOST`, \
                 then DOCKER_HOST=unix:///tmp/docker.sock), and that this user may use its \
                 socket (member of the `docker` group, or root)",
            ));
            None
        }
    };
    if let Some(engine) = &engine {
        engine_checks(engine, local, gpu_level, &mut out).await;
    }
    out.push(nvml_check(opts, gpu_level).await);
    out
}

async fn engine_checks(engine: &Engine, local: bool, gpu_level: Level, out: &mut Vec<Check>) {
    let info = match engine.engine_info().await {
        Ok(i) => i,
        Err(e) => {
            out.push(check(
                "docker info",
                Level::Fail,
                format!("{e:#}"),
                "the daemon answers ping but not /info: check its logs (`journalctl -u docker`)",
            ));
            return;
        }
    };
    out.push(api_check(&info));
    out.push(storage_check(&info));
    out.push(disk_check(&info, local));
    out.push(base_image_check(engine).await);
    out.push(sandbox_check(engine).await);
    out.push(runtime_check(&info, gpu_level));
    match engine.orphan_containers().await {
        Ok(o) if o.is_empty() => {}
        Ok(o) => out.push(check(
            "leftover containers",
            Level::Warn,
            format!(
                "{} container(s) of harness runs that are gone: {}",
                o.len(),
                o.iter()
                    .map(|(_, n)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "`harness images gc` removes them (so does the next run)",
        )),
        Err(_) => {}
    }
}

/// The engine's API version: device requests (GPUs) need 1.40; everything else the
/// harness does is older.
fn api_check(info: &EngineInfo) -> Check {
    match parse_api(&info.api_version) {
        Some(v) if v >= (1, 40) => check(
            "docker API",
            Level::Ok,
            format!(
                "Docker {}, API {} (the harness speaks {})",
                info.server_version, info.api_version, info.client_api_version
            ),
            "",
        ),
        _ => check(
            "docker API",
            Level::Warn,
            format!(
                "Docker {}, API {}: older than 1.40, which GPU device requests need",
                info.server_version, info.api_version
            ),
            "upgrade the Docker Engine (20.10 or newer)",
        ),
    }
}

fn storage_check(info: &EngineInfo) -> Check {
    let driver = info
        .storage_driver
        .clone()
        .unwrap_or_else(|| "unknown".into());
    match driver.as_str() {
        "overlay2" | "btrfs" | "zfs" => check("storage driver", Level::Ok, driver, ""),
        "fuse-overlayfs" => check(
            "storage driver",
            Level::Warn,
            "fuse-overlayfs: image builds are slow (about 3.5 s per builder step measured here) \
             and file access in containers goes through FUSE"
                .into(),
            "use overlay2 when the kernel and file system allow (\"storage-driver\": \"overlay2\" \
             in /etc/docker/daemon.json, then restart Docker; images must be built again)",
        ),
        "vfs" => check(
            "storage driver",
            Level::Warn,
            "vfs: every layer is a full copy (slow builds, much disk)".into(),
            "use overlay2 (\"storage-driver\": \"overlay2\" in /etc/docker/daemon.json, then \
             restart Docker)",
        ),
        other => check("storage driver", Level::Ok, other.to_string(), ""),
    }
}

/// Free space where the engine keeps its data (when the engine is local).
fn disk_check(info: &EngineInfo, local: bool) -> Check {
    match (&info.docker_root_dir, local) {
        (None, _) => check(
            "disk free",
            Level::Warn,
            "the engine does not say where it keeps its data".into(),
            "check free space on the engine's host with `docker system df` and `df`",
        ),
        (Some(root), false) => check(
            "disk free",
            Level::Warn,
            format!("the engine is remote: its data folder {root} is on another host"),
            "check free space there (`df` on the engine's host)",
        ),
        (Some(root), true) => match disk_space(Path::new(root)) {
            Ok((free, total, at)) => {
                let found = format!(
                    "{} free of {} at {} (the engine's data folder {root})",
                    gib(free),
                    gib(total),
                    at.display()
                );
                if free < DISK_FAIL {
                    check(
                        "disk free",
                        Level::Fail,
                        found,
                        "free space: `harness images gc`, `docker system prune`, or move Docker's \
                         data-root to a larger disk",
                    )
                } else if free < DISK_WARN {
                    check(
                        "disk free",
                        Level::Warn,
                        found,
                        "little room for task images (each holds its base image's layers once): \
                         `harness images gc` removes the ones no task needs",
                    )
                } else {
                    check("disk free", Level::Ok, found, "")
                }
            }
            Err(e) => check(
                "disk free",
                Level::Warn,
                format!("cannot read free space at {root}: {e}"),
                "check with `df` on the engine's host",
            ),
        },
    }
}

async fn base_image_check(engine: &Engine) -> Check {
    use crate::sandbox::docker::image::{BASE_IMAGE_VERSION, image_label, local_image_id};
    match local_image_id(engine, DEFAULT_BASE_IMAGE).await {
        Ok(Some(id)) => {
            let short = id.trim_start_matches("sha256:");
            let short = &short[..short.len().min(12)];
            let version = image_label(engine, DEFAULT_BASE_IMAGE, "org.harness.base-version")
                .await
                .ok()
                .flatten();
            if version.as_deref() == Some(BASE_IMAGE_VERSION) {
                check(
                    "base image",
                    Level::Ok,
                    format!("{DEFAULT_BASE_IMAGE} present ({short}, version {BASE_IMAGE_VERSION})"),
                    "",
                )
            } else {
                check(
                    "base image",
                    Level::Warn,
                    format!(
                        "{DEFAULT_BASE_IMAGE} ({short}) is of an older version ({}; this harness makes {BASE_IMAGE_VERSION})",
                        version.as_deref().unwrap_or("none")
                    ),
                    "it is made again the first time a task needs it (about two minutes), or now: \
                     `bash scripts/make-base-image.sh`",
                )
            }
        }
        Ok(None) => match crate::sandbox::docker::image::base_image_script() {
            Some(script) => check(
                "base image",
                Level::Warn,
                format!("{DEFAULT_BASE_IMAGE} is missing"),
                &format!(
                    "it is made the first time a task needs it (about two minutes), or now: \
                     `sudo bash {}` (debootstrap + docker import, no registry needed)",
                    script.display()
                ),
            ),
            None => check(
                "base image",
                Level::Fail,
                format!(
                    "{DEFAULT_BASE_IMAGE} is missing and scripts/make-base-image.sh is not found"
                ),
                "run the harness from its repository, or set HARNESS_SCRIPTS to its scripts/ \
                 folder, so the base image can be made",
            ),
        },
        Err(e) => check(
            "base image",
            Level::Fail,
            format!("{e:#}"),
            "the engine does not answer image queries: check its logs",
        ),
    }
}

/// Whether the harness's containers keep Docker's default boundary and can make each timed
/// run's sandbox without privilege: a container of the probe image (the harness's static
/// supervisor alone), made as every container is, reports as root what it may do.
async fn sandbox_check(engine: &Engine) -> Check {
    use crate::sandbox::host_check::{judge, probe};
    match probe(engine).await {
        Ok(report) => match judge(&report) {
            None => check(
                "run sandbox",
                Level::Ok,
                format!(
                    "containers keep Docker's default boundary (root: {}; cgroup mount \
                     refused; seccomp on{}); each timed run gets its own user namespace, \
                     mounts and copy-on-write layer",
                    report["cap_bounding"]
                        .as_array()
                        .map(|a| a
                            .iter()
                            .filter_map(|v| v.as_str())
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default(),
                    report["apparmor"]
                        .as_str()
                        .map(|p| format!(", AppArmor {p}"))
                        .unwrap_or_default()
                ),
                "",
            ),
            Some((why, fix)) => check("run sandbox", Level::Fail, why, &fix),
        },
        Err(e) => check(
            "run sandbox",
            Level::Fail,
            format!("{e:#}"),
            "the engine could not run the harness's probe container: check `docker info`",
        ),
    }
}

fn runtime_check(info: &EngineInfo, gpu_level: Level) -> Check {
    if info.runtimes.iter().any(|r| r == "nvidia") {
        check(
            "nvidia runtime",
            Level::Ok,
            format!("listed (runtimes: {})", info.runtimes.join(", ")),
            "",
        )
    } else {
        check(
            "nvidia runtime",
            gpu_level,
            format!(
                "not listed (runtimes: {}): GPU tasks cannot run here, CPU tasks can",
                if info.runtimes.is_empty() {
                    "none".to_string()
                } else {
                    info.runtimes.join(", ")
                }
            ),
            "install the NVIDIA Container Toolkit and register it with Docker \
             (`sudo nvidia-ctk runtime configure --runtime=docker`, then restart Docker)",
        )
    }
}

async fn nvml_check(opts: &DoctorOptions, gpu_level: Level) -> Check {
    match crate::telemetry::list_gpus(opts.nvml_lib.clone()).await {
        Ok(gpus) if gpus.is_empty() => check(
            "nvml",
            gpu_level,
            "NVML answers but lists no GPU".into(),
            "check the driver with `nvidia-smi`; GPU tasks need at least one device",
        ),
        Ok(gpus) => check(
            "nvml",
            Level::Ok,
            format!(
                "{} GPU(s), driver {}: {}",
                gpus.len(),
                gpus[0].driver_version,
                gpus.iter()
                    .map(|g| format!("{} {}", g.index, g.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "",
        ),
        Err(e) => check(
            "nvml",
            gpu_level,
            format!("{e}: GPU tasks cannot run and get no telemetry here, CPU tasks can"),
            "install the NVIDIA driver (it provides libnvidia-ml.so.1), or name the library with \
             --nvml-lib / HARNESS_NVML_LIB",
        ),
    }
}

/// The text `harness doctor` prints: one line per check, its fix indented below.
pub fn render(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in checks {
        out.push_str(&format!(
            "{:<4}  {:<width$}  {}\n",
            c.level.as_str(),
            c.name,
            c.found
        ));
        if !c.fix.is_empty() {
            out.push_str(&format!("      {:<width$}  fix: {}\n", "", c.fix));
        }
    }
    let fails = checks.iter().filter(|c| c.level == Level::Fail).count();
    let warns = checks.iter().filter(|c| c.level == Level::Warn).count();
    out.push_str(&format!(
        "{} check(s): {} FAIL, {} WARN\n",
        checks.len(),
        fails,
        warns
    ));
    out
}

/// 1 when any check failed, else 0.
pub fn exit_code(checks: &[Check]) -> i32 {
    if checks.iter().any(|c| c.level == Level::Fail) {
        1
    } else {
        0
    }
}

/// `harness doctor`: the checks, as a table or JSON; the exit code says whether to act.
pub async fn command(opts: DoctorOptions, json: bool) -> anyhow::Result<i32> {
    let checks = diagnose(&opts).await;
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "checks": checks }))?
        );
    } else {
        crate::out!(
            "{}",
            crate::core::text::for_terminal_block(&render(&checks))
        );
    }
    Ok(exit_code(&checks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_space_of_a_missing_folder_is_its_parents() {
        let d = tempfile::tempdir().unwrap();
        let (free, total, at) = disk_space(&d.path().join("not/there")).unwrap();
        assert!(total > 0 && free <= total);
        assert_eq!(at, d.path());
    }

    #[test]
    fn api_versions() {
        assert_eq!(parse_api("1.41"), Some((1, 41)));
        assert!(parse_api("1.41").unwrap() >= (1, 40));
        assert!(parse_api("1.9").unwrap() < (1, 40));
        assert_eq!(parse_api("x"), None);
    }
}
