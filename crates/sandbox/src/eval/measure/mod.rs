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

mod budget;
mod plan;
pub use budget::GROW_STEP;
pub use plan::{max_replicas, measure_plan, replicas, schedule};
mod checks;
mod disturb;
mod equivalence;
mod run;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::docker::container::Sandbox;
use crate::eval::guarded::{self, Snapshot};
use crate::events::{Events, emit};
pub use disturb::{PROBE_TOLERANCE, disturbance, flag_round};
use harness_core::allocation::{self, Needs};
use harness_core::criterion::Figure;
use harness_core::events::Event;
use harness_core::rule::DecisionRule;
use harness_core::status::Status;
use harness_core::task::{Bench, Task};
pub use harness_core::timings::{BenchLog, BenchSetting, RoundRecord, RunGpu, RunRecord, Schedule};
use harness_core::verdict::judge;
use harness_telemetry::RunTag;
use run::ExecPlan;
pub use run::{ReportedMetric, run_value};

/// One variant taking part in a measurement.
pub struct Participant<'a> {
    pub label: String,
    /// Its containers: round r runs in the (r mod n)-th.
    pub sandboxes: Vec<&'a Sandbox>,
    /// Its watched files right after its patch (see `guarded`).
    pub manifest: Snapshot,
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

pub use harness_core::settings::Budget;

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

/// Whether a sample needs no more rounds, by its criterion's rule.
pub fn sample_finished(schedule: &Schedule, paired_rounds: u32, decided: bool) -> bool {
    let rounds = (schedule.min_rounds, schedule.max_rounds);
    schedule.criterion.finished(rounds, paired_rounds, decided)
}

/// What a measurement is of: the task, its variants (with their containers), the samples
/// that take another variant's timings, and how it is judged and spent.
pub struct MeasureInput<'a> {
    pub task: &'a Task,
    pub variants: &'a [Participant<'a>],
    /// sample → the variant whose timings it takes.
    pub shared: &'a BTreeMap<String, String>,
    pub rule: &'a DecisionRule,
    pub schedule: Schedule,
    pub timeout_scale: f64,
    pub events: &'a Events,
    pub telemetry: Option<&'a harness_telemetry::Sampler>,
    /// Held shared while a round is timed ([`super::EvalContext::timing_gate`]).
    pub timing_gate: &'a tokio::sync::RwLock<()>,
}

/// Measures the variants of a task: labels "base" and "human" are the references, every
/// other label a sample. A sample whose bench fails or times out leaves the measurement
/// with a status; the others go on.
/// Where a measurement ended: finished, or paused because the open samples would be decided
/// sooner in more containers than in more rounds (the caller adds them to the variants
/// named and resumes with the progress).
pub enum Measured {
    Done(MeasureOutcome),
    MoreContainers {
        progress: Progress,
        labels: Vec<String>,
    },
}

pub async fn measure(input: MeasureInput<'_>, resume: Option<Progress>) -> Measured {
    let mut m = match resume {
        Some(p) => Measurement { input, p },
        None => Measurement::new(input),
    };
    let stop_reason = loop {
        let left = m.samples_left();
        m.follow_shared();
        if let Some(reason) = m.stop(&left) {
            break reason;
        }
        if let Some(labels) = m.wants_containers(&left) {
            return Measured::MoreContainers {
                progress: m.p,
                labels,
            };
        }
        m.run_round(&left).await;
    };
    Measured::Done(m.finish(stop_reason))
}

fn is_reference(label: &str) -> bool {
    label == "base" || label == "human"
}

/// A measurement under way: its log so far and who is still in.
struct Measurement<'a> {
    input: MeasureInput<'a>,
    p: Progress,
}

/// How far a measurement has got: what it carries over when it pauses for more containers.
pub struct Progress {
    started: Instant,
    deadline: Instant,
    log: BenchLog,
    dropouts: BTreeMap<String, Dropout>,
    /// label → why it needs no more rounds.
    done: BTreeMap<String, String>,
    /// label → the references an open sample still needs (absent: not judged yet).
    needs: BTreeMap<String, Needs>,
    /// A run did not fit before the deadline: the measurement stops after this round.
    out_of_time: bool,
    /// New watched files base's runs made: a sample making the same ones is normal.
    base_created: BTreeSet<String>,
    round: u32,
}

