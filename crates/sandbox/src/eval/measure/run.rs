//! One timed run of one bench in one container, through the in-container timer
//! (`container/programs/timed_run.py`), and the figure it gives.

use std::time::Duration;

use serde::Deserialize;

use super::Dropout;
use crate::docker::container::Sandbox;
use crate::eval::guarded::{self, Snapshot};
use harness_core::status::Status;
use harness_core::task::{Bench, Metric, OutputCheck};

/// The timer's result (`container/programs/timed_run.py`, timed mode): every field of the
/// contract (`container/programs/timer_result.schema.json`), each there in every result (null
/// or empty where it has no value), none other ([`parse_result`] checks the line first).
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields)]
pub(super) struct TimerResult {
    /// CLOCK_MONOTONIC at the go and at the reaping of the reported repetition.
    #[allow(dead_code)]
    pub(super) start_ns: u64,
    #[allow(dead_code)]
    pub(super) end_ns: u64,
    pub(super) wall_ns: u64,
    pub(super) exit_code: i64,
    /// The command was exec'd directly, not through /bin/sh.
    #[allow(dead_code)]
    pub(super) direct_exec: bool,
    pub(super) user_s: f64,
    pub(super) sys_s: f64,
    pub(super) max_rss_kb: u64,
    #[allow(dead_code)]
    pub(super) voluntary_switches: u64,
    pub(super) involuntary_switches: u64,
    pub(super) throttled: Option<u64>,
    pub(super) cpu_probe_ms: Option<[f64; 2]>,
    #[allow(dead_code)]
    pub(super) stdout_bytes: u64,
    #[allow(dead_code)]
    pub(super) stderr_bytes: u64,
    pub(super) stdout_tail: String,
    pub(super) stderr_tail: String,
    pub(super) output_flood: bool,
    pub(super) output_limit: u64,
    pub(super) output_digest: Option<String>,
    /// The lines the digest counts.
    #[allow(dead_code)]
    pub(super) output_lines: u64,
    pub(super) lingering_killed: u64,
    /// What the reported repetition wrote in its sandbox's layer, and whether it filled it.
    #[allow(dead_code)]
    pub(super) layer_bytes: u64,
    #[allow(dead_code)]
    pub(super) layer_full: bool,
    #[allow(dead_code)]
    pub(super) sandbox_setup_ns: Option<u64>,
    /// The output metric, as the timer found it in the whole output.
    pub(super) metric: Option<ReportedMetric>,
    /// Every timed repetition of the exec, in order (the top-level figures are the fastest's).
    pub(super) reps: Vec<Repetition>,
    pub(super) reps_digests_differ: bool,
    /// Processes of the sandbox user killed before the runs, those that could not be, and
    /// bytecode planted beside protected modules, removed.
    #[allow(dead_code)]
    pub(super) leftovers_killed: u64,
    #[allow(dead_code)]
    pub(super) leftover_survivors: u64,
    #[allow(dead_code)]
    pub(super) planted_bytecode_removed: Vec<String>,
    pub(super) oom_kills: Option<u64>,
    /// Threads of the sandbox user still running after the run, despite every kill.
    pub(super) survivors: u64,
    pub(super) changes: Snapshot,
    pub(super) disk_limit: i64,
    /// The most a repetition wrote (bytes).
    pub(super) disk_used: Option<i64>,
    pub(super) disk_exceeded: bool,
    /// Under the simulated criterion: the simulator's counts.
    pub(super) simulated: Option<SimulatedCost>,
    pub(super) ignore_errors: Vec<String>,
    /// The timer's own failure (the run's sandbox could not be made): not the code's.
    pub(super) harness_error: Option<String>,
}

impl TimerResult {
    /// The limits the run kept or broke, as every guarded run reports them.
    pub(super) fn limits(&self) -> guarded::RunLimits {
        guarded::RunLimits {
            survivors: self.survivors,
            disk_exceeded: self.disk_exceeded,
            disk_used: self.disk_used,
            disk_limit: self.disk_limit,
            // A timed run's sandbox is gone with it: nothing is carried over.
            carried_over: Vec::new(),
        }
    }
}

