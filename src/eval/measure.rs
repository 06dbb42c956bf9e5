//! Measurement: the benches of every correct variant of a task, in interleaved rounds,
//! timed inside the container around the bench process; adaptive under `strict`.
//!
//! A round runs every bench once for base, human and every sample still being measured, in
//! an order that changes each round (a Williams design: positions and predecessors
//! balanced). After the warmups and the minimum number of rounds, a sample whose verdict is
//! decided stops; the others go on, with base and human, until they are decided or the
//! budget (rounds, wall time) is spent. Every run counts; runs during which a known event
//! happened (the CPU changed speed, the container's CPU quota throttled it, it sat off-CPU
//! far longer than its other runs) are flagged in `bench.json`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::docker::container::Sandbox;
use crate::eval::guarded::{self, Snapshot};
use crate::events::{Event, Events, emit};
use crate::results::Status;
use crate::rule::{Criterion, DecisionRule};
use crate::task::{Bench, Metric, OutputCheck, Task};
use crate::telemetry::RunTag;
pub use crate::timings::{BenchLog, BenchSetting, RoundRecord, RunGpu, RunRecord, Schedule};
use crate::verdict::judge;

/// One variant taking part in a measurement.
pub struct Participant<'a> {
    pub label: String,
    /// Its containers: round r runs in the (r mod n)-th.
    pub sandboxes: Vec<&'a Sandbox>,
    /// Its watched files right after its patch (see `guarded`).
    pub manifest: Snapshot,
}

#[derive(Debug, Deserialize)]
struct TimerResult {
    wall_ns: u64,
    exit_code: i64,
    user_s: f64,
    sys_s: f64,
    max_rss_kb: u64,
    #[serde(default)]
    involuntary_switches: u64,
    #[serde(default)]
    throttled: Option<u64>,
    #[serde(default)]
    cpu_probe_ms: Option<[f64; 2]>,
    stdout_tail: String,
    stderr_tail: String,
    #[serde(default)]
    output_digest: Option<String>,
    #[serde(default)]
    oom_kills: Option<u64>,
    #[serde(default)]
    lingering_killed: u64,
    #[serde(default)]
    changes: Snapshot,
    #[serde(default)]
    ignore_errors: Vec<String>,
}

/// A variant that failed during measurement, and how.
#[derive(Debug, Clone)]
pub struct Dropout {
    pub status: Status,
    pub detail: String,
}

pub struct MeasureOutcome {
    pub log: BenchLog,
    pub dropouts: BTreeMap<String, Dropout>,
}

pub use crate::plan::Budget;

/// Containers per variant: `--replicas`, else the task's `measure.replicas`, else
/// [`DEFAULT_REPLICAS`] under strict; one under gso (GSO's protocol).
pub fn replicas(task: &Task, rule: &DecisionRule, budget: &Budget) -> usize {
    match rule.criterion {
        Criterion::Gso => 1,
        Criterion::Strict => budget
            .replicas
            .or(task.replicas)
            .unwrap_or(DEFAULT_REPLICAS)
            .max(1) as usize,
    }
}

/// Containers per variant under strict, unless the task or the command line says.
pub const DEFAULT_REPLICAS: u32 = 5;

/// The schedule for a task: warmups = the most any bench asks, in every container (round r
/// runs in replica r mod C, so the first warmups × C rounds are warmups); rounds from `runs`
/// (min) and `max_runs` (max), overridden from the command line. Under `gso` the number of
/// rounds is fixed at the minimum, as GSO does.
pub fn schedule(
    task: &Task,
    rule: &DecisionRule,
    budget: &Budget,
    cpuset: Option<String>,
) -> Schedule {
    let replicas = replicas(task, rule, budget) as u32;
    let warmup_rounds = task.benches.iter().map(|b| b.warmups).max().unwrap_or(0) * replicas;
    let min_rounds = budget
        .min_rounds
        .unwrap_or_else(|| task.benches.iter().map(|b| b.runs).max().unwrap_or(1))
        .max(1);
    let max_rounds = match rule.criterion {
        Criterion::Gso => min_rounds,
        Criterion::Strict => budget
            .max_rounds
            .unwrap_or_else(|| {
                task.benches
                    .iter()
                    .map(|b| b.max_runs)
                    .max()
                    .unwrap_or(min_rounds)
            })
            .max(min_rounds),
    };
    Schedule {
        criterion: rule.criterion,
        warmup_rounds,
        min_rounds,
        max_rounds,
        max_seconds: budget.max_seconds.unwrap_or(task.measure_max_seconds),
        cpuset,
        replicas,
    }
}

/// The order of a round, from a Williams design: over a cycle of rounds (n rounds for n
/// variants when n is even, 2n when odd) every variant runs in every position equally
/// often *and* right after every other variant equally often. A plain rotation balances
/// positions only: it keeps the cyclic sequence, so one variant always runs right after the
/// same other one, and any carry-over on the machine (a short run leaves the CPU "rested",
/// caches warm for the next) biases that pair's ratio the same way every round.
pub fn round_order<T: Copy>(members: &[T], round: u32) -> Vec<T> {
    let n = members.len();
    if n == 0 {
        return Vec::new();
    }
    // First row: 0, 1, n-1, 2, n-2, ...; row r adds r (mod n); odd n adds the mirror rows.
    let first = (0..n).map(|k| match k {
        0 => 0,
        k if k % 2 == 1 => k.div_ceil(2),
        k => n - k / 2,
    });
    let rows = if n.is_multiple_of(2) { n } else { 2 * n };
    let r = round as usize % rows;
    let mut row: Vec<usize> = first.map(|f| (f + r % n) % n).collect();
    if r >= n {
        row.reverse();
    }
    row.into_iter().map(|i| members[i]).collect()
}