/// What one round gathered for its checks.
#[derive(Default)]
struct RoundData {
    changes: BTreeMap<String, Snapshot>,
    tails: BTreeMap<(String, String), String>,
}

impl<'a> Measurement<'a> {
    fn new(input: MeasureInput<'a>) -> Measurement<'a> {
        let started = Instant::now();
        let task = input.task;
        let benches: Vec<BenchSetting> = task
            .benches
            .iter()
            .map(|b| BenchSetting {
                name: b.name.clone(),
                command: b.command.clone(),
                warmups: b.warmups,
                runs: b.runs,
                max_runs: b.max_runs,
                metric: if input.rule.criterion.figure() == Figure::SimulatedCycles {
                    "simulated (estimated cycles)".into()
                } else {
                    b.metric.describe()
                },
                better: if input.rule.criterion.figure() == Figure::SimulatedCycles {
                    harness_core::task::Better::Lower
                } else {
                    b.better
                },
                timeout_s: b.timeout.as_secs_f64() * input.timeout_scale,
                output_check: b.output_check.describe(),
            })
            .collect();
        let log = BenchLog {
            shared_code_only: Default::default(),
            schema_version: harness_core::records::SCHEMA_VERSION,
            instance_id: task.id.clone(),
            sample_variant: None,
            variants: input.variants.iter().map(|p| p.label.clone()).collect(),
            benches,
            schedule: input.schedule.clone(),
            rounds: Vec::new(),
            runs: Vec::new(),
            decided_after: BTreeMap::new(),
            stopped_undecided: BTreeMap::new(),
            dropped: BTreeMap::new(),
            stop_reason: String::new(),
            seconds: 0.0,
            shared: input.shared.clone(),
            telemetry_lines: Vec::new(),
            warnings: Vec::new(),
            equivalence: Vec::new(),
        };
        let deadline = started + Duration::from_secs_f64(input.schedule.max_seconds.max(1.0));
        Measurement {
            input,
            p: Progress {
                started,
                deadline,
                log,
                dropouts: BTreeMap::new(),
                done: BTreeMap::new(),
                needs: BTreeMap::new(),
                out_of_time: false,
                base_created: BTreeSet::new(),
                round: 0,
            },
        }
    }

    /// Samples measured on their own that are neither out nor finished.
    fn samples_left(&self) -> Vec<usize> {
        let variants = self.input.variants;
        (0..variants.len())
            .filter(|&i| {
                let l = &variants[i].label;
                !is_reference(l) && !self.p.dropouts.contains_key(l) && !self.p.done.contains_key(l)
            })
            .collect()
    }

    /// Samples sharing another variant's timings follow it: out with it, decided with it
    /// (their judgement reads its runs); one sharing human's needs base and human.
    fn follow_shared(&mut self) {
        for (label, source) in self.input.shared {
            if let Some(d) = self.p.dropouts.get(source).cloned()
                && !self.p.dropouts.contains_key(label)
            {
                self.p.dropouts.insert(
                    label.clone(),
                    Dropout {
                        status: d.status,
                        detail: format!("its tree is identical to {source}'s: {}", d.detail),
                    },
                );
            }
        }
    }

    /// Why the measurement stops now, if it does.
    fn stop(&self, left: &[usize]) -> Option<String> {
        let schedule = &self.input.schedule;
        let shared_left = self
            .input
            .shared
            .keys()
            .filter(|l| !self.p.dropouts.contains_key(*l) && !self.p.done.contains_key(*l))
            .count();
        if left.is_empty() && shared_left == 0 {
            return Some("every sample decided or out".to_string());
        }
        if ["base", "human"]
            .iter()
            .any(|r| self.p.dropouts.contains_key(*r))
        {
            return Some("a reference variant failed".to_string());
        }
        if self.p.round >= schedule.warmup_rounds + schedule.max_rounds {
            return Some(format!("round budget spent ({} rounds)", self.p.round));
        }
        if self.p.round > 0 && (self.p.out_of_time || Instant::now() >= self.p.deadline) {
            return Some(format!("time budget spent ({:.0} s)", schedule.max_seconds));
        }
        None
    }

    /// One round: every bench once for base, human and the samples still in, in the
    /// round's order, then the round's checks and who is finished.
    async fn run_round(&mut self, left: &[usize]) {
        let (task, variants, schedule) =
            (self.input.task, self.input.variants, &self.input.schedule);
        emit(
            self.input.events,
            Event::Round {
                instance: task.id.clone(),
                round: self.p.round + 1,
                rounds: schedule.warmup_rounds + schedule.max_rounds,
            },
        );
        let members = self.members(left);
        let order = round_order(&members, self.p.round);
        // Drawn now, after every variant's code is frozen, under every criterion (the
        // simulated one too: a seed computed from the task could be answered at install).
        // A bench's seeds are its own: the benches of a round run in the same containers.
        let bench_seeds: Vec<Vec<u64>> = task
            .benches
            .iter()
            .map(|_| run::round_seeds(schedule.repetitions))
            .collect();
        let seeds = bench_seeds.first().cloned().unwrap_or_default();
        self.p.log.rounds.push(RoundRecord {
            round: self.p.round,
            order: order.iter().map(|&i| variants[i].label.clone()).collect(),
            seed: seeds.first().copied(),
            seeds,
            bench_seeds: bench_seeds.clone(),
        });
        let mut data = RoundData::default();
        let simulated = schedule.criterion.figure() == Figure::SimulatedCycles;
        // No image build of this run beside a timed round (a count does not care).
        let _no_build = if simulated {
            None
        } else {
            Some(self.input.timing_gate.read().await)
        };
        if simulated {
            self.count_round(&order, &bench_seeds, &mut data).await;
        }
        'round: for (bench_index, bench) in task.benches.iter().enumerate() {
            if simulated {
                break;
            }
            for &i in &order {
                if self.p.round > 0 && !self.fits(&variants[i].label, &bench.name) {
                    self.p.out_of_time = true;
                    break 'round;
                }
                if !self.p.dropouts.contains_key(&variants[i].label) {
                    let seeds = &bench_seeds[bench_index];
                    self.run_variant(&variants[i], bench_index, bench, seeds, &mut data)
                        .await;
                }
            }
        }
        equivalence::judge_round(
            task,
            variants,
            &mut self.p.log,
            self.p.round,
            &self.p.dropouts,
        )
        .await;
        checks::check_round(
            task,
            variants,
            &self.p.log,
            self.p.round,
            &bench_seeds,
            &data.changes,
            &data.tails,
            &mut self.p.base_created,
            &mut self.p.dropouts,
        );
        let first_of_round = self
            .p
            .log
            .runs
            .iter()
            .position(|r| r.round == self.p.round)
            .unwrap_or(self.p.log.runs.len());
        flag_round(&mut self.p.log.runs[first_of_round..]);
        self.p.round += 1;
        self.mark_finished(left);
    }

