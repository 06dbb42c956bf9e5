//! One container of one variant: created labelled and limited, commands run in it by exec
//! under a timeout that kills it, removed on every path.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures::StreamExt;

use super::calls::Repeat;
use super::spec::{GpuRequest, SandboxSpec, create_body};
use super::{Engine, force_remove};
use harness_core::task::WORKDIR;

/// The result of one command run by exec.
#[derive(Debug, Clone)]
pub struct ExecOutcome {
    /// `None` when the command was killed by the timeout.
    pub exit_code: Option<i64>,
    /// stdout and stderr as they came, the middle cut out beyond the limit.
    pub output: String,
    pub elapsed: Duration,
    pub timed_out: bool,
}

impl ExecOutcome {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// A running container. Dropping it without [`Sandbox::remove`] still removes it, in the
/// background.
pub struct Sandbox {
    engine: Engine,
    pub id: String,
    pub name: String,
    removed: AtomicBool,
    killed: AtomicBool,
    /// `spec.env`, redacted from exec outputs.
    secrets: Vec<(String, String)>,
}

static NAME_COUNTER: AtomicU64 = AtomicU64::new(0);

fn container_name(hint: &str) -> String {
    let clean: String = hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(100)
        .collect();
    let n = NAME_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("harness-{clean}-{}-{n}-{nanos:08x}", std::process::id())
}

/// The supervisor with `args`.
fn supervisor_argv(args: &[String]) -> Vec<String> {
    std::iter::once(crate::assets::SUPERVISOR.to_string())
        .chain(args.iter().cloned())
        .collect()
}

/// Whether a `docker exec` user string ("uid:gid", a name) is root.
fn is_root(user: &str) -> bool {
    let uid = user.split(':').next().unwrap_or("");
    uid.is_empty() || uid == "0" || uid == "root"
}

/// Creates the container named in `opts`. When a try whose answer was lost did create it,
/// the container of that name is taken, provided this process made it.
async fn create_named(
    engine: &Engine,
    opts: bollard::query_parameters::CreateContainerOptions,
    body: bollard::models::ContainerCreateBody,
) -> std::result::Result<String, bollard::errors::Error> {
    let name = opts.name.clone().unwrap_or_default();
    let (opts, body) = (&opts, &body);
    let mut lost_answer = false;
    let mut attempt = 1;
    loop {
        let result = engine
            .gate
            .call(
                &engine.api,
                "create container",
                Repeat::OnlyIfNotSent,
                |api: bollard::Docker| async move {
                    api.create_container(Some(opts.clone()), body.clone()).await
                },
            )
            .await;
        match result {
            Ok(created) => return Ok(created.id),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) if lost_answer && !name.is_empty() => {
                let inspected = engine.api.inspect_container(&name, None).await?;
                let ours = inspected
                    .config
                    .as_ref()
                    .and_then(|c| c.labels.as_ref())
                    .and_then(|l| l.get(super::LABEL_OWNER))
                    .is_some_and(|o| o == engine.owner());
                match inspected.id {
                    Some(id) if ours => return Ok(id),
                    _ => {
                        return Err(bollard::errors::Error::DockerResponseServerError {
                            status_code: 409,
                            message: format!("container name {name} is taken by another"),
                        });
                    }
                }
            }
            Err(e)
                if attempt < super::calls::ATTEMPTS
                    && super::calls::classify(&e) == Some(super::calls::Transient::MaybeSent) =>
            {
                lost_answer = true;
                engine
                    .gate
                    .wait_before_retry("create container", &e, attempt)
                    .await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

impl Sandbox {
    async fn inspect(
        &self,
    ) -> std::result::Result<bollard::models::ContainerInspectResponse, bollard::errors::Error>
    {
        self.engine
            .gate
            .call(
                &self.engine.api,
                "inspect container",
                Repeat::Harmless,
                |api: bollard::Docker| async move { api.inspect_container(&self.id, None).await },
            )
            .await
    }

    async fn inspect_exec(
        &self,
        exec_id: &str,
    ) -> std::result::Result<bollard::models::ExecInspectResponse, bollard::errors::Error> {
        self.engine
            .gate
            .call(
                &self.engine.api,
                "inspect exec",
                Repeat::Harmless,
                |api: bollard::Docker| async move { api.inspect_exec(exec_id).await },
            )
            .await
    }

    /// Starts an exec, attached. Starting twice would run the command twice, so a try whose
    /// answer was lost is repeated only when the engine says the exec never started.
    async fn start_exec_once(&self, exec_id: &str) -> Result<StartExecResults> {
        let options = StartExecOptions {
            detach: false,
            tty: false,
            output_capacity: None,
        };
        let options = &options;
        let mut attempt = 1;
        loop {
            let result =
                self.engine
                    .gate
                    .call(
                        &self.engine.api,
                        "start exec",
                        Repeat::OnlyIfNotSent,
                        |api: bollard::Docker| async move {
                            api.start_exec(exec_id, Some(*options)).await
                        },
                    )
                    .await;
            match result {
                Ok(started) => return Ok(started),
                Err(e)
                    if attempt < super::calls::ATTEMPTS
                        && super::calls::classify(&e)
                            == Some(super::calls::Transient::MaybeSent) =>
                {
                    let info = self
                        .inspect_exec(exec_id)
                        .await
                        .context("cannot tell whether a lost exec start ran")?;
                    let never_started = info.running != Some(true)
                        && info.exit_code.is_none()
                        && info.pid.unwrap_or(0) == 0;
                    if !never_started {
                        return Err(anyhow::Error::from(e).context(
                            "the answer to an exec start was lost after the command had started",
                        ));
                    }
                    self.engine
                        .gate
                        .wait_before_retry("start exec", &e, attempt)
                        .await;
                    attempt += 1;
                }
                Err(e) => return Err(anyhow::Error::from(e).context("cannot start exec")),
            }
        }
    }

    /// Creates a container without starting it; removed like a started one.
    pub async fn create(engine: &Engine, spec: &SandboxSpec) -> Result<Sandbox> {
        let name = container_name(&spec.name_hint);
        let opts = CreateContainerOptionsBuilder::default().name(&name).build();
        let body = create_body(spec, engine.owner());
        let id = create_named(engine, opts, body)
            .await
            .with_context(|| format!("cannot create a container from {}", spec.image))?;
        engine.track(&id);
        Ok(Sandbox {
            engine: engine.clone(),
            id,
            name,
            removed: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            secrets: spec.env.clone(),
        })
    }

    /// The device requests the engine recorded for this container, as its inspect data
    /// holds them.
    pub async fn device_requests(&self) -> Result<Vec<GpuRequest>> {
        let inspected = self
            .inspect()
            .await
            .with_context(|| format!("cannot inspect container {}", self.name))?;
        Ok(inspected
            .host_config
            .and_then(|h| h.device_requests)
            .unwrap_or_default()
            .into_iter()
            .map(|d| GpuRequest {
                driver: d.driver.unwrap_or_default(),
                device_ids: d.device_ids.unwrap_or_default(),
                count: d.count,
                capabilities: d.capabilities.unwrap_or_default(),
            })
            .collect())
    }

    /// Creates a container, puts the harness's own files in (its main process is the
    /// supervisor: nothing of the image runs as root once it runs) and starts it. On any
    /// failure nothing is left behind.
    pub async fn start(engine: &Engine, spec: &SandboxSpec) -> Result<Sandbox> {
        let sandbox = Sandbox::create(engine, spec).await?;
        if let Err(e) = sandbox.upload_harness().await {
            let _ = sandbox.remove().await;
            return Err(e);
        }
        let id = &sandbox.id;
        let started = engine
            .gate
            .call(
                &engine.api,
                "start container",
                Repeat::Harmless,
                |api: bollard::Docker| async move {
                    match api.start_container(id, None).await {
                        // Started already by a try whose answer was lost.
                        Err(bollard::errors::Error::DockerResponseServerError {
                            status_code: 304,
                            ..
                        }) => Ok(()),
                        other => other,
                    }
                },
            )
            .await;
        if let Err(e) = started {
            let _ = sandbox.remove().await;
            return Err(e).with_context(|| format!("cannot start a container from {}", spec.image));
        }
        Ok(sandbox)
    }

    /// The harness's files (root's) and the warden's own folder, `/opt/harness/var`, which
    /// only the warden may use (its manifest and state).
    async fn upload_harness(&self) -> Result<()> {
        let files: Vec<(&str, &[u8], u32)> = crate::assets::ASSETS
            .iter()
            .map(|a| (a.path, a.bytes, a.mode))
            .collect();
        self.upload_with_folders(
            "/",
            &files,
            // The supervisor's folders named root's: an image may have made them another
            // user's (the supervisor seals them again when it starts, see its `idle`).
            &[
                ("opt", 0o755, 0),
                ("opt/harness", 0o755, 0),
                ("opt/harness/bin", 0o755, 0),
                (crate::assets::WARDEN_DIR, 0o700, crate::protect::WARDEN_UID),
            ],
        )
        .await
    }

    /// Copies files (path relative to `dir`, bytes, mode) into the container, root's.
    pub async fn upload(&self, dir: &str, files: &[(&str, &[u8], u32)]) -> Result<()> {
        self.upload_with_folders(dir, files, &[]).await
    }

    /// [`Sandbox::upload`] with folders made first: (path, mode, owner's uid and gid).
    pub async fn upload_with_folders(
        &self,
        dir: &str,
        files: &[(&str, &[u8], u32)],
        folders: &[(&str, u32, u32)],
    ) -> Result<()> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, mode, owner) in folders {
            let mut header = tar::Header::new_gnu();
            header.set_size(0);
            header.set_mode(*mode);
            header.set_uid((*owner).into());
            header.set_gid((*owner).into());
            header.set_mtime(0);
            header.set_entry_type(tar::EntryType::Directory);
            builder
                .append_data(&mut header, path, std::io::empty())
                .with_context(|| format!("cannot pack {path}"))?;
        }
        for (path, data, mode) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(*mode);
            header.set_mtime(0);
            header.set_entry_type(tar::EntryType::Regular);
            builder
                .append_data(&mut header, path, *data)
                .with_context(|| format!("cannot pack {path}"))?;
        }
        let bytes = builder.into_inner().context("cannot pack files")?;
        let opts = &UploadToContainerOptionsBuilder::default().path(dir).build();
        let bytes = &bytes;
        self.engine
            .gate
            .call(
                &self.engine.api,
                "copy into container",
                Repeat::Harmless,
                |api: bollard::Docker| async move {
                    api.upload_to_container(
                        &self.id,
                        Some(opts.clone()),
                        bollard::body_full(bytes.clone().into()),
                    )
                    .await
                },
            )
            .await
            .with_context(|| format!("cannot copy files into container {}", self.name))
    }

    /// Runs the harness's supervisor with `args` as root, the one program root runs in a
    /// container once it runs (see [`Sandbox::exec_as`]).
    pub async fn supervisor(
        &self,
        args: &[String],
        env: &[String],
        timeout: Duration,
        output_limit: usize,
    ) -> Result<ExecOutcome> {
        let argv = supervisor_argv(args);
        self.exec_as(&argv, crate::protect::ROOT, env, timeout, output_limit)
            .await
    }

    /// [`Sandbox::supervisor`] with the output unredacted (see
    /// [`Sandbox::exec_as_unredacted`]).
    pub async fn supervisor_unredacted(
        &self,
        args: &[String],
        env: &[String],
        timeout: Duration,
        output_limit: usize,
    ) -> Result<ExecOutcome> {
        let argv = supervisor_argv(args);
        self.exec_as_unredacted(&argv, crate::protect::ROOT, env, timeout, output_limit)
            .await
    }

    /// Runs `argv` as `user` ("uid:gid") with extra `env` ("K=V") in the container's work
    /// dir. Past `timeout` the whole container is killed (the only sure way to stop
    /// everything the command started) and the outcome says so.
    pub async fn exec_as(
        &self,
        argv: &[String],
        user: &str,
        env: &[String],
        timeout: Duration,
        output_limit: usize,
    ) -> Result<ExecOutcome> {
        let mut out = self
            .exec_as_unredacted(argv, user, env, timeout, output_limit)
            .await?;
        out.output = self.redact(&out.output);
        Ok(out)
    }

    /// The task's secrets (`spec.env`) replaced in `text`, every form and piece of them.
    pub fn redact(&self, text: &str) -> String {
        harness_core::secrets::redact(text, &self.secrets)
    }

    /// [`Sandbox::exec_as`] with the output as the command printed it, secrets and all: for
    /// a caller that reads a protocol line out of it (whose field names a piece of a secret
    /// must not change) and redacts everything else itself with [`Sandbox::redact`].
    pub async fn exec_as_unredacted(
        &self,
        argv: &[String],
        user: &str,
        env: &[String],
        timeout: Duration,
        output_limit: usize,
    ) -> Result<ExecOutcome> {
        if self.killed.load(Ordering::SeqCst) {
            bail!("container {} was already killed", self.name);
        }
        if is_root(user) && argv.first().map(String::as_str) != Some(crate::assets::SUPERVISOR) {
            bail!(
                "root runs nothing but the harness's supervisor in a container once it runs \
                 (asked for {:?})",
                argv.first()
            );
        }
        let started = Instant::now();
        let exec_options = CreateExecOptions {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            cmd: Some(argv.to_vec()),
            user: Some(user.to_string()),
            env: (!env.is_empty()).then(|| env.to_vec()),
            working_dir: Some(WORKDIR.to_string()),
            ..Default::default()
        };
        let exec_options = &exec_options;
        // An exec made twice is harmless: one that is never started does nothing.
        let created = self
            .engine
            .gate
            .call(
                &self.engine.api,
                "create exec",
                Repeat::Harmless,
                |api: bollard::Docker| async move {
                    api.create_exec(&self.id, exec_options.clone()).await
                },
            )
            .await
            .with_context(|| format!("cannot exec in container {}", self.name))?;
        let mut output = BoundedOutput::new(output_limit);
        let run = async {
            let started_exec = self.start_exec_once(&created.id).await?;
            if let StartExecResults::Attached {
                output: mut stream, ..
            } = started_exec
            {
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(msg) => output.push(&msg.into_bytes()),
                        Err(e) => return Err(anyhow::Error::from(e).context("exec output stream")),
                    }
                }
            }
            // The stream ends when the process closes its output; the exit code may lag.
            loop {
                let info = self
                    .inspect_exec(&created.id)
                    .await
                    .context("cannot inspect exec")?;
                if info.running != Some(true) {
                    return Ok(info.exit_code);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(Ok(code)) => Ok(ExecOutcome {
                exit_code: code,
                output: output.finish(),
                elapsed: started.elapsed(),
                timed_out: false,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                self.kill().await;
                Ok(ExecOutcome {
                    exit_code: None,
                    output: output.finish(),
                    elapsed: started.elapsed(),
                    timed_out: true,
                })
            }
        }
    }

    /// Processes of this container the kernel's OOM killer has killed so far (its memory
    /// cgroup's count), read by the harness's supervisor: None when it cannot be read.
    pub async fn oom_kill_count(&self) -> Option<u64> {
        let out = self
            .supervisor(
                &["oom-kills".to_string()],
                &[],
                Duration::from_secs(20),
                64 * 1024,
            )
            .await
            .ok()?;
        out.output.trim().parse().ok()
    }

    /// Whether Docker saw the container itself die of OOM.
    pub async fn oom_killed(&self) -> bool {
        self.inspect()
            .await
            .ok()
            .and_then(|i| i.state)
            .and_then(|s| s.oom_killed)
            .unwrap_or(false)
    }

    /// Whether the container still runs (false when it was killed or removed from
    /// outside, or the daemon lost it).
    pub async fn is_running(&self) -> bool {
        self.inspect()
            .await
            .ok()
            .and_then(|i| i.state)
            .and_then(|s| s.running)
            .unwrap_or(false)
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    pub async fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        let opts = &KillContainerOptionsBuilder::default()
            .signal("SIGKILL")
            .build();
        let _ = self
            .engine
            .gate
            .call(
                &self.engine.api,
                "kill container",
                Repeat::Harmless,
                |api: bollard::Docker| async move {
                    api.kill_container(&self.id, Some(opts.clone())).await
                },
            )
            .await;
    }

    pub async fn remove(&self) -> Result<()> {
        if self.removed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let result = force_remove(&self.engine, &self.id).await;
        if result.is_ok() {
            self.engine.untrack(&self.id);
        }
        result
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.removed.load(Ordering::SeqCst) {
            return;
        }
        let engine = self.engine.clone();
        let id = self.id.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if force_remove(&engine, &id).await.is_ok() {
                    engine.untrack(&id);
                }
            });
        }
    }
}