/// Whether a sample needs no more rounds: under gso, once it has the fixed number; under
/// strict, once it has the minimum and a decided verdict, or the maximum either way.
pub fn sample_finished(schedule: &Schedule, paired_rounds: u32, decided: bool) -> bool {
    match schedule.criterion {
        Criterion::Gso => paired_rounds >= schedule.min_rounds,
        Criterion::Strict => {
            (paired_rounds >= schedule.min_rounds && decided)
                || paired_rounds >= schedule.max_rounds
        }
    }
}

/// Pulls the compared figure out of a run.
pub fn extract_value(metric: &Metric, wall_s: f64, stdout: &str, stderr: &str) -> Option<f64> {
    match metric {
        Metric::Wall => Some(wall_s),
        Metric::Pattern(re) => [stdout, stderr].iter().find_map(|text| {
            re.captures_iter(text)
                .last()
                .and_then(|c| c.get(1))
                .and_then(|m| m.as_str().trim().parse::<f64>().ok())
        }),
        Metric::JsonKey(key) => [stdout, stderr].iter().find_map(|text| {
            text.lines().rev().find_map(|line| {
                let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
                v.get(key)?.as_f64()
            })
        }),
    }
    .filter(|v| v.is_finite() && *v > 0.0)
}

/// How far apart CPU-speed probes may be before a run counts as made at another speed.
pub const PROBE_TOLERANCE: f64 = 1.3;

/// A run is disturbed by a known event when:
/// - the CPU changed speed during it: the probe after the run took over 1.3x (or under
///   1/1.3) the probe before it (seen on shared machines as stretches at half speed: a busy
///   sibling hyperthread, host contention);
/// - the container's CPU quota throttled it;
/// - a bench that is CPU-bound in its other runs spent far less of this run on a CPU (it was
///   descheduled: something else had its core).
///
/// [`flag_round`] adds the last known event once a round is complete: a run made at
/// another CPU speed than the rest of its round.
pub fn disturbance(run: &RunRecord, history: &[&RunRecord]) -> Option<String> {
    if let Some([before, after]) = run.cpu_probe_ms
        && before > 0.0
        && after > 0.0
        && (after / before > PROBE_TOLERANCE || before / after > PROBE_TOLERANCE)
    {
        return Some(format!(
            "CPU speed changed during the run: probe {before:.2} ms before, {after:.2} ms after"
        ));
    }
    if let Some(n) = run.throttled
        && n > 0
    {
        return Some(format!("CPU quota throttled the container {n} time(s)"));
    }
    let on_cpu = |r: &RunRecord| {
        if r.wall_s > 0.0 {
            (r.user_s + r.sys_s) / r.wall_s
        } else {
            0.0
        }
    };
    let mut usual: Vec<f64> = history
        .iter()
        .filter(|r| r.disturbed.is_none() && r.exit_code == 0)
        .map(|r| on_cpu(r))
        .collect();
    // Runs shorter than 50 ms are dominated by start-up; their CPU share says little.
    if usual.len() < 3 || run.wall_s < 0.05 {
        return None;
    }
    usual.sort_by(f64::total_cmp);
    let median = usual[usual.len() / 2];
    let this = on_cpu(run);
    if median >= 0.9 && this < median - 0.25 {
        return Some(format!(
            "descheduled: on a CPU for {:.0}% of the run, against {:.0}% usually",
            this * 100.0,
            median * 100.0
        ));
    }
    None
}