    /// A simulated round: every variant's count at once, on whatever cores are free (a count
    /// does not depend on what else runs, so nothing is gained by taking turns).
    async fn count_round(&mut self, order: &[usize], seeds: &[Vec<u64>], data: &mut RoundData) {
        let variants = self.input.variants;
        let (task, scale) = (self.input.task, self.input.timeout_scale);
        let output_limit = task.resources.bench_output_limit();
        for (bench, bench_seeds) in task.benches.iter().zip(seeds) {
            let seed = bench_seeds.first().copied().unwrap_or(0);
            // The native run answers a question of its own: with the count's seed, it could
            // leave the counted run its answer (a patch did, through which pages of its own
            // file were cached: 44x under the count, keeping base's algorithm).
            let native_seed = run::round_seeds(1)[0];
            let live: Vec<(usize, &Sandbox)> = order
                .iter()
                .filter(|&&i| !self.p.dropouts.contains_key(&variants[i].label))
                .filter_map(|&i| variants[i].sandboxes.first().map(|sb| (i, *sb)))
                .collect();
            // One native run first: the simulator's limit follows the bench's own time here,
            // and a bench that fails or runs past its timeout natively is the code's doing.
            let natives = live.iter().map(|&(i, sandbox)| async move {
                let ran = run::run_once(
                    sandbox,
                    bench,
                    scale,
                    &[native_seed],
                    output_limit,
                    ExecPlan::timed(1),
                )
                .await;
                (i, ran)
            });
            let mut native_s = BTreeMap::new();
            for (i, ran) in futures::future::join_all(natives).await {
                match ran {
                    Ok(r) if r.exit_code == 0 => {
                        native_s.insert(i, r.wall_ns as f64 / 1e9);
                    }
                    Ok(_) => {} // the count's own run says how it fails
                    Err(d) => {
                        self.p.dropouts.insert(variants[i].label.clone(), d);
                    }
                }
            }
            let runs = live
                .iter()
                .filter(|(i, _)| !self.p.dropouts.contains_key(&variants[*i].label))
                .map(|&(i, sandbox)| {
                    let native = native_s.get(&i).copied();
                    let limit = native.map(|n| run::simulator_limit(bench, scale, n));
                    async move {
                        let started = Instant::now();
                        let plan = ExecPlan {
                            simulate: true,
                            repetitions: 1,
                            limit,
                        };
                        let ran =
                            run::run_once(sandbox, bench, scale, &[seed], output_limit, plan).await;
                        (i, ran, started.elapsed().as_secs_f64(), native, limit)
                    }
                });
            for (i, ran, secs, native, limit) in futures::future::join_all(runs).await {
                let label = variants[i].label.clone();
                match ran {
                    Ok(result) => {
                        self.record(&label, bench, 0, (result, secs), None, data);
                        if let Some(last) =
                            self.p.log.runs.last_mut().filter(|r| r.variant == label)
                        {
                            last.native_s = native;
                        }
                    }
                    Err(mut d) => {
                        if let (Status::Timeout, Some(n), Some(l)) = (d.status, native, limit) {
                            d.detail = format!(
                                "bench `{}` under the simulator ran past its limit of {:.0} s, \
                                 which allows {:.0} times its native {:.2} s on this machine: \
                                 the simulator, not the code, is too slow for this bench \
                                 (raise --timeout-scale)",
                                bench.name,
                                l.as_secs_f64(),
                                run::SIM_SLOWDOWN_BOUND,
                                n
                            );
                        }
                        self.p.dropouts.insert(label, d);
                    }
                }
            }
        }
    }

