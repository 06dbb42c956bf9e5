//! Running the code under test through the in-container guard (`container/programs/timed_run.py`,
//! `container/programs/guard.py`), and reading what it reports.
//!
//! The guard runs as the warden (root's supervisor beside it); the command it has started
//! runs as the sandbox user. Its report is the
//! last line of the exec's output, `HARNESS_RESULT:<nonce> {json}`, where the nonce is a
//! fresh random value handed to the guard in its environment, which the sandbox user cannot
//! read: a line the code under test prints cannot pass for it. The prefix is the one the
//! timer's contract defines (`container/programs/timer_result.schema.json`, see `contract`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::docker::container::{ExecOutcome, Sandbox};
use harness_core::status::Status;

pub const GUARD_PATH: &str = "/opt/harness/guard.py";
pub const TIMER_PATH: &str = "/opt/harness/timed_run.py";

/// Watched path → digest (`sha256:...`, `symlink:...`, `missing`). Repository-relative
/// paths are protected files of the tree, absolute ones the harness's own files and the
/// interpreter, `~/...` Python start-up hooks in the sandbox user's home.
pub type Snapshot = BTreeMap<String, String>;

/// A fresh random token for one guard run.
pub fn nonce() -> String {
    let mut bytes = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !ok {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        bytes[..8].copy_from_slice(&h.finish().to_le_bytes());
    }
    hex::encode(bytes)
}

/// One of the harness's Python programs, run by the supervisor (root's exec) as the warden,
/// an unprivileged user, with the interpreter pinned at image build (`python3 -I -S script
/// args...`: isolated, no site, so nothing the sandbox user can write is imported), never
/// `python3` from the image's PATH; the supervisor does for it what needs root.
pub fn python(script: &str, args: &[String]) -> Vec<String> {
    let mut argv = vec![
        crate::assets::SUPERVISOR.to_string(),
        "warden".into(),
        script.into(),
    ];
    argv.extend(args.iter().cloned());
    argv
}

/// The guard's report in `output`, and the output without it.
pub fn split_result<'a>(output: &'a str, nonce: &str) -> (Option<&'a str>, String) {
    let marker = format!("{}{nonce} ", *super::contract::RESULT_PREFIX);
    match output.rfind(&marker) {
        Some(at) => {
            let json = output[at + marker.len()..].lines().next().unwrap_or("");
            let before = output[..at].trim_end_matches('\n');
            let mut shown = before.to_string();
            if !shown.is_empty() {
                shown.push('\n');
            }
            (Some(json), shown)
        }
        None => (None, output.to_string()),
    }
}

/// What the guard reports after a plain (install, test) run.
#[derive(Debug, Clone, Deserialize)]
pub struct PlainResult {
    #[serde(default)]
    pub exit_code: i64,
    /// The harness's own failure (the test's sandbox could not be made): not the code's.
    #[serde(default)]
    pub harness_error: Option<String>,
    #[serde(default)]
    pub output_flood: bool,
    #[serde(default)]
    pub output_limit: u64,
    #[serde(default)]
    pub oom_kills: Option<u64>,
    #[serde(default)]
    pub lingering_killed: u64,
    #[serde(default)]
    pub changes: Snapshot,
    #[serde(flatten)]
    pub limits: RunLimits,
    /// What the test's Python processes reported (the test phase only).
    #[serde(default)]
    pub witness: Option<crate::eval::witness::Witness>,
}

/// What every run of the guard says about the limits the code under test ran under.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunLimits {
    /// Threads of the sandbox user still running after the run, despite every kill.
    #[serde(default)]
    pub survivors: u64,
    #[serde(default)]
    pub disk_exceeded: bool,
    /// How much the tree and home grew since the patch (bytes).
    #[serde(default)]
    pub disk_used: Option<i64>,
    #[serde(default)]
    pub disk_limit: i64,
    /// Entries the install left that were changed before this run (by the test or an
    /// earlier run in the container): what a run could have left for the next one.
    #[serde(default)]
    pub carried_over: Vec<String>,
}

