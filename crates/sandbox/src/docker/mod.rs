//! The Docker engine, through bollard: connection, labels, and finding what this harness
//! left behind.

pub mod calls;
pub mod container;
pub mod derived;
pub mod image;
pub mod spec;
pub mod task_images;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use calls::{CallGate, Repeat};

/// Every container and image this harness makes carries `LABEL_MANAGED=true`.
pub const LABEL_MANAGED: &str = "org.harness.managed";
/// The process that made a container: `host:pid:start-ticks`.
pub const LABEL_OWNER: &str = "org.harness.owner";
pub const LABEL_RUN: &str = "org.harness.run";
pub const LABEL_INSTANCE: &str = "org.harness.instance";
pub const LABEL_VARIANT: &str = "org.harness.variant";
pub const LABEL_DIGEST: &str = "org.harness.digest";

/// A connection to the engine, plus the set of containers this process has running, so
/// Ctrl-C can remove them.
#[derive(Clone)]
pub struct Engine {
    pub(crate) api: bollard::Docker,
    /// Bounds and retries every call.
    pub(crate) gate: CallGate,
    owner: String,
    live: Arc<Mutex<BTreeSet<String>>>,
}

impl Engine {
    /// Connects (honouring `DOCKER_HOST`) and checks the daemon answers. bollard's
    /// `connect_with_defaults` reads `DOCKER_HOST` (`connect_with_local_defaults` would take
    /// only `unix://`); with the crate features this build enables (bollard's defaults) that
    /// is `unix://PATH` and `tcp://HOST:PORT` / `http://` (plain HTTP): `https://` and
    /// `ssh://` need bollard's `ssl`/`ssh` features, so they are refused with a way round.
    pub async fn connect() -> Result<Engine> {
        let where_ =
            std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
        let api = bollard::Docker::connect_with_defaults().with_context(|| {
            format!(
                "cannot connect to the Docker daemon at DOCKER_HOST={where_} (this build takes \
                 unix://PATH or tcp://HOST:PORT; for an ssh:// engine forward its socket, e.g. \
                 `ssh -nNT -L /tmp/docker.sock:/var/run/docker.sock HOST` and \
                 DOCKER_HOST=unix:///tmp/docker.sock)"
            )
        })?;
        let gate = CallGate::default();
        // A daemon that is restarting refuses connections for a few seconds: the gate waits.
        let negotiate = async {
            let mut attempt = 1;
            loop {
                match api.clone().negotiate_version().await {
                    Err(e)
                        if attempt < calls::ATTEMPTS
                            && calls::worth_retrying(&e, Repeat::Harmless) =>
                    {
                        gate.wait_before_retry("version negotiation", &e, attempt)
                            .await;
                        attempt += 1;
                    }
                    other => return other,
                }
            }
        };
        let api = tokio::time::timeout(Duration::from_secs(20), negotiate)
            .await
            .map_err(|_| {
                anyhow::anyhow!("the Docker daemon at {where_} did not answer within 20 s")
            })?
            .with_context(|| {
                format!("cannot reach the Docker daemon at {where_}: is it running?")
            })?;
        gate.call(
            &api,
            "ping",
            Repeat::Harmless,
            |api: bollard::Docker| async move { api.ping().await },
        )
        .await
        .with_context(|| format!("the Docker daemon at {where_} does not answer ping"))?;
        Ok(Engine {
            api,
            gate,
            owner: owner_token(std::process::id()),
            live: Arc::new(Mutex::new(BTreeSet::new())),
        })
    }

    async fn version(&self) -> Result<bollard::models::SystemVersion, bollard::errors::Error> {
        self.gate
            .call(
                &self.api,
                "version",
                Repeat::Harmless,
                |api: bollard::Docker| async move { api.version().await },
            )
            .await
    }

    async fn info(&self) -> Result<bollard::models::SystemInfo, bollard::errors::Error> {
        self.gate
            .call(
                &self.api,
                "info",
                Repeat::Harmless,
                |api: bollard::Docker| async move { api.info().await },
            )
            .await
    }