    /// One run of one bench in the variant's container of this round, with its telemetry.
    async fn run_variant(
        &mut self,
        p: &Participant<'_>,
        bench_index: usize,
        bench: &Bench,
        seeds: &[u64],
        data: &mut RoundData,
    ) {
        let replica = self.replica_for(p);
        let Some(sandbox) = p.sandboxes.get(replica) else {
            return;
        };
        let telemetry = self.input.telemetry;
        let watching = match telemetry {
            Some(sampler) => Some(
                sampler
                    .start_run(RunTag {
                        variant: p.label.clone(),
                        round: self.p.round,
                        run: bench_index as u32,
                    })
                    .await
                    .map_err(|e| e.to_string()),
            ),
            None => None,
        };
        let output_limit = self.input.task.resources.bench_output_limit();
        let simulate = self.input.rule.criterion.figure() == Figure::SimulatedCycles;
        let exec_started = Instant::now();
        // A warmup's figure is discarded: one repetition warms the container as well as three.
        let warmup = self.p.round < self.input.schedule.warmup_rounds;
        let repetitions = if warmup {
            1
        } else {
            self.input.schedule.repetitions
        };
        let ran = run::run_once(
            sandbox,
            bench,
            self.input.timeout_scale,
            &seeds[..(repetitions.max(1) as usize).min(seeds.len())],
            output_limit,
            ExecPlan {
                simulate,
                repetitions,
                limit: None,
            },
        )
        .await;
        let exec_s = exec_started.elapsed().as_secs_f64();
        let gpu = match (telemetry, watching) {
            (Some(sampler), Some(Ok(()))) => Some(
                sampler
                    .end_run()
                    .await
                    .map(|report| {
                        self.p.log.telemetry_lines.extend(report.jsonl_lines());
                        disturb::run_gpu(report)
                    })
                    .map_err(|e| e.to_string()),
            ),
            (_, Some(Err(e))) => Some(Err(e)),
            _ => None,
        };
        match ran {
            Ok(result) => self.record(&p.label, bench, replica, (result, exec_s), gpu, data),
            Err(d) => {
                self.p.dropouts.insert(p.label.clone(), d);
            }
        }
    }