/// The timer's result line read strictly: JSON, checked against the contract (an unknown,
/// missing or mistyped field is an error naming it), then read.
pub(super) fn parse_result(
    line: &str,
    redact: &dyn Fn(&str) -> String,
) -> Result<TimerResult, String> {
    let mut value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    crate::eval::contract::check(&value)?;
    crate::eval::contract::redact_values(&mut value, redact);
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// One timed repetition of a bench within an exec.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields)]
pub(super) struct Repetition {
    pub(super) wall_ns: u64,
    #[allow(dead_code)]
    pub(super) user_s: f64,
    #[allow(dead_code)]
    pub(super) sys_s: f64,
    pub(super) metric: Option<ReportedMetric>,
    #[allow(dead_code)]
    pub(super) output_digest: String,
}

/// An exec's figure from its repetitions, and every repetition's figure. Each repetition
/// answered a question of its own (its seed): the figure is the best of them (the fastest
/// wall time, the best printed figure in the bench's direction), a figure the machine's
/// noise can only make worse. When every repetition printed the same answer, the bench's
/// answer does not show it was computed for that seed (a later repetition may have read an
/// earlier one's answer back from what the kernel kept): the figure is their mean, never
/// the best. A repetition without a figure makes the exec's figure that repetition's error:
/// the bench must print it each time.
pub(super) fn exec_figure(bench: &Bench, result: &TimerResult) -> (Result<f64, String>, Vec<f64>) {
    if result.reps.is_empty() {
        let wall_s = result.wall_ns as f64 / 1e9;
        return (
            run_value(&bench.metric, wall_s, result.metric.as_ref()),
            Vec::new(),
        );
    }
    let mut figures = Vec::new();
    for rep in &result.reps {
        match run_value(&bench.metric, rep.wall_ns as f64 / 1e9, rep.metric.as_ref()) {
            Ok(v) => figures.push(v),
            Err(e) => return (Err(e), figures),
        }
    }
    if figures.len() > 1 && !result.reps_digests_differ {
        let mean = figures.iter().sum::<f64>() / figures.len() as f64;
        return (Ok(mean), figures);
    }
    let best = match bench.better {
        harness_core::task::Better::Lower => figures.iter().copied().fold(f64::INFINITY, f64::min),
        harness_core::task::Better::Higher => figures.iter().copied().fold(0.0, f64::max),
    };
    (Ok(best), figures)
}

/// Cachegrind's counts of one bench run, summed over its processes, and the estimated
/// cycles made of them (see container/programs/timed_run.py), or why there are none: every
/// field may be missing.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields)]
pub struct SimulatedCost {
    #[serde(default)]
    pub cycles: Option<f64>,
    #[serde(default)]
    pub error: Option<String>,
    /// The task image has no simulator: not the code's fault.
    #[serde(default)]
    pub unavailable: bool,
    /// The processes counted, and their summed counts: instructions, data accesses and
    /// their first- and last-level misses.
    #[serde(default)]
    #[allow(dead_code)]
    pub processes: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub ir: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub i1: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub lli: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub dr: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub d1: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub lld: Option<u64>,
}

impl SimulatedCost {
    /// The figure: estimated cycles, or why there is none.
    pub fn figure(&self) -> Result<f64, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.cycles
            .filter(|c| c.is_finite() && *c > 0.0)
            .ok_or_else(|| "the simulator gave no count".to_string())
    }
}

/// An output metric as the in-container timer read it: its value when it was printed
/// exactly once, and how many times it was printed.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields)]
pub struct ReportedMetric {
    pub value: Option<f64>,
    pub printed: u64,
}

/// The compared figure of a run: its wall time, or an output metric the timer found printed
/// exactly once in the whole output (stdout and stderr). A figure printed twice is refused,
/// not picked from: a patch could otherwise print its own after the bench's (from an exit
/// handler, say) and have it taken.
pub fn run_value(
    metric: &Metric,
    wall_s: f64,
    reported: Option<&ReportedMetric>,
) -> Result<f64, String> {
    let value = match metric {
        Metric::Wall => Some(wall_s),
        Metric::Pattern(_) | Metric::JsonKey(_) => match reported {
            None => None,
            Some(r) if r.printed > 1 => {
                return Err(format!(
                    "printed the figure for {} {} times; it must be printed exactly once per run",
                    metric.describe(),
                    r.printed
                ));
            }
            Some(r) => r.value,
        },
    };
    value
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("printed no figure for {}", metric.describe()))
}

/// Why a bench run broke a limit: its output flooded, it wrote past the disk limit, or it
/// left threads that could not be stopped.
pub(super) fn result_limits(result: &TimerResult, bench: &str) -> Option<String> {
    if result.output_flood {
        return Some(format!(
            "bench `{bench}` printed more than {} MiB of output; stopped",
            result.output_limit >> 20
        ));
    }
    result.limits().broken(&format!("bench `{bench}`"))
}

/// The simulator's limit for a bench: it runs many times slower than the bench itself (16
/// to 41 times on the shipped examples here, 39 to 87 times on `tasks/_real`, more than 43
/// times on a pyparsing release pair whose count once ran past a fixed 125 s), so its limit
/// follows the bench's own time on this machine: `SIM_SLOWDOWN_BOUND` times the native run,
/// plus the bench's configured timeout for the simulator's own start.
pub(super) fn simulator_limit(bench: &Bench, timeout_scale: f64, native_s: f64) -> Duration {
    bench.timeout.mul_f64(timeout_scale)
        + Duration::from_secs_f64(native_s.max(0.0) * SIM_SLOWDOWN_BOUND)
        + Duration::from_secs(5)
}

