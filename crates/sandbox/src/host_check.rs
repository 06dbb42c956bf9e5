//! Whether this host's engine lets the harness make each run's sandbox without privilege:
//! a container made as the harness makes every container (Docker's default capabilities or
//! fewer, the harness's seccomp profile, AppArmor as the engine has it), of an image holding
//! nothing but the harness's static supervisor, runs `harness-supervisor probe` as root once.
//! `harness doctor` shows it; every run checks it before its first task container and stops
//! naming the fix when the host refuses what the design needs.

use std::collections::HashMap;

use anyhow::{Context, Result};
use futures::StreamExt;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::docker::container::Sandbox;
use crate::docker::spec::{DOCKER_DEFAULT_CAPABILITIES, SandboxSpec};
use crate::docker::{Engine, LABEL_MANAGED};

/// The probe image's repository; its tag is a digest of the archive it is imported from.
const PROBE_REPOSITORY: &str = "harness-probe";

/// The probe image: the supervisor and the folders a container needs, nothing of anyone
/// else's (made with the engine's import, no registry, no base image).
pub async fn ensure_probe_image(engine: &Engine) -> Result<String> {
    let supervisor = crate::assets::ASSETS
        .iter()
        .find(|a| format!("/{}", a.path) == crate::assets::SUPERVISOR)
        .context("the supervisor is missing from the harness's assets")?;
    let mut b = tar::Builder::new(Vec::new());
    // Every parent named: an engine makes a missing one with a mode of its own (a rootless
    // engine's is 0600, and then nobody may reach the supervisor).
    for (dir, mode) in [
        ("tmp", 0o1777),
        ("testbed", 0o755),
        ("etc", 0o755),
        ("opt", 0o755),
        ("opt/harness", 0o755),
        ("opt/harness/bin", 0o755),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(mode);
        h.set_size(0);
        b.append_data(&mut h, dir, std::io::empty())?;
    }
    let mut h = tar::Header::new_gnu();
    h.set_size(supervisor.bytes.len() as u64);
    h.set_mode(0o755);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, supervisor.path, supervisor.bytes)?;
    let body = b.into_inner()?;
    // Named by the whole archive, so a change of its layout is a new image too.
    let tag = format!(
        "{PROBE_REPOSITORY}:{}",
        &hex::encode(Sha256::digest(&body))[..16]
    );
    if crate::docker::image::local_image_id(engine, &tag)
        .await?
        .is_some()
    {
        return Ok(tag);
    }
    let (repo, version) = tag.split_once(':').unwrap_or((PROBE_REPOSITORY, "latest"));
    let opts = bollard::query_parameters::CreateImageOptionsBuilder::new()
        .from_src("-")
        .repo(repo)
        .tag(version)
        .changes(vec![format!("LABEL {LABEL_MANAGED}=true")])
        .build();
    let mut progress =
        engine
            .api
            .create_image(Some(opts), Some(bollard::body_full(body.into())), None);
    while let Some(item) = progress.next().await {
        item.context("cannot import the harness's probe image")?;
    }
    Ok(tag)
}

/// The probe's report from a container of the probe image.
pub async fn probe(engine: &Engine) -> Result<Value> {
    let image = ensure_probe_image(engine).await?;
    let spec = SandboxSpec {
        image,
        name_hint: "probe".into(),
        labels: HashMap::new(),
        resources: harness_core::task::Resources {
            cpus: 1.0,
            memory_bytes: 256 << 20,
            pids: 64,
            network: false,
            gpus: 0,
            disk_bytes: 64 << 20,
        },
        cpuset: None,
        gpu_ids: Vec::new(),
        env: Vec::new(),
        binds: Vec::new(),
    };
    let sandbox = Sandbox::start(engine, &spec).await?;
    let out = sandbox
        .supervisor(
            &["probe".to_string()],
            &[],
            std::time::Duration::from_secs(60),
            64 * 1024,
        )
        .await;
    let _ = sandbox.remove().await;
    let out = out?;
    let line = out.output.lines().last().unwrap_or("");
    serde_json::from_str(line)
        .with_context(|| format!("the probe gave no report: {}", out.output.trim()))
}