    async fn list_containers(
        &self,
        opts: bollard::query_parameters::ListContainersOptions,
    ) -> Result<Vec<bollard::models::ContainerSummary>, bollard::errors::Error> {
        let opts = &opts;
        self.gate
            .call(
                &self.api,
                "list containers",
                Repeat::Harmless,
                |api: bollard::Docker| async move { api.list_containers(Some(opts.clone())).await },
            )
            .await
    }

    /// Calls to the engine retried after a transient failure so far.
    pub fn transient_retries(&self) -> u64 {
        self.gate.retried()
    }

    /// Retries are reported to `events` from now on.
    pub fn report_retries_to(&self, events: crate::events::Events) {
        self.gate.report_to(events);
    }

    /// The engine's version string ("unknown" when it does not say).
    pub async fn server_version(&self) -> String {
        self.version()
            .await
            .ok()
            .and_then(|v| v.version)
            .unwrap_or_else(|| "unknown".into())
    }

    /// How many CPUs the engine's host has, when it says.
    pub async fn host_cpus(&self) -> Option<usize> {
        self.info()
            .await
            .ok()
            .and_then(|i| i.ncpu)
            .map(|n| n.max(1) as usize)
    }

    /// The container runtimes the engine offers (`runc`, `nvidia`, ...), sorted.
    pub async fn runtimes(&self) -> Result<Vec<String>> {
        let info = self
            .info()
            .await
            .context("cannot read the Docker engine's info")?;
        let mut names: Vec<String> = info
            .runtimes
            .map(|r| r.into_keys().collect())
            .unwrap_or_default();
        names.sort();
        Ok(names)
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub(crate) fn track(&self, id: &str) {
        if let Ok(mut live) = self.live.lock() {
            live.insert(id.to_string());
        }
    }

    pub(crate) fn untrack(&self, id: &str) {
        if let Ok(mut live) = self.live.lock() {
            live.remove(id);
        }
    }

    /// Containers this process has made and not yet removed.
    pub fn live_containers(&self) -> Vec<String> {
        self.live
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Force-removes every container this process still has (Ctrl-C, fatal errors).
    pub async fn remove_live_containers(&self) -> usize {
        let ids = self.live_containers();
        let mut removed = 0;
        for id in &ids {
            if force_remove(self, id).await.is_ok() {
                removed += 1;
            }
            self.untrack(id);
        }
        removed
    }

    /// Labelled containers of this harness, optionally only those of one run.
    async fn list_managed(
        &self,
        extra_label: Option<(&str, &str)>,
    ) -> Result<Vec<bollard::models::ContainerSummary>> {
        let mut labels = vec![format!("{LABEL_MANAGED}=true")];
        if let Some((k, v)) = extra_label {
            labels.push(format!("{k}={v}"));
        }
        let mut filters: HashMap<String, Vec<String>> = HashMap::new();
        filters.insert("label".into(), labels);
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        self.list_containers(opts)
            .await
            .context("cannot list containers")
    }

    /// Removes containers of this harness whose owning process is gone (a killed run).
    /// Found by label only; containers of a live harness process, or of a process on
    /// another host sharing the engine, are left alone.
    pub async fn remove_orphans(&self) -> Result<usize> {
        let host = hostname();
        let mut removed = 0;
        for c in self.list_managed(None).await? {
            let (Some(id), Some(labels)) = (c.id.as_deref(), c.labels.as_ref()) else {
                continue;
            };
            let Some(owner) = labels.get(LABEL_OWNER) else {
                continue;
            };
            if owner_is_alive(owner, &host) {
                continue;
            }
            if force_remove(self, id).await.is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// What the engine says about itself (`harness doctor`).
#[derive(Debug, Clone, Default)]
pub struct EngineInfo {
    pub server_version: String,
    /// The engine's newest API version.
    pub api_version: String,
    pub min_api_version: Option<String>,
    /// The API version this client speaks with it (negotiated down to the engine's).
    pub client_api_version: String,
    pub storage_driver: Option<String>,
    /// Where the engine keeps images and containers (on the engine's host).
    pub docker_root_dir: Option<String>,
    /// Container runtimes, sorted.
    pub runtimes: Vec<String>,
    pub operating_system: Option<String>,
}

impl Engine {
    /// Version, API, storage driver, root folder and runtimes of the engine.
    pub async fn engine_info(&self) -> Result<EngineInfo> {
        let version = self
            .version()
            .await
            .context("cannot read the Docker engine's version")?;
        let info = self
            .info()
            .await
            .context("cannot read the Docker engine's info")?;
        let client = self.api.client_version();
        let mut runtimes: Vec<String> = info
            .runtimes
            .map(|r| r.into_keys().collect())
            .unwrap_or_default();
        runtimes.sort();
        Ok(EngineInfo {
            server_version: version
                .version
                .or(info.server_version)
                .unwrap_or_else(|| "unknown".into()),
            api_version: version.api_version.unwrap_or_else(|| "unknown".into()),
            min_api_version: version.min_api_version,
            client_api_version: format!("{}.{}", client.major_version, client.minor_version),
            storage_driver: info.driver,
            docker_root_dir: info.docker_root_dir,
            runtimes,
            operating_system: info.operating_system,
        })
    }

    /// Containers of this harness whose owning process is gone (what
    /// [`Engine::remove_orphans`] would remove), as (id, name).
    pub async fn orphan_containers(&self) -> Result<Vec<(String, String)>> {
        let host = hostname();
        let mut out = Vec::new();
        for c in self.list_managed(None).await? {
            let (Some(id), Some(labels)) = (c.id.as_deref(), c.labels.as_ref()) else {
                continue;
            };
            let Some(owner) = labels.get(LABEL_OWNER) else {
                continue;
            };
            if owner_is_alive(owner, &host) {
                continue;
            }
            let name = c
                .names
                .as_ref()
                .and_then(|n| n.first())
                .map(|n| n.trim_start_matches('/').to_string())
                .unwrap_or_default();
            out.push((id.to_string(), name));
        }
        Ok(out)
    }

    /// Every container on the engine (any state, anyone's), by the id of the image it uses:
    /// image id → container names.
    pub async fn containers_by_image(&self) -> Result<BTreeMap<String, Vec<String>>> {
        let opts = ListContainersOptionsBuilder::default().all(true).build();
        let list = self
            .api
            .list_containers(Some(opts))
            .await
            .context("cannot list containers")?;
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in list {
            let Some(image) = c.image_id else { continue };
            let name = c
                .names
                .as_ref()
                .and_then(|n| n.first())
                .map(|n| n.trim_start_matches('/').to_string())
                .or(c.id)
                .unwrap_or_default();
            out.entry(image).or_default().push(name);
        }
        Ok(out)
    }
}

pub(crate) async fn force_remove(engine: &Engine, id: &str) -> Result<()> {
    let opts = &RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    let removal = engine
        .gate
        .call(&engine.api, "remove container", Repeat::Harmless, |api: bollard::Docker| async move {
            api.remove_container(id, Some(opts.clone())).await
        })
        .await;
    match removal {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        // Another task of this process is removing it already: wait until it is gone.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => {
            for _ in 0..200 {
                if let Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404,
                    ..
                }) = engine.api.inspect_container(id, None).await
                {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            anyhow::bail!("container {id} is still being removed after 10 s")
        }
        Err(e) => Err(e).with_context(|| format!("cannot remove container {id}")),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

/// Field 22 of /proc/PID/stat: the start time in clock ticks since boot, so a reused pid
/// is not mistaken for the process that made a container.
fn start_ticks(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19).map(str::to_string)
}

fn owner_token(pid: u32) -> String {
    format!(
        "{}:{}:{}",
        hostname(),
        pid,
        start_ticks(pid).unwrap_or_else(|| "0".into())
    )
}

fn owner_is_alive(owner: &str, this_host: &str) -> bool {
    let mut parts = owner.rsplitn(3, ':');
    let (Some(ticks), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return true; // not ours to judge
    };
    if host != this_host {
        return true;
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return true;
    };
    start_ticks(pid).is_some_and(|t| t == ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_tokens() {
        let me = owner_token(std::process::id());
        assert!(owner_is_alive(&me, &hostname()));
        // Same pid, other start time: a reused pid is not alive.
        let host = hostname();
        let fake = format!("{host}:{}:1", std::process::id());
        assert!(!owner_is_alive(&fake, &host));
        // Another host: never judged dead.
        assert!(owner_is_alive("elsewhere:1:1", &host));
        // A pid that does not exist.
        assert!(!owner_is_alive(&format!("{host}:4000000:5"), &host));
    }
}