impl RunLimits {
    /// Why a run broke a limit, if it did.
    pub fn broken(&self, what: &str) -> Option<String> {
        if self.disk_exceeded {
            return Some(format!(
                "{what} wrote more than the task's disk limit of {} (to the tree and home, or, in a timed run, anywhere: {} written); stopped",
                mib(self.disk_limit),
                self.disk_used.map(mib).unwrap_or_else(|| "?".into())
            ));
        }
        if let Some(first) = self.carried_over.first() {
            return Some(format!(
                "{what} would start from files an earlier run in its container changed: {first}{} \
                 (every timed run starts from the files the install left; a run may add files, \
                 which are removed before the next one, but not change those)",
                if self.carried_over.len() > 1 {
                    format!(" and {} more", self.carried_over.len() - 1)
                } else {
                    String::new()
                }
            ));
        }
        if self.survivors > 0 {
            return Some(format!(
                "{what} left {} thread(s) of the sandbox user running that could not be stopped",
                self.survivors
            ));
        }
        None
    }
}

pub fn mib(bytes: i64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1 << 20) as f64)
}

/// A plain run: the command's output (the guard's line taken out) and the guard's report,
/// `None` when it printed none (killed, container gone).
pub struct PlainRun {
    pub exec: ExecOutcome,
    pub output: String,
    pub result: Option<PlainResult>,
}

/// Runs a shell command of the code under test (install, test) as the sandbox user; with
/// `witness` (the test), its Python processes report how they ended (see `witness`).
pub async fn run_plain(
    sandbox: &Sandbox,
    command: &str,
    timeout: Duration,
    witness: bool,
) -> Result<PlainRun> {
    let nonce = nonce();
    let mut args = vec!["plain".to_string()];
    if witness {
        args.push("--witness".into());
    }
    args.extend(["--".to_string(), command.to_string()]);
    let argv = python(TIMER_PATH, &args);
    let exec = sandbox
        .exec_as(
            &argv,
            crate::protect::ROOT,
            &[format!("HARNESS_NONCE={nonce}")],
            timeout,
            super::LOG_LIMIT,
        )
        .await?;
    let (json, output) = split_result(&exec.output, &nonce);
    let result = json.and_then(|j| serde_json::from_str(j).ok());
    Ok(PlainRun {
        exec,
        output,
        result,
    })
}

/// What the guard says right after the patch.
pub struct AfterApply {
    /// The watched files.
    pub snapshot: Snapshot,
    /// A digest of the tree as the patch left it: equal digests, byte-identical trees.
    pub tree: String,
    /// The same with changed Python files counted by their syntax trees: equal digests,
    /// trees that differ at most in the comments and layout of Python files.
    pub code: Option<String>,
}

/// After the patch: the guard locks what it changed and snapshots the watched files. The
/// inner `Err` is the guard's refusal of the tree itself (a folder it cannot read, a tree it
/// cannot walk): the patch's doing, where the outer one is the harness's.
pub async fn after_apply(sandbox: &Sandbox) -> Result<std::result::Result<AfterApply, String>> {
    let nonce = nonce();
    let out = sandbox
        .exec_as(
            &python(GUARD_PATH, &["after-apply".into()]),
            crate::protect::ROOT,
            &[format!("HARNESS_NONCE={nonce}")],
            Duration::from_secs(300),
            16 * 1024 * 1024,
        )
        .await?;
    #[derive(Deserialize)]
    struct Reported {
        #[serde(default)]
        snapshot: Snapshot,
        #[serde(default)]
        tree: String,
        #[serde(default)]
        code: Option<String>,
        #[serde(default)]
        tree_error: Option<String>,
    }
    let (json, shown) = split_result(&out.output, &nonce);
    let json = json.ok_or_else(|| {
        anyhow!(
            "the guard printed no snapshot after the patch (exit {:?}): {}",
            out.exit_code,
            last_lines(&shown, 5)
        )
    })?;
    let parsed: Reported =
        serde_json::from_str(json).context("unreadable snapshot from the guard")?;
    if let Some(why) = parsed.tree_error {
        return Ok(Err(why));
    }
    Ok(Ok(AfterApply {
        snapshot: parsed.snapshot,
        tree: parsed.tree,
        code: parsed.code,
    }))
}

/// Before the human's application: the guard hands what it touches, and root holds, to the
/// sandbox user (guard.py unlock-human); `after_apply` takes it back.
pub async fn unlock_human(sandbox: &Sandbox, patch: &str, commit: Option<&str>) -> Result<()> {
    let nonce = nonce();
    let mut args = vec!["unlock-human".to_string(), patch.to_string()];
    args.extend(commit.map(str::to_string));
    let out = sandbox
        .exec_as(
            &python(GUARD_PATH, &args),
            crate::protect::ROOT,
            &[format!("HARNESS_NONCE={nonce}")],
            Duration::from_secs(300),
            64 * 1024,
        )
        .await?;
    let (json, shown) = split_result(&out.output, &nonce);
    if json.is_none() || !out.success() {
        return Err(anyhow!(
            "the guard could not make the tree ready for the human's change (exit {:?}): {}",
            out.exit_code,
            last_lines(&shown, 5)
        ));
    }
    Ok(())
}

pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// The status a plain run earns beyond plain success: a timeout, a container that died
/// under it (not the model's fault), an output flood, the OOM killer (with the kernel's
/// own count as evidence), or a failing exit.
pub async fn judge_plain(
    sandbox: &Sandbox,
    run: &PlainRun,
    what: &str,
    on_fail: Status,
    limit: Duration,
) -> Option<(Status, String)> {
    if run.exec.timed_out {
        return Some((
            Status::Timeout,
            format!(
                "{what} ran past its timeout of {:.0} s; container killed",
                limit.as_secs_f64()
            ),
        ));
    }
    let Some(r) = &run.result else {
        return Some(no_result(sandbox, what, on_fail, run.exec.exit_code, &run.output).await);
    };
    if let Some(e) = &r.harness_error {
        return Some((Status::Error, format!("{what}: {e}")));
    }
    if r.output_flood {
        return Some((
            on_fail,
            format!(
                "{what} printed more than {} MiB of output; stopped",
                r.output_limit >> 20
            ),
        ));
    }
    if let Some(why) = r.limits.broken(what) {
        return Some((on_fail, why));
    }
    if r.exit_code == 0 {
        return None;
    }
    if r.oom_kills.unwrap_or(0) > 0 {
        return Some((
            Status::Oom,
            format!(
                "{what} was killed by the kernel's OOM killer ({} process(es), memory limit reached)",
                r.oom_kills.unwrap_or(0)
            ),
        ));
    }
    // The reason is the run's last words (an assertion, a traceback's last line).
    let tail = last_lines(run.output.trim_end(), 3);
    Some((
        on_fail,
        if tail.is_empty() {
            format!("{what} {}", describe_exit(r.exit_code))
        } else {
            format!("{what} {}: {tail}", describe_exit(r.exit_code))
        },
    ))
}

/// The status of a run whose in-container guard printed no result. A container that
/// stopped was stopped from outside (or the daemon restarted): nobody's fault, `error`. One
/// still running had only the harness and the code under test in it, and the harness's
/// guard does not die on its own: the code under test took it down (memory, most likely),
/// so the run ends with the code's outcome, never `error`.
pub async fn no_result(
    sandbox: &Sandbox,
    what: &str,
    on_fail: Status,
    exit: Option<i64>,
    output: &str,
) -> (Status, String) {
    if stops_soon(sandbox).await {
        if sandbox.oom_killed().await {
            return (
                Status::Oom,
                format!("{what}: the container ran out of memory"),
            );
        }
        return (
            Status::Error,
            format!(
                "the container stopped while {what} ran (removed or killed from outside, or the Docker daemon restarted)"
            ),
        );
    }
    if sandbox.oom_kill_count().await.unwrap_or(0) > 0 {
        return (
            Status::Oom,
            format!(
                "{what}: the container ran out of memory; the kernel's OOM killer took the harness's in-container timer too (exit {exit:?})"
            ),
        );
    }
    (
        on_fail,
        format!(
            "{what}: the harness's in-container timer was killed (exit {exit:?}) while the code under test ran beside it: {}",
            last_lines(output, 3)
        ),
    )
}

/// Whether the container is stopped, or stops within a second: a container killed from
/// outside (`docker rm -f`, a daemon restart) ends its exec before Docker marks it stopped,
/// and a timer that died with it is not the code's fault.
async fn stops_soon(sandbox: &Sandbox) -> bool {
    for _ in 0..5 {
        if !sandbox.is_running().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    !sandbox.is_running().await
}

pub fn describe_exit(code: i64) -> String {
    match code {
        // SIGXFSZ: a file grew past RLIMIT_FSIZE, which the timer sets to the disk limit.
        -25 => "was killed for writing a file larger than the task's disk limit (SIGXFSZ)".into(),
        c if c < 0 => format!("was killed by signal {}", -c),
        c => format!("exited {c}"),
    }
}

/// One way a variant's run broke the protection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub path: String,
    /// "changed", "deleted" or "created".
    pub what: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.what, self.path)
    }
}

