//! A bench's output file judged by the task's `equivalence` command where it differs from
//! the reference's (base's, or human's in a round base sat out): run once per pair of
//! digests, in base's container, on base's code, never in the process of the code under
//! test. GSO's tests compare their result with base's reference inside the test (its
//! `--eqcheck`), which puts base's answer within the code's reach; here the code only writes
//! its result, and the comparison happens where the code cannot reach it.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde::Deserialize;

use super::{Dropout, Participant};
use crate::docker::container::Sandbox;
use crate::eval::guarded;
use harness_core::task::{Bench, OutputCheck, Task};
use harness_core::timings::{BenchLog, EquivalenceJudgment, RunRecord, finished_run};

/// The warden's folder in base's container where the two files wait for the check
/// (`container/programs/equivalence.py`'s inbox).
const INBOX: &str = "harness-equivalence";

fn command(bench: &Bench) -> Option<&str> {
    match &bench.output_check {
        OutputCheck::File {
            equivalence: Some(c),
            ..
        } => Some(c),
        _ => None,
    }
}

/// The digest of each repetition's output file, kept on the run's record for benches the
/// equivalence command judges.
pub(super) fn rep_digests(bench: &Bench, reps: &[super::run::Repetition]) -> Vec<String> {
    match command(bench) {
        Some(_) => reps.iter().map(|r| r.output_digest.clone()).collect(),
        None => Vec::new(),
    }
}

/// The repetitions' (reference's, variant's) digests that differ; None when the runs cannot
/// be paired repetition by repetition.
fn differing(reference: &RunRecord, run: &RunRecord) -> Option<Vec<(String, String)>> {
    if reference.rep_digests.is_empty() || reference.rep_digests.len() != run.rep_digests.len() {
        return None;
    }
    Some(
        reference
            .rep_digests
            .iter()
            .zip(&run.rep_digests)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect(),
    )
}

fn judgment<'a>(
    judged: &'a [EquivalenceJudgment],
    bench: &str,
    pair: &(String, String),
) -> Option<&'a EquivalenceJudgment> {
    judged
        .iter()
        .find(|j| j.bench == bench && j.reference == pair.0 && j.output == pair.1)
}

/// Whether `run` answered what `reference` did, repetition by repetition: the same file, or
/// one the task's equivalence command judged equivalent.
pub(super) fn equivalent(
    judged: &[EquivalenceJudgment],
    bench: &str,
    reference: &RunRecord,
    run: &RunRecord,
) -> bool {
    differing(reference, run).is_some_and(|pairs| {
        pairs
            .iter()
            .all(|p| judgment(judged, bench, p).is_some_and(|j| j.equivalent))
    })
}

/// What the equivalence command said against `run`, when it said no.
pub(super) fn refusal(
    judged: &[EquivalenceJudgment],
    bench: &str,
    reference: &RunRecord,
    run: &RunRecord,
) -> Option<String> {
    differing(reference, run)?
        .iter()
        .filter_map(|p| judgment(judged, bench, p))
        .find(|j| !j.equivalent)
        .map(|j| j.detail.clone())
}

/// After a round's runs: every output file that differs from the reference's, judged once
/// per pair of digests by the task's equivalence command in base's container.
pub(super) async fn judge_round(
    task: &Task,
    variants: &[Participant<'_>],
    log: &mut BenchLog,
    round: u32,
    dropouts: &BTreeMap<String, Dropout>,
) {
    let Some(base) = variants
        .iter()
        .find(|p| p.label == "base")
        .and_then(|p| p.sandboxes.first().copied())
    else {
        return;
    };
    for bench in &task.benches {
        let Some(command) = command(bench) else {
            continue;
        };
        let find = |label: &str| finished_run(&log.runs, round, label, &bench.name).cloned();
        let Some(reference) = find("base").or_else(|| find("human")) else {
            continue;
        };
        let sandbox_of = |r: &RunRecord| {
            variants
                .iter()
                .find(|p| p.label == r.variant)
                .and_then(|p| p.sandboxes.get(r.replica as usize).copied())
        };
        for p in variants.iter().filter(|p| p.label != reference.variant) {
            let Some(run) = find(&p.label).filter(|_| !dropouts.contains_key(&p.label)) else {
                continue;
            };
            if run.output_digest == reference.output_digest {
                continue;
            }
            for pair in differing(&reference, &run).unwrap_or_default() {
                if judgment(&log.equivalence, &bench.name, &pair).is_some() {
                    continue;
                }
                let files = (sandbox_of(&reference), sandbox_of(&run));
                let said = match files {
                    (Some(from_ref), Some(from_run)) => {
                        judge_pair(
                            bench,
                            command,
                            (from_ref, &pair.0),
                            (from_run, &pair.1),
                            base,
                        )
                        .await
                    }
                    _ => Err(anyhow::anyhow!("a container of the pair is gone")),
                };
                let (equivalent, detail) = match said {
                    Ok(said) => said,
                    Err(e) => (false, format!("the equivalence check could not run: {e:#}")),
                };
                log.equivalence.push(EquivalenceJudgment {
                    bench: bench.name.clone(),
                    reference: pair.0,
                    output: pair.1,
                    equivalent,
                    detail,
                });
            }
        }
    }
}

/// The equivalence mode's result line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckResult {
    exit_code: i64,
    output_flood: bool,
    timed_out: bool,
    output_tail: String,
    harness_error: Option<String>,
}