/// How many times slower than the bench the simulator may be before a count is given up:
/// more than twice the largest slowdown seen here.
pub(super) const SIM_SLOWDOWN_BOUND: f64 = 200.0;

/// A fresh random seed for a round.
pub(super) fn round_seed() -> u64 {
    u64::from_str_radix(&guarded::nonce()[..16], 16).unwrap_or(0)
}

/// A round's seeds, one per timed repetition, drawn now (after every variant's code is
/// frozen): the variants of the round share them (they are paired), no repetition shares
/// one with another.
pub(super) fn round_seeds(repetitions: u32) -> Vec<u64> {
    (0..repetitions.max(1)).map(|_| round_seed()).collect()
}

pub(super) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// How one exec of a bench runs: under the simulator or timed, how many repetitions, and a
/// time limit other than the bench's own.
#[derive(Debug, Clone, Copy)]
pub(super) struct ExecPlan {
    pub(super) simulate: bool,
    pub(super) repetitions: u32,
    pub(super) limit: Option<Duration>,
}

impl ExecPlan {
    pub(super) fn timed(repetitions: u32) -> ExecPlan {
        ExecPlan {
            simulate: false,
            repetitions,
            limit: None,
        }
    }
}

/// The timer's options for the bench's output check.
fn output_check_args(bench: &Bench) -> Vec<String> {
    let mut args = Vec::new();
    match &bench.output_check {
        OutputCheck::Stdout { ignore } => {
            for p in ignore {
                args.push("--ignore".into());
                args.push(p.clone());
            }
        }
        OutputCheck::File { path, equivalence } => {
            args.push("--output-file".into());
            args.push(path.clone());
            if equivalence.is_some() {
                // Each repetition's file is kept (the warden's, by its digest) for the
                // equivalence check after the round.
                args.push("--keep-output".into());
                args.push(bench.name.clone());
            }
        }
        OutputCheck::Off { .. } => {}
    }
    args
}

pub(super) async fn run_once(
    sandbox: &Sandbox,
    bench: &Bench,
    timeout_scale: f64,
    seeds: &[u64],
    output_limit: i64,
    plan: ExecPlan,
) -> Result<TimerResult, Dropout> {
    let ExecPlan {
        simulate,
        repetitions,
        limit,
    } = plan;
    let timeout = limit.unwrap_or_else(|| {
        bench
            .timeout
            .mul_f64(timeout_scale * repetitions.max(1) as f64)
            + Duration::from_secs(5)
    });
    let mut args: Vec<String> = vec![
        "timed".into(),
        "--out-dir".into(),
        crate::docker::spec::BENCH_OUTPUT_DIR.into(),
    ];
    args.extend(output_check_args(bench));
    match &bench.metric {
        Metric::Wall => {}
        Metric::Pattern(re) => {
            args.push("--metric-pattern".into());
            args.push(re.as_str().to_string());
        }
        Metric::JsonKey(k) => {
            args.push("--metric-json-key".into());
            args.push(k.clone());
        }
    }
    args.push("--output-limit".into());
    args.push(output_limit.to_string());
    if simulate {
        args.push("--simulate".into());
        args.push("yes".into());
    }
    args.push("--repetitions".into());
    args.push(repetitions.max(1).to_string());
    args.push("--".into());
    args.push(bench.command.clone());
    let nonce = guarded::nonce();
    // The result line is read before the secrets are taken out of it (see
    // contract::redact_values); the rest of the output is redacted whole.
    let out = sandbox
        .exec_as_unredacted(
            &guarded::python(guarded::TIMER_PATH, &args),
            crate::protect::ROOT,
            &[
                format!("HARNESS_NONCE={nonce}"),
                // Each repetition's seed, revealed to the bench only as its repetition
                // starts (the timer's environment is not the code's to read).
                format!("HARNESS_BENCH_SEED={}", seeds.first().copied().unwrap_or(0)),
                format!(
                    "HARNESS_BENCH_SEEDS={}",
                    seeds
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ),
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
    let shown = sandbox.redact(&shown);
    let Some(line) = line else {
        let what = format!("bench `{}`", bench.name);
        let (status, detail) =
            guarded::no_result(sandbox, &what, Status::TestFailed, out.exit_code, &shown).await;
        return Err(Dropout { status, detail });
    };
    let result = parse_result(line, &|s| sandbox.redact(s)).map_err(|e| Dropout {
        status: Status::Error,
        detail: format!("bench `{}`: unreadable timer result: {e}", bench.name),
    })?;
    if let Some(e) = &result.harness_error {
        return Err(Dropout {
            status: Status::Error,
            detail: format!("bench `{}`: {e}", bench.name),
        });
    }
    Ok(result)
}