/// Flags the runs of one complete round that were made at another CPU speed than the
/// round's usual (the median of its probes): base, human and samples are compared only
/// when they ran under the same conditions.
pub fn flag_round(runs: &mut [RunRecord]) {
    let speed = |r: &RunRecord| {
        r.cpu_probe_ms
            .map(|[a, b]| (a + b) / 2.0)
            .filter(|s| *s > 0.0)
    };
    let mut speeds: Vec<f64> = runs
        .iter()
        .filter(|r| !r.warmup)
        .filter_map(speed)
        .collect();
    if speeds.len() < 3 {
        return;
    }
    speeds.sort_by(f64::total_cmp);
    let usual = speeds[speeds.len() / 2];
    for r in runs
        .iter_mut()
        .filter(|r| !r.warmup && r.disturbed.is_none())
    {
        if let Some(sp) = speed(r)
            && (sp > usual * PROBE_TOLERANCE || sp < usual / PROBE_TOLERANCE)
        {
            r.disturbed = Some(format!(
                "CPU speed off the rest of its round: probe {sp:.2} ms, the round's usual {usual:.2} ms"
            ));
        }
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// Measures `variants` (label, container) of `task`: labels "base" and "human" are the
/// references, every other label a sample. A sample whose bench fails or times out leaves
/// the measurement with a status; the others go on.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    task: &Task,
    variants: &[Participant<'_>],
    shared: &BTreeMap<String, String>,
    rule: &DecisionRule,
    schedule: Schedule,
    timeout_scale: f64,
    events: &Events,
    telemetry: Option<&crate::telemetry::Sampler>,
) -> MeasureOutcome {
    let started = Instant::now();
    let benches: Vec<BenchSetting> = task
        .benches
        .iter()
        .map(|b| BenchSetting {
            name: b.name.clone(),
            command: b.command.clone(),
            warmups: b.warmups,
            runs: b.runs,
            max_runs: b.max_runs,
            metric: b.metric.describe(),
            better: b.better,
            timeout_s: b.timeout.as_secs_f64() * timeout_scale,
            output_check: b.output_check.describe(),
        })
        .collect();
    let mut log = BenchLog {
        shared_code_only: Default::default(),
        schema_version: crate::results::SCHEMA_VERSION,
        instance_id: task.id.clone(),
        sample_variant: None,
        variants: variants.iter().map(|p| p.label.clone()).collect(),
        benches,
        schedule: schedule.clone(),
        rounds: Vec::new(),
        runs: Vec::new(),
        decided_after: BTreeMap::new(),
        dropped: BTreeMap::new(),
        stop_reason: String::new(),
        seconds: 0.0,
        shared: shared.clone(),
        telemetry_lines: Vec::new(),
    };
    let mut dropouts: BTreeMap<String, Dropout> = BTreeMap::new();
    let is_reference = |l: &str| l == "base" || l == "human";
    let mut done: BTreeMap<String, String> = BTreeMap::new();
    // New watched files base's runs made: a sample making the same ones is normal.
    let mut base_created: std::collections::BTreeSet<String> = Default::default();
    let round_limit = schedule.warmup_rounds + schedule.max_rounds;
    let deadline = started + Duration::from_secs_f64(schedule.max_seconds.max(1.0));
    let mut round: u32 = 0;
    let stop_reason = loop {
        let samples_left: Vec<usize> = (0..variants.len())
            .filter(|&i| {
                let l = &variants[i].label;
                !is_reference(l) && !dropouts.contains_key(l) && !done.contains_key(l)
            })
            .collect();
        // Samples sharing another variant's timings follow it: out with it, decided with
        // it (their judgement reads its runs); one sharing human's needs base and human.
        for (label, source) in shared {
            if let Some(d) = dropouts.get(source).cloned()
                && !dropouts.contains_key(label)
            {
                dropouts.insert(
                    label.clone(),
                    Dropout {
                        status: d.status,
                        detail: format!("its tree is identical to {source}'s: {}", d.detail),
                    },
                );
            }
        }
        let shared_left = shared
            .keys()
            .filter(|l| !dropouts.contains_key(*l) && !done.contains_key(*l))
            .count();
        if samples_left.is_empty() && shared_left == 0 {
            break "every sample decided or out".to_string();
        }
        if ["base", "human"].iter().any(|r| dropouts.contains_key(*r)) {
            break "a reference variant failed".to_string();
        }
        if round >= round_limit {
            break format!("round budget spent ({round} rounds)");
        }
        if round > 0 && Instant::now() >= deadline {
            break format!("time budget spent ({:.0} s)", schedule.max_seconds);
        }
        emit(
            events,
            Event::Round {
                instance: task.id.clone(),
                round: round + 1,
                rounds: schedule.warmup_rounds + schedule.max_rounds,
            },
        );
        let members: Vec<usize> = (0..variants.len())
            .filter(|&i| is_reference(&variants[i].label) || samples_left.contains(&i))
            .collect();
        let order = round_order(&members, round);
        let seed = round_seed();
        log.rounds.push(RoundRecord {
            round,
            order: order.iter().map(|&i| variants[i].label.clone()).collect(),
            seed: Some(seed),
        });
        let warmup = round < schedule.warmup_rounds;
        let mut changes: BTreeMap<String, Snapshot> = BTreeMap::new();
        let mut tails: BTreeMap<(String, String), String> = BTreeMap::new();
        for (bench_index, bench) in task.benches.iter().enumerate() {
            for &i in &order {
                let p = &variants[i];
                let label = &p.label;
                if dropouts.contains_key(label) {
                    continue;
                }
                let replica = round as usize % p.sandboxes.len().max(1);
                let Some(sandbox) = p.sandboxes.get(replica) else {
                    continue;
                };
                let watching = match telemetry {
                    Some(sampler) => Some(
                        sampler
                            .start_run(RunTag {
                                variant: label.clone(),
                                round,
                                run: bench_index as u32,
                            })
                            .await
                            .map_err(|e| e.to_string()),
                    ),
                    None => None,
                };
                let ran = run_once(sandbox, bench, timeout_scale, seed).await;
                let gpu = match (telemetry, watching) {
                    (Some(sampler), Some(Ok(()))) => Some(
                        sampler
                            .end_run()
                            .await
                            .map(|report| {
                                log.telemetry_lines.extend(report.jsonl_lines());
                                run_gpu(report)
                            })
                            .map_err(|e| e.to_string()),
                    ),
                    (_, Some(Err(e))) => Some(Err(e)),
                    _ => None,
                };
                match ran {
                    Ok(result) => {
                        let wall_s = result.wall_ns as f64 / 1e9;
                        let value = extract_value(
                            &bench.metric,
                            wall_s,
                            &result.stdout_tail,
                            &result.stderr_tail,
                        );
                        let mut record = RunRecord {
                            round,
                            warmup,
                            variant: label.clone(),
                            bench: bench.name.clone(),
                            wall_s,
                            value,
                            exit_code: result.exit_code,
                            user_s: result.user_s,
                            sys_s: result.sys_s,
                            max_rss_kb: result.max_rss_kb,
                            involuntary_switches: result.involuntary_switches,
                            throttled: result.throttled,
                            cpu_probe_ms: result.cpu_probe_ms,
                            disturbed: None,
                            output_digest: result.output_digest.clone(),
                            lingering_killed: result.lingering_killed,
                            replica: replica as u32,
                            gpu: gpu.as_ref().and_then(|g| g.as_ref().ok()).cloned(),
                        };
                        if result.exit_code == 0 && value.is_some() && !warmup {
                            let history: Vec<&RunRecord> = log
                                .runs
                                .iter()
                                .filter(|r| {
                                    r.variant == *label && r.bench == bench.name && !r.warmup
                                })
                                .collect();
                            record.disturbed = disturbance(&record, &history);
                            // What the GPUs say comes first: a throttled GPU, or telemetry
                            // missing for the run, is never passed over silently.
                            if let Some(why) = gpu.as_ref().and_then(gpu_disturbance) {
                                record.disturbed = Some(why);
                            }
                        }
                        log.runs.push(record);
                        tails.insert(
                            (label.clone(), bench.name.clone()),
                            result.stdout_tail.clone(),
                        );
                        changes.insert(label.clone(), result.changes.clone());
                        if let Some(e) = result.ignore_errors.first() {
                            dropouts.insert(
                                label.clone(),
                                Dropout {
                                    status: Status::Error,
                                    detail: format!(
                                        "bench `{}`: the in-container timer cannot read a line pattern: {e}",
                                        bench.name
                                    ),
                                },
                            );
                        } else if result.exit_code != 0 {
                            let oom = result.oom_kills.unwrap_or(0) > 0;
                            dropouts.insert(
                                label.clone(),
                                Dropout {
                                    status: if oom { Status::Oom } else { Status::TestFailed },
                                    detail: format!(
                                        "bench `{}` {} in round {round}{}: {}",
                                        bench.name,
                                        guarded::describe_exit(result.exit_code),
                                        if oom {
                                            " (killed by the kernel's OOM killer)"
                                        } else {
                                            ""
                                        },
                                        last_lines(&result.stderr_tail, 5)
                                    ),
                                },
                            );
                        } else if value.is_none() {
                            dropouts.insert(
                                label.clone(),
                                Dropout {
                                    status: Status::TestFailed,
                                    detail: format!(
                                        "bench `{}` printed no figure for {} in round {round}",
                                        bench.name,
                                        bench.metric.describe()
                                    ),
                                },
                            );
                        }
                    }
                    Err(d) => {
                        dropouts.insert(label.clone(), d);
                    }
                }
            }
        }
        check_round(
            task,
            variants,
            &log,
            round,
            seed,
            &changes,
            &tails,
            &mut base_created,
            &mut dropouts,
        );
        let first_of_round = log
            .runs
            .iter()
            .position(|r| r.round == round)
            .unwrap_or(log.runs.len());
        flag_round(&mut log.runs[first_of_round..]);
        round += 1;
        // Which samples are finished: enough paired rounds and a decided verdict (strict),
        // or the minimum (gso), or the maximum either way.
        let shared_labels: Vec<&String> = shared.keys().collect();
        for label in samples_left
            .iter()
            .map(|&i| &variants[i].label)
            .chain(shared_labels)
        {
            if dropouts.contains_key(label) || done.contains_key(label) {
                continue;
            }
            let j = judge(&log, label, rule);
            let paired = j.rounds();
            if sample_finished(&schedule, paired, j.decided()) {
                if j.decided() {
                    log.decided_after.insert(label.clone(), round);
                }
                done.insert(label.clone(), format!("{paired} rounds"));
            }
        }
    };
    log.dropped = dropouts
        .iter()
        .map(|(k, d)| (k.clone(), format!("{}: {}", d.status, d.detail)))
        .collect();
    log.stop_reason = stop_reason;
    log.seconds = started.elapsed().as_secs_f64();
    MeasureOutcome { log, dropouts }
}

/// A run's telemetry over all the task's GPUs.
fn run_gpu(report: crate::telemetry::RunReport) -> RunGpu {
    let energy_j = report
        .devices
        .iter()
        .map(|d| d.energy_j)
        .sum::<Option<f64>>();
    RunGpu {
        energy_j,
        throttled: report.devices.iter().any(|d| d.throttled),
        devices: report.devices,
    }
}

/// Why a GPU run is disturbed: clocks throttled for heat or power, a device's telemetry
/// incomplete, or no telemetry at all.
fn gpu_disturbance(gpu: &Result<RunGpu, String>) -> Option<String> {
    match gpu {
        Err(e) => Some(format!("no GPU telemetry for the run: {e}")),
        Ok(g) => {
            let throttled: Vec<String> = g
                .devices
                .iter()
                .filter(|d| d.throttled)
                .map(|d| format!("GPU {} ({})", d.device_index, d.throttle_reasons.join(", ")))
                .collect();
            if !throttled.is_empty() {
                return Some(format!("GPU clocks throttled: {}", throttled.join("; ")));
            }
            g.devices
                .iter()
                .find_map(|d| d.incomplete.clone())
                .map(|why| format!("GPU telemetry incomplete: {why}"))
        }
    }
}

/// A fresh random seed for a round.
fn round_seed() -> u64 {
    u64::from_str_radix(&guarded::nonce()[..16], 16).unwrap_or(0)
}

/// After a round: the protection held in every run (a sample may make only the new watched
/// files base made), and every variant's bench printed base's answer.
#[allow(clippy::too_many_arguments)]
fn check_round(
    task: &Task,
    variants: &[Participant<'_>],
    log: &BenchLog,
    round: u32,
    seed: u64,
    changes: &BTreeMap<String, Snapshot>,
    tails: &BTreeMap<(String, String), String>,
    base_created: &mut std::collections::BTreeSet<String>,
    dropouts: &mut BTreeMap<String, Dropout>,
) {
    if let (Some(c), Some(base)) = (
        changes.get("base"),
        variants.iter().find(|p| p.label == "base"),
    ) {
        base_created.extend(guarded::created(c, &base.manifest));
    }
    for p in variants {
        let Some(c) = changes.get(&p.label) else {
            continue;
        };
        let reference = p.label == "base" || p.label == "human";
        let allowed = if reference {
            guarded::created(c, &p.manifest)
        } else {
            base_created.clone()
        };
        let found = guarded::violations(c, &p.manifest, &allowed);
        if !found.is_empty() && !dropouts.contains_key(&p.label) {
            dropouts.insert(
                p.label.clone(),
                Dropout {
                    status: if reference {
                        Status::TestFailed
                    } else {
                        Status::PatchRejected
                    },
                    detail: guarded::describe_violations(
                        &format!("while the bench ran (round {round}),"),
                        &found,
                    ),
                },
            );
        }
    }
    for bench in &task.benches {
        if matches!(bench.output_check, OutputCheck::Off { .. }) {
            continue;
        }
        let digest = |label: &str| {
            log.runs
                .iter()
                .find(|r| r.round == round && r.variant == label && r.bench == bench.name)
                .filter(|r| r.exit_code == 0)
                .and_then(|r| r.output_digest.clone())
        };
        let Some(expected) = digest("base") else {
            continue;
        };
        for p in variants.iter().filter(|p| p.label != "base") {
            if dropouts.contains_key(&p.label) {
                continue;
            }
            let Some(got) = digest(&p.label) else {
                continue;
            };
            if got == expected {
                continue;
            }
            let what = match &bench.output_check {
                OutputCheck::File { path } => format!("the file {path}"),
                _ => "its output".to_string(),
            };
            let hint = first_difference(
                tails.get(&("base".to_string(), bench.name.clone())),
                tails.get(&(p.label.clone(), bench.name.clone())),
            );
            let detail = if p.label == "human" {
                format!(
                    "bench `{}`: human's {what} differs from base's in round {round} (seed {seed}){hint}; \
                     the output check needs a deterministic answer (lines to leave out: ignore_lines; \
                     or check_output = false with a reason)",
                    bench.name
                )
            } else {
                format!(
                    "bench `{}`: {what} differs from base's in round {round} (HARNESS_BENCH_SEED={seed}){hint}: \
                     the bench did not compute base's answer (it failed, exited early or printed a remembered one)",
                    bench.name
                )
            };
            dropouts.insert(
                p.label.clone(),
                Dropout {
                    status: Status::TestFailed,
                    detail,
                },
            );
        }
    }
}

/// ", first difference at line N: base `...`, this `...`", when the tails show it.
fn first_difference(base: Option<&String>, other: Option<&String>) -> String {
    let (Some(a), Some(b)) = (base, other) else {
        return String::new();
    };
    let cut = |s: &str| -> String {
        let s: String = s.chars().take(80).collect();
        s
    };
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i), lb.get(i));
        if x != y {
            return format!(
                ", first difference at line {}: base `{}`, this `{}`",
                i + 1,
                x.map(|s| cut(s)).unwrap_or_else(|| "(end)".into()),
                y.map(|s| cut(s)).unwrap_or_else(|| "(end)".into())
            );
        }
    }
    String::new()
}