/// Carries the two kept files into base's container and runs the command there: (whether
/// equivalent, why not).
async fn judge_pair(
    bench: &Bench,
    command: &str,
    reference: (&Sandbox, &str),
    output: (&Sandbox, &str),
    base: &Sandbox,
) -> Result<(bool, String)> {
    let reference_bytes = fetch(reference.0, bench, reference.1).await?;
    let Some(output_bytes) = fetch(output.0, bench, output.1).await? else {
        return Ok((
            false,
            format!(
                "its output file ({}) was not kept: not a whole regular file, or larger than the room for it",
                output.1
            ),
        ));
    };
    let reference_bytes = reference_bytes
        .with_context(|| format!("the reference's file ({}) was not kept", reference.1))?;
    let (reference_path, output_path) = (format!("{INBOX}/reference"), format!("{INBOX}/output"));
    base.upload_with_folders(
        "/opt",
        &[
            (reference_path.as_str(), reference_bytes.as_slice(), 0o644),
            (output_path.as_str(), output_bytes.as_slice(), 0o644),
        ],
        &[(INBOX, 0o700, crate::protect::WARDEN_UID)],
    )
    .await?;
    let nonce = guarded::nonce();
    // The command's own deadline is kept inside the container (its processes killed there,
    // the pair judged not equivalent): the exec's timeout, far above it, would kill the
    // whole container, base's, and with it every sample of the task.
    let deadline = bench.timeout.as_secs().max(1);
    let args = vec![
        "equivalence".to_string(),
        "--deadline".into(),
        deadline.to_string(),
        "--".into(),
        command.to_string(),
    ];
    let timeout = bench.timeout * 2 + Duration::from_secs(120);
    // The result line is read before the secrets are taken out (see contract::redact_values).
    let out = base
        .exec_as_unredacted(
            &guarded::python(guarded::TIMER_PATH, &args),
            crate::protect::ROOT,
            &[format!("HARNESS_NONCE={nonce}")],
            timeout,
            super::super::LOG_LIMIT,
        )
        .await?;
    let (line, rest) = guarded::split_result(&out.output, &nonce);
    let Some(line) = line else {
        bail!(
            "the equivalence check printed no result (exit {:?}): {}",
            out.exit_code,
            base.redact(&rest)
        );
    };
    let r: CheckResult = serde_json::from_str(line).context("the equivalence check's result")?;
    if let Some(e) = r.harness_error {
        bail!("{e}");
    }
    let last: String = r.output_tail.trim().chars().rev().take(400).collect();
    let tail = base.redact(&last.chars().rev().collect::<String>());
    Ok(match (r.exit_code, r.output_flood) {
        _ if r.timed_out => (
            false,
            format!("the equivalence command ran past its limit of {deadline} s: {tail}"),
        ),
        (0, false) => (true, String::new()),
        (_, true) => (
            false,
            "the equivalence command printed past its output limit".into(),
        ),
        (code, false) => (
            false,
            format!("the task's equivalence command said no (exit {code}): {tail}"),
        ),
    })
}