    /// A run's record in the log, and the dropout it earns, if any.
    fn record(
        &mut self,
        label: &str,
        bench: &Bench,
        replica: usize,
        (result, exec_s): (run::TimerResult, f64),
        gpu: Option<Result<RunGpu, String>>,
        data: &mut RoundData,
    ) {
        let round = self.p.round;
        let warmup = round < self.input.schedule.warmup_rounds;
        let wall_s = result.wall_ns as f64 / 1e9;
        let (figure, reps) = match &result.simulated {
            Some(cost) => (cost.figure(), Vec::new()),
            None => run::exec_figure(bench, &result),
        };
        let value = figure.as_ref().ok().copied();
        let mut record = RunRecord {
            round,
            warmup,
            variant: label.to_string(),
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
            // Each run has a sandbox of its own: nothing an earlier one left is removed
            // before it (the timer reports no such count; this always read 0).
            leftovers_removed: 0,
            replica: replica as u32,
            gpu: gpu.as_ref().and_then(|g| g.as_ref().ok()).cloned(),
            reps,
            exec_s: Some(exec_s),
            native_s: None,
            rep_digests: equivalence::rep_digests(bench, &result.reps),
        };
        if result.exit_code == 0 && value.is_some() && !warmup {
            let history: Vec<&RunRecord> = self
                .p
                .log
                .runs
                .iter()
                .filter(|r| r.variant == label && r.bench == bench.name && !r.warmup)
                .collect();
            record.disturbed = disturbance(&record, &history);
            // What the GPUs say comes first: a throttled GPU, or telemetry missing for
            // the run, is never passed over silently.
            if let Some(why) = gpu.as_ref().and_then(disturb::gpu_disturbance) {
                record.disturbed = Some(why);
            }
        }
        self.p.log.runs.push(record);
        data.tails.insert(
            (label.to_string(), bench.name.clone()),
            result.stdout_tail.clone(),
        );
        data.changes
            .insert(label.to_string(), result.changes.clone());
        if let Some(d) = run_dropout(bench, round, &result, figure) {
            self.p.dropouts.insert(label.to_string(), d);
        }
    }

    /// Which samples are finished: enough paired rounds and a decided verdict (strict), or
    /// the minimum (gso), or the maximum either way.
    fn mark_finished(&mut self, left: &[usize]) {
        let variants = self.input.variants;
        let labels: Vec<String> = left
            .iter()
            .map(|&i| variants[i].label.clone())
            .chain(self.input.shared.keys().cloned())
            .collect();
        for label in labels {
            if self.p.dropouts.contains_key(&label) || self.p.done.contains_key(&label) {
                continue;
            }
            let j = judge(&self.p.log, &label, self.input.rule);
            let paired = j.rounds();
            if sample_finished(&self.input.schedule, paired, j.decided()) {
                if j.decided() {
                    self.p.log.decided_after.insert(label.clone(), self.p.round);
                }
                self.p.done.insert(label, format!("{paired} rounds"));
                continue;
            }
            if !self.input.rule.criterion.adaptive() || j.intervals.is_none() {
                continue;
            }
            let th = &self.input.rule.thresholds;
            // Below the minimum of rounds a sample is paired with both references, decided
            // or not: the minimum holds for each comparison.
            let open = if paired < self.input.schedule.min_rounds {
                Needs {
                    base: true,
                    human: true,
                }
            } else {
                allocation::needs(&j, th)
            };
            self.p.needs.insert(label.clone(), open);
            // While containers can still be added, they come first: a projection from few
            // containers takes their offsets for the sample's speed.
            if paired >= self.input.schedule.min_rounds
                && self.width_scale(&label) >= 1.0
                && let Some(fit) = self.rounds_that_fit(&label, open)
                && let Some(why) = allocation::give_up(&j, th, fit, self.width_scale(&label))
            {
                self.p
                    .log
                    .stopped_undecided
                    .insert(label.clone(), why.clone());
                self.p.done.insert(label, why);
            }
        }
    }