async fn run_once(
    sandbox: &Sandbox,
    bench: &Bench,
    timeout_scale: f64,
    seed: u64,
) -> Result<TimerResult, Dropout> {
    let timeout = bench.timeout.mul_f64(timeout_scale) + Duration::from_secs(5);
    let mut args: Vec<String> = vec![
        "timed".into(),
        "--out-dir".into(),
        crate::docker::container::BENCH_OUTPUT_DIR.into(),
    ];
    match &bench.output_check {
        OutputCheck::Stdout { ignore } => {
            for p in ignore {
                args.push("--ignore".into());
                args.push(p.clone());
            }
        }
        OutputCheck::File { path } => {
            args.push("--output-file".into());
            args.push(path.clone());
        }
        OutputCheck::Off { .. } => {}
    }
    if let Metric::JsonKey(k) = &bench.metric {
        args.push("--ignore-json-key".into());
        args.push(k.clone());
    }
    args.push("--".into());
    args.push(bench.command.clone());
    let nonce = guarded::nonce();
    let out = sandbox
        .exec_as(
            &guarded::python(guarded::TIMER_PATH, &args),
            crate::protect::ROOT,
            &[
                format!("HARNESS_NONCE={nonce}"),
                format!("HARNESS_BENCH_SEED={seed}"),
            ],
            timeout,
            256 * 1024,
        )
        .await
        .map_err(|e| Dropout {
            status: Status::Error,
            detail: format!("bench `{}`: {e:#}", bench.name),
        })?;
    if out.timed_out {
        return Err(Dropout {
            status: Status::Timeout,
            detail: format!(
                "bench `{}` ran past its timeout of {:.0} s; container killed",
                bench.name,
                timeout.as_secs_f64()
            ),
        });
    }
    let (line, shown) = guarded::split_result(&out.output, &nonce);
    let Some(line) = line else {
        let (status, why) = if !sandbox.is_running().await {
            if sandbox.oom_killed().await {
                (Status::Oom, "the container ran out of memory".to_string())
            } else {
                (
                    Status::Error,
                    "the container stopped (removed or killed from outside, or the Docker daemon restarted)"
                        .to_string(),
                )
            }
        } else {
            (
                Status::Error,
                format!(
                    "the in-container timer printed no result (exit {:?}): {}",
                    out.exit_code,
                    last_lines(&shown, 5)
                ),
            )
        };
        return Err(Dropout {
            status,
            detail: format!("bench `{}`: {why}", bench.name),
        });
    };
    serde_json::from_str(line).map_err(|e| Dropout {
        status: Status::Error,
        detail: format!("bench `{}`: unreadable timer result: {e}", bench.name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(wall: f64, cpu: f64, throttled: Option<u64>) -> RunRecord {
        RunRecord {
            round: 1,
            warmup: false,
            variant: "s0".into(),
            bench: "b".into(),
            wall_s: wall,
            value: Some(wall),
            exit_code: 0,
            user_s: cpu,
            sys_s: 0.0,
            max_rss_kb: 0,
            involuntary_switches: 0,
            throttled,
            cpu_probe_ms: None,
            disturbed: None,
            output_digest: None,
            lingering_killed: 0,
            replica: 0,
            gpu: None,
        }
    }

    fn device(index: u32, energy: Option<f64>, reasons: &[&str]) -> crate::telemetry::RunTelemetry {
        crate::telemetry::RunTelemetry {
            device_index: index,
            uuid: format!("GPU-{index}"),
            name: "H100".into(),
            samples: 3,
            duration_s: 0.2,
            gpu_util: None,
            mem_util: None,
            mem_used_bytes: None,
            power_w: None,
            sm_clock_mhz: None,
            mem_clock_mhz: None,
            temperature_c: None,
            energy_j: energy,
            throttled: !reasons.is_empty(),
            throttle_reasons: reasons.iter().map(|r| r.to_string()).collect(),
            incomplete: None,
            notes: Vec::new(),
        }
    }

    fn report(devices: Vec<crate::telemetry::RunTelemetry>) -> crate::telemetry::RunReport {
        crate::telemetry::RunReport {
            tag: RunTag {
                variant: "s0".into(),
                round: 3,
                run: 0,
            },
            duration_s: 0.2,
            devices,
            samples: Vec::new(),
        }
    }

    #[test]
    fn gpu_runs_sum_energy_over_devices_and_flag_throttling() {
        let g = run_gpu(report(vec![
            device(0, Some(40.0), &[]),
            device(1, Some(2.5), &[]),
        ]));
        assert_eq!(g.energy_j, Some(42.5));
        assert!(!g.throttled);
        assert_eq!(gpu_disturbance(&Ok(g)), None);
        // One device without power: the run's energy is unknown, not the other's alone.
        let g = run_gpu(report(vec![
            device(0, Some(40.0), &[]),
            device(1, None, &[]),
        ]));
        assert_eq!(g.energy_j, None);
        let g = run_gpu(report(vec![
            device(0, Some(40.0), &[]),
            device(1, Some(1.0), &["sw_thermal_slowdown"]),
        ]));
        assert!(g.throttled);
        assert_eq!(
            gpu_disturbance(&Ok(g)).as_deref(),
            Some("GPU clocks throttled: GPU 1 (sw_thermal_slowdown)")
        );
        let mut lost = device(0, Some(1.0), &[]);
        lost.incomplete = Some("GPU 0 lost at t=0.1 s".into());
        assert_eq!(
            gpu_disturbance(&Ok(run_gpu(report(vec![lost])))).as_deref(),
            Some("GPU telemetry incomplete: GPU 0 lost at t=0.1 s")
        );
        assert_eq!(
            gpu_disturbance(&Err("the sampler stopped".into())).as_deref(),
            Some("no GPU telemetry for the run: the sampler stopped")
        );
    }

    #[test]
    fn energy_per_round_and_ratios() {
        let with = |variant: &str, round: u32, bench: &str, energy: f64, throttled: bool| {
            let mut r = run(0.1, 0.1, None);
            r.variant = variant.into();
            r.round = round;
            r.bench = bench.into();
            r.gpu = Some(RunGpu {
                energy_j: Some(energy),
                throttled,
                devices: Vec::new(),
            });
            r
        };
        let mut log = BenchLog {
            shared_code_only: Default::default(),
            schema_version: 1,
            instance_id: "t".into(),
            sample_variant: None,
            variants: vec!["base".into(), "human".into(), "s0".into()],
            benches: Vec::new(),
            schedule: Schedule {
                criterion: Criterion::Strict,
                warmup_rounds: 0,
                min_rounds: 1,
                max_rounds: 2,
                max_seconds: 10.0,
                cpuset: None,
                replicas: 1,
            },
            rounds: Vec::new(),
            runs: vec![
                // Per round: every bench's energy adds up.
                with("base", 0, "a", 30.0, false),
                with("base", 0, "b", 10.0, false),
                with("base", 1, "a", 50.0, false),
                with("base", 1, "b", 10.0, false),
                with("human", 0, "a", 10.0, false),
                with("human", 0, "b", 10.0, false),
                with("s0", 0, "a", 20.0, true),
                with("s0", 0, "b", 5.0, false),
            ],
            decided_after: BTreeMap::new(),
            dropped: BTreeMap::new(),
            stop_reason: String::new(),
            seconds: 0.0,
            shared: BTreeMap::from([("s1".to_string(), "human".to_string())]),
            telemetry_lines: Vec::new(),
        };
        assert_eq!(log.energy_per_round("base"), Some(50.0));
        let e = log.energy("s0").unwrap();
        assert_eq!((e.base_j, e.human_j, e.patch_j), (50.0, 20.0, 25.0));
        assert_eq!((e.base_over_patch, e.human_over_patch), (2.0, 0.8));
        assert_eq!(e.throttled_runs, 1);
        // A sample sharing human's tree takes human's energy.
        assert_eq!(log.energy("s1").unwrap().patch_j, 20.0);
        // Without telemetry: no energy at all.
        log.runs[0].gpu = None;
        assert_eq!(log.energy_per_round("base"), None);
        assert!(log.energy("s0").is_none());
    }

    fn task_with(benches: &[(u32, u32, u32)]) -> Task {
        let dir = tempfile::Builder::new().prefix("task").tempdir().unwrap();
        std::fs::create_dir(dir.path().join("repo")).unwrap();
        std::fs::write(dir.path().join("h.patch"), "x").unwrap();
        let mut toml = String::from(
            "[source]\npath='repo'\n[human]\npatch='h.patch'\n[test]\ncommand='true'\n",
        );
        for (i, (w, r, m)) in benches.iter().enumerate() {
            toml.push_str(&format!(
                "[[bench]]\nname='b{i}'\ncommand='true'\nwarmups={w}\nruns={r}\nmax_runs={m}\n"
            ));
        }
        Task::parse(dir.path(), &dir.path().join("task.toml"), &toml).unwrap()
    }

    fn rule(criterion: Criterion) -> DecisionRule {
        DecisionRule {
            criterion,
            thresholds: crate::metrics::Thresholds::default(),
            seed: 0,
            confidence: 0.95,
            resamples: 100,
            estimator: crate::rule::Estimator::Mean,
        }
    }

    #[test]
    fn schedules_from_task_and_command_line() {
        let task = task_with(&[(1, 10, 30), (2, 5, 40)]);
        let none = Budget {
            min_rounds: None,
            max_rounds: None,
            max_seconds: None,
            timeout_scale: 1.0,
            replicas: None,
        };
        let s = schedule(&task, &rule(Criterion::Strict), &none, Some("1".into()));
        // Two warmups in each of the default three containers.
        assert_eq!(s.replicas, DEFAULT_REPLICAS);
        assert_eq!(
            (s.warmup_rounds, s.min_rounds, s.max_rounds),
            (2 * DEFAULT_REPLICAS, 10, 40)
        );
        assert_eq!(s.max_seconds, 900.0);
        assert_eq!(s.cpuset.as_deref(), Some("1"));
        // gso: a fixed number of rounds, as GSO does.
        let g = schedule(&task, &rule(Criterion::Gso), &none, None);
        assert_eq!((g.min_rounds, g.max_rounds), (10, 10));
        // The command line overrides; max is never below min.
        let cli = Budget {
            min_rounds: Some(4),
            max_rounds: Some(2),
            max_seconds: Some(5.0),
            timeout_scale: 1.0,
            replicas: None,
        };
        let c = schedule(&task, &rule(Criterion::Strict), &cli, None);
        assert_eq!((c.min_rounds, c.max_rounds, c.max_seconds), (4, 4, 5.0));
    }

    #[test]
    fn rounds_rotate_and_samples_stop_when_decided() {
        let m = [0, 1, 2];
        assert_eq!(round_order(&m, 0), vec![0, 1, 2]);
        assert_eq!(round_order(&m, 1), vec![1, 2, 0]);
        assert_eq!(round_order(&m, 3), vec![2, 1, 0], "odd n: mirror rows");
        assert_eq!(
            round_order(&m, 6),
            round_order(&m, 0),
            "a cycle of 2n rounds"
        );
        assert!(round_order::<u8>(&[], 4).is_empty());
        // Over one cycle, for every n: each variant in each position equally often, and
        // each ordered pair adjacent equally often (no variant always follows the same one).
        for n in 1..=8usize {
            let members: Vec<usize> = (0..n).collect();
            let cycle = if n % 2 == 0 { n } else { 2 * n };
            let mut position = vec![vec![0; n]; n];
            let mut follows = vec![vec![0; n]; n];
            for r in 0..cycle {
                let row = round_order(&members, r as u32);
                let mut sorted = row.clone();
                sorted.sort();
                assert_eq!(sorted, members, "n={n}: a permutation");
                for (p, &v) in row.iter().enumerate() {
                    position[v][p] += 1;
                }
                for w in row.windows(2) {
                    follows[w[0]][w[1]] += 1;
                }
            }
            let per_position = cycle / n;
            assert!(
                position.iter().flatten().all(|&c| c == per_position),
                "n={n}"
            );
            if n > 1 {
                let per_pair = cycle * (n - 1) / (n * (n - 1));
                for (a, row) in follows.iter().enumerate() {
                    for (b, &c) in row.iter().enumerate() {
                        assert_eq!(c, if a == b { 0 } else { per_pair }, "n={n} {a}->{b}");
                    }
                }
            }
        }
        let strict = Schedule {
            criterion: Criterion::Strict,
            warmup_rounds: 1,
            min_rounds: 10,
            max_rounds: 30,
            max_seconds: 60.0,
            cpuset: None,
            replicas: 1,
        };
        assert!(
            !sample_finished(&strict, 9, true),
            "below the minimum, even if decided"
        );
        assert!(sample_finished(&strict, 10, true));
        assert!(
            !sample_finished(&strict, 10, false),
            "undecided: more rounds"
        );
        assert!(
            sample_finished(&strict, 30, false),
            "budget spent: inconclusive"
        );
        let gso = Schedule {
            criterion: Criterion::Gso,
            max_rounds: 10,
            ..strict
        };
        assert!(sample_finished(&gso, 10, false));
        assert!(!sample_finished(&gso, 9, true));
    }

    #[test]
    fn values_from_output() {
        let re = regex::Regex::new(r"Execution time: ([0-9.eE+-]+)s").unwrap();
        let p = Metric::Pattern(re);
        assert_eq!(
            extract_value(
                &p,
                9.0,
                "x\nExecution time: 1.5s\nExecution time: 2.5s\n",
                ""
            ),
            Some(2.5)
        );
        assert_eq!(extract_value(&p, 9.0, "nothing", ""), None);
        let j = Metric::JsonKey("secs".into());
        assert_eq!(
            extract_value(&j, 9.0, "{\"secs\": 0.25}\nbye\n", ""),
            Some(0.25)
        );
        assert_eq!(extract_value(&Metric::Wall, 0.5, "", ""), Some(0.5));
        assert_eq!(extract_value(&Metric::Wall, 0.0, "", ""), None);
    }

    #[test]
    fn known_disturbances() {
        let normal: Vec<RunRecord> = (0..4).map(|_| run(0.5, 0.49, Some(0))).collect();
        let h: Vec<&RunRecord> = normal.iter().collect();
        assert_eq!(disturbance(&run(0.5, 0.49, Some(0)), &h), None);
        // Throttled by the CPU quota: always a disturbance.
        assert!(
            disturbance(&run(0.5, 0.49, Some(3)), &h)
                .unwrap()
                .contains("throttled")
        );
        // Off-CPU for 40% of a run that is usually 98% on-CPU.
        assert!(
            disturbance(&run(0.8, 0.48, None), &h)
                .unwrap()
                .contains("descheduled")
        );
        // Slower but on-CPU all along, probes unknown: not a known event.
        assert_eq!(disturbance(&run(0.8, 0.79, None), &h), None);
        // A bench that sleeps or waits on I/O is never judged by its CPU share.
        let sleepy: Vec<RunRecord> = (0..4).map(|_| run(0.5, 0.05, None)).collect();
        let hs: Vec<&RunRecord> = sleepy.iter().collect();
        assert_eq!(disturbance(&run(0.5, 0.01, None), &hs), None);
        // Too little history to judge.
        assert_eq!(disturbance(&run(0.8, 0.3, None), &h[..2]), None);
        // The CPU changed speed during the run: disturbed. Within 30%: fine.
        let probed = |before, after| RunRecord {
            cpu_probe_ms: Some([before, after]),
            ..run(0.8, 0.79, Some(0))
        };
        assert!(
            disturbance(&probed(1.2, 2.4), &h)
                .unwrap()
                .contains("speed changed")
        );
        assert!(disturbance(&probed(2.4, 1.2), &h).is_some());
        assert_eq!(disturbance(&probed(1.3, 1.1), &h), None);
        assert_eq!(
            disturbance(&probed(2.4, 2.4), &h),
            None,
            "slow all along is judged by its round"
        );
    }

    #[test]
    fn runs_at_another_speed_than_their_round_are_flagged() {
        let with = |v: &str, p: f64| RunRecord {
            variant: v.into(),
            cpu_probe_ms: Some([p, p]),
            ..run(0.5, 0.5, None)
        };
        // Base ran while the CPU was at half speed; human and the sample did not.
        let mut round = vec![with("base", 2.4), with("human", 1.2), with("s0", 1.25)];
        flag_round(&mut round);
        assert!(
            round[0]
                .disturbed
                .as_deref()
                .unwrap()
                .contains("off the rest of its round")
        );
        assert!(round[1].disturbed.is_none() && round[2].disturbed.is_none());
        // All at half speed: comparable, nothing flagged.
        let mut slow = vec![with("base", 2.4), with("human", 2.3), with("s0", 2.5)];
        flag_round(&mut slow);
        assert!(slow.iter().all(|r| r.disturbed.is_none()));
        // Warmups are left alone, and too few probes say nothing.
        let mut warm = vec![
            RunRecord {
                warmup: true,
                ..with("base", 9.0)
            },
            with("human", 1.2),
            with("s0", 1.2),
        ];
        flag_round(&mut warm);
        assert!(warm.iter().all(|r| r.disturbed.is_none()));
    }
}