/// Keeps the first and last halves of a limit; counts what was cut from the middle.
struct BoundedOutput {
    limit: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    cut: usize,
}

impl BoundedOutput {
    fn new(limit: usize) -> Self {
        BoundedOutput {
            limit: limit.max(2),
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            cut: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let half = self.limit / 2;
        let mut rest = bytes;
        if self.head.len() < half {
            let take = (half - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        self.tail.extend(rest);
        while self.tail.len() > self.limit - half {
            let over = self.tail.len() - (self.limit - half);
            self.tail.drain(..over);
            self.cut += over;
        }
    }

    fn finish(self) -> String {
        let mut s = String::from_utf8_lossy(&self.head).into_owned();
        if self.cut > 0 {
            s.push_str(&format!("\n[... {} bytes of output cut ...]\n", self.cut));
        }
        let tail: Vec<u8> = self.tail.into_iter().collect();
        s.push_str(&String::from_utf8_lossy(&tail));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_output_keeps_head_and_tail() {
        let mut b = BoundedOutput::new(10);
        b.push(b"0123456789abcdefghij");
        let s = b.finish();
        assert!(s.starts_with("01234"));
        assert!(s.ends_with("fghij"));
        assert!(s.contains("10 bytes of output cut"));
        let mut b = BoundedOutput::new(100);
        b.push(b"short");
        assert_eq!(b.finish(), "short");
    }
}