    /// An output figure that is a duration must be borne out by the wall time: checked for
    /// every sample still in, whatever stopped the measurement.
    fn check_figures(&mut self) {
        let labels: Vec<String> = self
            .input
            .variants
            .iter()
            .map(|p| p.label.clone())
            .chain(self.input.shared.keys().cloned())
            .filter(|l| !is_reference(l))
            .collect();
        for label in labels {
            if self.p.dropouts.contains_key(&label) || self.p.log.runs_of(&label) == "human" {
                continue;
            }
            for bench in &self.input.task.benches {
                if self.input.rule.criterion.figure() == Figure::SimulatedCycles {
                    break; // the figure is a count, not what the bench printed
                }
                if let Some(unit) = bench.metric_unit_s
                    && let Some(why) =
                        super::figures::unsupported_figure(&self.p.log, &bench.name, &label, unit)
                {
                    self.p.dropouts.insert(
                        label.clone(),
                        Dropout {
                            status: Status::TestFailed,
                            detail: why,
                        },
                    );
                    break;
                }
            }
        }
    }

    fn finish(mut self, stop_reason: String) -> MeasureOutcome {
        self.check_figures();
        let mut log = self.p.log;
        log.dropped = self
            .p
            .dropouts
            .iter()
            .map(|(k, d)| (k.clone(), format!("{}: {}", d.status, d.detail)))
            .collect();
        log.stop_reason = stop_reason;
        log.seconds = self.p.started.elapsed().as_secs_f64();
        log.warnings = log.seed_warnings();
        for w in &log.warnings {
            emit(
                self.input.events,
                Event::Warn(format!("{}: {w}", self.input.task.id)),
            );
        }
        MeasureOutcome {
            log,
            dropouts: self.p.dropouts,
        }
    }
}

/// The dropout a run earns: a pattern the timer cannot read, a broken limit, a failing
/// exit (OOM when the kernel says so), or no figure.
fn run_dropout(
    bench: &Bench,
    round: u32,
    result: &run::TimerResult,
    figure: Result<f64, String>,
) -> Option<Dropout> {
    if let Some(sim) = result.simulated.as_ref().filter(|s| s.unavailable) {
        return Some(Dropout {
            status: Status::Error,
            detail: format!(
                "bench `{}`: {}",
                bench.name,
                sim.error.as_deref().unwrap_or("no simulator")
            ),
        });
    }
    if let Some(e) = result.ignore_errors.first() {
        return Some(Dropout {
            status: Status::Error,
            detail: format!(
                "bench `{}`: the in-container timer cannot read a line pattern: {e}",
                bench.name
            ),
        });
    }
    if let Some(why) = run::result_limits(result, &bench.name) {
        return Some(Dropout {
            status: Status::TestFailed,
            detail: format!("{why} (round {round})"),
        });
    }
    if result.exit_code != 0 {
        let oom = result.oom_kills.unwrap_or(0) > 0;
        return Some(Dropout {
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
                run::last_lines(&result.stderr_tail, 5)
            ),
        });
    }
    figure.err().map(|why| Dropout {
        status: Status::TestFailed,
        detail: format!("bench `{}` {why} in round {round}", bench.name),
    })
}