/// Why the probe's report breaks the boundary the harness promises, or what the host
/// refuses of the design, with the fix; None when every check holds.
pub fn judge(report: &Value) -> Option<(String, String)> {
    let names = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let beyond: Vec<String> = names("cap_bounding")
        .into_iter()
        .filter(|c| !DOCKER_DEFAULT_CAPABILITIES.contains(&c.as_str()))
        .collect();
    if !beyond.is_empty() {
        return Some((
            format!(
                "root in the harness's containers holds {} beyond Docker's default set",
                beyond.join(", ")
            ),
            "the engine adds capabilities to every container (a daemon default or a plugin): \
             run the harness on an engine that does not"
                .into(),
        ));
    }
    let cgroup = report["cgroup_mount"].as_str().unwrap_or("");
    if !cgroup.starts_with("refused") {
        return Some((
            format!("root in the harness's containers can mount a cgroup: {cgroup}"),
            "the host's cgroups are within reach of container root: run the harness on an \
             engine with its default security (seccomp and AppArmor on, no added privilege)"
                .into(),
        ));
    }
    if report["seccomp"].as_str() != Some("2") || report["no_new_privs"].as_str() != Some("1") {
        return Some((
            format!(
                "the engine did not apply the harness's seccomp profile or no-new-privileges \
                 (seccomp mode {}, no_new_privs {})",
                report["seccomp"], report["no_new_privs"]
            ),
            "run the harness on a Docker Engine with seccomp support (`docker info` lists \
             `seccomp` under Security Options)"
                .into(),
        ));
    }
    let sandbox = report["sandbox"].as_str().unwrap_or("no report");
    if sandbox != "ok" {
        let apparmor = report["apparmor"].as_str().unwrap_or("");
        let fix = if apparmor.starts_with("docker-default") {
            "AppArmor's docker-default profile refuses mount(2), which each run's sandbox makes \
             in a user namespace of its own: load the harness's profile, `sudo apparmor_parser \
             -r -W container/apparmor/harness-sandbox`, and run with \
             HARNESS_APPARMOR_PROFILE=harness-sandbox"
        } else if sandbox.contains("clone") {
            "the kernel refuses an unprivileged user namespace (`sysctl user.max_user_namespaces` \
             must be above 0; on Ubuntu 23.10 and later also \
             `kernel.apparmor_restrict_unprivileged_userns=0`, or the harness's AppArmor \
             profile), or the engine ignored the harness's seccomp profile"
        } else {
            "see the message: each timed run's sandbox is a user namespace with its own mounts, \
             made by the harness's supervisor without any capability on the host"
        };
        return Some((
            format!("each run's sandbox cannot be made here: {sandbox}"),
            fix.into(),
        ));
    }
    None
}

/// Stops a run before its first task container when the host refuses what each run's
/// sandbox needs, or its containers would hold more than Docker's default boundary.
pub async fn require(engine: &Engine) -> Result<()> {
    let report = probe(engine)
        .await
        .context("cannot check this host's containers before the run (`harness doctor`)")?;
    if let Some((why, fix)) = judge(&report) {
        anyhow::bail!("{why}\n  fix: {fix}\n  (`harness doctor` checks it again)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_judged_by_what_the_boundary_promises() {
        let good = serde_json::json!({
            "cap_bounding": ["CHOWN", "SETUID", "KILL"],
            "cgroup_mount": "refused: mount ...: Permission denied",
            "seccomp": "2", "no_new_privs": "1", "sandbox": "ok", "apparmor": null
        });
        assert!(judge(&good).is_none());
        let mut admin = good.clone();
        admin["cap_bounding"] = serde_json::json!(["CHOWN", "SYS_ADMIN"]);
        assert!(judge(&admin).unwrap().0.contains("SYS_ADMIN"));
        let mut mounted = good.clone();
        mounted["cgroup_mount"] = "mounted (cgroup, undone at once)".into();
        assert!(judge(&mounted).unwrap().0.contains("cgroup"));
        let mut armored = good.clone();
        armored["sandbox"] = "mount tmpfs on /opt: Permission denied".into();
        armored["apparmor"] = "docker-default (enforce)".into();
        assert!(judge(&armored).unwrap().1.contains("apparmor_parser"));
    }
}