/// Which of `changes` (relative to the variant's own snapshot `manifest`) are violations:
/// any change to a watched file that existed; a new watched file unless base's runs made
/// the same path (`reference_new`: a build that copies tests, pip's own `.pth`).
pub fn violations(
    changes: &Snapshot,
    manifest: &Snapshot,
    reference_new: &BTreeSet<String>,
) -> Vec<Violation> {
    changes
        .iter()
        .filter_map(|(path, now)| {
            let what = match (manifest.get(path), now.as_str()) {
                (Some(_), "missing") => "deleted",
                (Some(_), _) => "changed",
                (None, "missing") => return None,
                (None, _) if reference_new.contains(path) => return None,
                (None, _) => "created",
            };
            Some(Violation {
                path: path.clone(),
                what: what.into(),
            })
        })
        .collect()
}

/// Paths a variant's runs created that its snapshot did not have.
pub fn created(changes: &Snapshot, manifest: &Snapshot) -> BTreeSet<String> {
    changes
        .iter()
        .filter(|(p, now)| !manifest.contains_key(*p) && now.as_str() != "missing")
        .map(|(p, _)| p.clone())
        .collect()
}

/// The protected files (tree paths only) where a sample's snapshot after its patch differs
/// from base's: the patch reached them although the host-side check let it through.
pub fn tree_differences(sample: &Snapshot, base: &Snapshot) -> Vec<Violation> {
    let tree = |s: &Snapshot| -> BTreeMap<String, String> {
        s.iter()
            .filter(|(p, _)| !p.starts_with('/') && !p.starts_with("~/"))
            .map(|(p, d)| (p.clone(), d.clone()))
            .collect()
    };
    let (a, b) = (tree(sample), tree(base));
    let mut out = Vec::new();
    for path in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
        let what = match (b.get(path), a.get(path)) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(_), Some(_)) => "changed",
            (Some(_), None) => "deleted",
            (None, Some(_)) => "created",
            (None, None) => continue,
        };
        out.push(Violation {
            path: path.clone(),
            what: what.into(),
        });
    }
    out
}

pub fn describe_violations(when: &str, v: &[Violation]) -> String {
    let list: Vec<String> = v.iter().take(5).map(|x| x.to_string()).collect();
    let more = if v.len() > 5 {
        format!(" and {} more", v.len() - 5)
    } else {
        String::new()
    };
    format!(
        "{when} the code under test touched protected files: {}{more}",
        list.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_nonced_line_is_the_result() {
        let out = "hello\nHARNESS_RESULT:fake {\"exit_code\": 0}\nHARNESS_RESULT:abc {\"exit_code\": 3}\n";
        let (json, shown) = split_result(out, "abc");
        assert_eq!(json, Some("{\"exit_code\": 3}"));
        assert_eq!(shown, "hello\nHARNESS_RESULT:fake {\"exit_code\": 0}\n");
        let (json, _) = split_result("HARNESS_RESULT:fake {}\n", "abc");
        assert_eq!(
            json, None,
            "a line printed by the code under test is not the guard's"
        );
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), 32);
    }

    #[test]
    fn violations_against_the_snapshot_and_base() {
        let manifest: Snapshot = [
            ("bench.py", "sha256:a"),
            ("/opt/harness/guard.py", "sha256:g"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let changes: Snapshot = [
            ("bench.py", "sha256:b"),
            ("conftest.py", "sha256:c"),
            ("build/lib/test_x.py", "sha256:d"),
            ("gone.py", "missing"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let base_new = BTreeSet::from(["build/lib/test_x.py".to_string()]);
        let v = violations(&changes, &manifest, &base_new);
        assert_eq!(
            v.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
            ["changed bench.py", "created conftest.py"]
        );
        let mut deleted = Snapshot::new();
        deleted.insert("bench.py".into(), "missing".into());
        assert_eq!(
            violations(&deleted, &manifest, &base_new)[0].what,
            "deleted"
        );
        assert_eq!(
            created(&changes, &manifest),
            BTreeSet::from(["build/lib/test_x.py".to_string(), "conftest.py".to_string()])
        );
    }

    #[test]
    fn tree_differences_ignore_absolute_paths() {
        let base: Snapshot = [
            ("bench.py", "sha256:a"),
            ("/usr/bin/python3.11", "sha256:p"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let mut same = base.clone();
        same.insert("/usr/bin/python3.11".into(), "sha256:other".into());
        assert!(tree_differences(&same, &base).is_empty());
        let mut edited = base.clone();
        edited.insert("bench.py".into(), "sha256:b".into());
        edited.insert("test_new.py".into(), "sha256:c".into());
        assert_eq!(
            tree_differences(&edited, &base)
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>(),
            ["changed bench.py", "created test_new.py"]
        );
    }
}