/// A kept output file of a variant's container, by digest (None: not kept).
async fn fetch(sandbox: &Sandbox, bench: &Bench, digest: &str) -> Result<Option<Vec<u8>>> {
    let nonce = guarded::nonce();
    let args = vec![
        "kept".to_string(),
        "--out-dir".into(),
        crate::docker::spec::BENCH_OUTPUT_DIR.into(),
        "--keep-output".into(),
        bench.name.clone(),
        "--".into(),
        digest.to_string(),
    ];
    let limit = (64usize << 20) / 3 * 4 + (1 << 16);
    let out = sandbox
        .exec_as_unredacted(
            &guarded::python(guarded::TIMER_PATH, &args),
            crate::protect::ROOT,
            &[format!("HARNESS_NONCE={nonce}")],
            Duration::from_secs(120),
            limit,
        )
        .await?;
    let (line, _) = guarded::split_result(&out.output, &nonce);
    let line =
        line.with_context(|| format!("no kept file came back (exit {:?})", out.exit_code))?;
    let text: Option<String> = serde_json::from_str(line).context("the kept file's line")?;
    text.map(|t| {
        base64::engine::general_purpose::STANDARD
            .decode(t.trim())
            .context("the kept file's base64")
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(variant: &str, digests: &[&str]) -> RunRecord {
        let mut r = RunRecord::plain(variant, "b", 0, 1.0);
        r.rep_digests = digests.iter().map(|d| d.to_string()).collect();
        r.output_digest = Some(digests.join("+"));
        r
    }

    fn said(reference: &str, output: &str, equivalent: bool) -> EquivalenceJudgment {
        EquivalenceJudgment {
            bench: "b".into(),
            reference: reference.into(),
            output: output.into(),
            equivalent,
            detail: if equivalent {
                String::new()
            } else {
                "no".into()
            },
        }
    }

    #[test]
    fn a_run_passes_only_when_every_repetition_that_differs_was_judged_equivalent() {
        let base = run("base", &["a1", "a2", "a3"]);
        let sample = run("s0", &["a1", "x2", "x3"]);
        // Nothing judged yet: the difference stands.
        assert!(!equivalent(&[], "b", &base, &sample));
        let one = vec![said("a2", "x2", true)];
        assert!(!equivalent(&one, "b", &base, &sample), "x3 was not judged");
        let both = vec![said("a2", "x2", true), said("a3", "x3", true)];
        assert!(equivalent(&both, "b", &base, &sample));
        // A judgment of another bench, or of the pair the other way round, is not this one.
        let elsewhere = vec![said("a2", "x2", true), {
            let mut j = said("a3", "x3", true);
            j.bench = "other".into();
            j
        }];
        assert!(!equivalent(&elsewhere, "b", &base, &sample));
        let no = vec![said("a2", "x2", true), said("a3", "x3", false)];
        assert!(!equivalent(&no, "b", &base, &sample));
        assert_eq!(refusal(&no, "b", &base, &sample).as_deref(), Some("no"));
        // Runs that cannot be paired repetition by repetition are never equivalent.
        let short = run("s1", &["x2"]);
        assert!(!equivalent(&both, "b", &base, &short));
        assert!(!equivalent(&both, "b", &run("base", &[]), &run("s2", &[])));
    }

    /// The timer's side: each repetition's file kept whole under its digest's hex, none of
    /// a truncated one, and `kept` answers only a well-formed digest of a kept file.
    #[test]
    fn the_timer_keeps_each_whole_output_file_under_its_digest() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../container/programs");
        let out = tempfile::tempdir().unwrap();
        let script = r#"
import hashlib, json, os, sys
import output
out = sys.argv[1]
kept = output.kept_dir(out, "..")
output.reset_kept(kept)
def copy(data, truncated=False):
    path = os.path.join(out, "copy")
    with open(path, "wb") as f:
        f.write(data)
    return output.copied_digest(os.open(path, os.O_RDONLY), {"bytes": len(data), "truncated": truncated}, kept)
whole = copy(b"\x00answer\xff" * 100000)
cut = copy(b"cut", truncated=True)
print(json.dumps({
    "whole": whole, "cut": cut, "names": sorted(os.listdir(kept)),
    "found": output.kept_file(out, "..", whole) is not None,
    "same": open(output.kept_file(out, "..", whole), "rb").read() == b"\x00answer\xff" * 100000,
    "bad": [output.kept_file(out, "..", d) for d in (cut, "sha256:../../x", "sha256:" + "A" * 64)],
    "inside": os.path.dirname(kept) == os.path.join(out, "kept"),
}))
"#;
        let o = std::process::Command::new("python3")
            .args(["-B", "-c", script])
            .arg(out.path())
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let whole = v["whole"].as_str().unwrap();
        assert!(
            whole.starts_with("sha256:") && !whole.ends_with(":truncated"),
            "{v}"
        );
        assert!(v["cut"].as_str().unwrap().ends_with(":truncated"), "{v}");
        assert_eq!(
            v["names"],
            serde_json::json!([&whole["sha256:".len()..]]),
            "{v}"
        );
        assert_eq!(v["found"], true);
        assert_eq!(v["same"], true);
        assert_eq!(v["bad"], serde_json::json!([null, null, null]));
        assert_eq!(
            v["inside"], true,
            "a bench named .. keeps its files in the kept folder"
        );
    }
}
