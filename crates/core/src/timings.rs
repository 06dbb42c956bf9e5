//! Timings as they are saved: every run of every round of one task's measurement
//! (`bench.json`), plain data between the measurement that writes them and the verdicts,
//! reports and regrading that read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::criterion::Criterion;
use crate::task::Better;

/// One timed run of one bench in one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub round: u32,
    pub warmup: bool,
    pub variant: String,
    pub bench: String,
    /// Wall time of the bench process, measured inside the container.
    pub wall_s: f64,
    /// The figure compared: `wall_s`, or what the bench printed.
    pub value: Option<f64>,
    pub exit_code: i64,
    pub user_s: f64,
    pub sys_s: f64,
    pub max_rss_kb: u64,
    #[serde(default)]
    pub involuntary_switches: u64,
    /// Times the CPU quota throttled the container during the run (None: unknown).
    #[serde(default)]
    pub throttled: Option<u64>,
    /// A fixed bit of CPU work timed just before and just after the run, in ms.
    #[serde(default)]
    pub cpu_probe_ms: Option<[f64; 2]>,
    /// A known event during the run (the CPU changed speed, the quota throttled it, it sat
    /// off-CPU), when one was seen. Flagged only: the run counts like any other, because
    /// setting such runs aside did not make the intervals tighter (the validation script
    /// compares both on the same data).
    #[serde(default)]
    pub disturbed: Option<String>,
    /// Digest of what the bench printed (or the file it wrote), its figure left out: it
    /// must equal base's in the same round.
    #[serde(default)]
    pub output_digest: Option<String>,
    /// Processes the bench left running, killed after it.
    #[serde(default)]
    pub lingering_killed: u64,
    /// Files and System V IPC objects earlier runs in the container left, removed before
    /// this one (every timed run starts from the files the install left).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub leftovers_removed: u64,
    /// Which of the variant's containers ran it (0 without replicas).
    #[serde(default)]
    pub replica: u32,
    /// What the task's GPUs did during the run (GPU tasks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<RunGpu>,
    /// The figure of each timed repetition in the exec (`value` is the best of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reps: Vec<f64>,
    /// Seconds the whole exec took, the harness's own overhead included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_s: Option<f64>,
    /// Simulated runs: the bench's own time on this machine, run once before the count
    /// (the simulator's time limit follows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_s: Option<f64>,
    /// The digest of each repetition's output file, in order (benches with an equivalence
    /// command: each is compared with base's repetition of the same seed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rep_digests: Vec<String>,
}

/// `label`'s run of `bench` in `round`, when it exited 0.
pub fn finished_run<'a>(
    runs: &'a [RunRecord],
    round: u32,
    label: &str,
    bench: &str,
) -> Option<&'a RunRecord> {
    runs.iter()
        .find(|r| r.round == round && r.variant == label && r.bench == bench)
        .filter(|r| r.exit_code == 0)
}

/// What a task's equivalence command said of one output file against base's (see
/// `OutputCheck::File`): run once per pair of digests, in base's container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EquivalenceJudgment {
    pub bench: String,
    /// The digest of the reference's file (base's, or human's in a round base sat out).
    pub reference: String,
    /// The digest of the variant's file.
    pub output: String,
    pub equivalent: bool,
    /// Why not, in the command's words (the end of its output), or why it could not run.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// NVML telemetry of one run, over every GPU of the task. The window is the run's exec,
/// from just before the bench process starts to just after it ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunGpu {
    /// Joules over all devices, each by [`RunTelemetry::run_energy_j`](harness_telemetry::RunTelemetry::run_energy_j)
    /// (None when a device's energy could not be read).
    pub energy_j: Option<f64>,
    /// A thermal or power throttle reason was active on a device during the run.
    pub throttled: bool,
    pub devices: Vec<harness_telemetry::RunTelemetry>,
}

/// Energy of a sample's measurement: mean joules per measured round (every bench of the
/// round, every GPU), per variant, and base's over the patch's (above 1: the patch uses less).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergySummary {
    pub base_j: f64,
    pub human_j: f64,
    pub patch_j: f64,
    pub base_over_patch: f64,
    pub human_over_patch: f64,
    /// Measured runs of base, human and the patch whose GPU clocks were throttled (flagged
    /// as disturbed).
    pub throttled_runs: usize,
}

impl RunRecord {
    /// A measured run of `bench` that exited 0, on the CPU all along, with nothing else
    /// recorded (what tests and tools that make timings start from).
    pub fn plain(variant: &str, bench: &str, round: u32, wall_s: f64) -> RunRecord {
        RunRecord {
            round,
            warmup: false,
            variant: variant.into(),
            bench: bench.into(),
            wall_s,
            value: Some(wall_s),
            exit_code: 0,
            user_s: wall_s,
            sys_s: 0.0,
            max_rss_kb: 0,
            involuntary_switches: 0,
            throttled: None,
            cpu_probe_ms: None,
            disturbed: None,
            output_digest: None,
            lingering_killed: 0,
            leftovers_removed: 0,
            replica: 0,
            gpu: None,
            reps: Vec::new(),
            exec_s: None,
            native_s: None,
            rep_digests: Vec::new(),
        }
    }

    /// Whether the run enters the statistics: every measured run with a figure.
    pub fn counts(&self) -> bool {
        !self.warmup && self.value.is_some() && self.exit_code == 0
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchSetting {
    pub name: String,
    pub command: String,
    pub warmups: u32,
    pub runs: u32,
    pub max_runs: u32,
    pub metric: String,
    pub better: Better,
    pub timeout_s: f64,
    /// How its output is compared with base's.
    #[serde(default)]
    pub output_check: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    pub round: u32,
    /// The order variants ran in this round.
    pub order: Vec<String>,
    /// `HARNESS_BENCH_SEED` of the round's first repetition (its warmup's): fresh and
    /// random, the same for every variant, so an answer remembered from another run does
    /// not match.
    #[serde(default)]
    pub seed: Option<u64>,
    /// `HARNESS_BENCH_SEED` of each timed repetition of the round's first bench, in order:
    /// drawn after the code was frozen, shared by the round's variants, never by two
    /// repetitions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<u64>,
    /// The same for every bench, in the task's order (the first is `seeds`): each bench
    /// asks its own questions, so one bench's answer is never another's in the same
    /// container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bench_seeds: Vec<Vec<u64>>,
}

/// The schedule a measurement followed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub criterion: Criterion,
    pub warmup_rounds: u32,
    pub min_rounds: u32,
    pub max_rounds: u32,
    pub max_seconds: f64,
    pub cpuset: Option<String>,
    /// Containers per variant; round r runs in the (r mod replicas)-th.
    #[serde(default = "one")]
    pub replicas: u32,
    /// Timed repetitions of each bench per exec; a run's figure is the fastest of them.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Containers a variant may grow to while its samples are undecided (= `replicas` when
    /// the count is fixed).
    #[serde(default = "one")]
    pub max_replicas: u32,
}

fn one() -> u32 {
    1
}

/// `bench.json`: every timing of every round of one task's measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchLog {
    pub schema_version: u32,
    pub instance_id: String,
    /// The variant this copy of the file belongs to (a sample's folder), if any.
    pub sample_variant: Option<String>,
    pub variants: Vec<String>,
    pub benches: Vec<BenchSetting>,
    pub schedule: Schedule,
    pub rounds: Vec<RoundRecord>,
    pub runs: Vec<RunRecord>,
    /// variant → the round after which its verdict was decided.
    pub decided_after: BTreeMap<String, u32>,
    /// Samples stopped undecided before the budget was spent, and why (see
    /// `core::allocation`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stopped_undecided: BTreeMap<String, String>,
    /// variant → why it left the measurement early.
    pub dropped: BTreeMap<String, String>,
    pub stop_reason: String,
    pub seconds: f64,
    /// sample → the variant whose timings it takes, its tree being byte-identical to that
    /// variant's (it was not measured again).
    #[serde(default)]
    pub shared: BTreeMap<String, String>,
    /// The samples of `shared` whose trees are not byte-identical to their source's but
    /// differ only in the comments and layout of Python files (equal syntax trees).
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub shared_code_only: std::collections::BTreeSet<String>,
    /// GPU telemetry, one JSON line per NVML sample (written to `telemetry.jsonl`, not
    /// to bench.json).
    #[serde(skip)]
    pub telemetry_lines: Vec<String>,
    /// What the task's author should know about its benches (see `seed_warnings`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Output files that differed from the reference's, and what the task's equivalence
    /// command judged of each pair.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub equivalence: Vec<EquivalenceJudgment>,
}

impl BenchLog {
    /// Benches whose output, under a fresh `HARNESS_BENCH_SEED` every round, repeats so
    /// often across base's rounds that it can take only a few values: their input does not
    /// depend enough on the seed, so a patch could carry a table of answers and pass the
    /// output check. One repeat is not enough to say so: an answer such as a sum over a
    /// seeded input is concentrated and repeats by chance (primes-sieve: 14 distinct sums
    /// in 15 rounds from 20^260 inputs). The number of possible answers is estimated from
    /// the repeats (the birthday estimate: R rounds, P pairs of equal answers, about
    /// R(R-1)/2P values) and warned about below max(20, R).
    pub fn seed_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for b in &self.benches {
            if b.output_check.starts_with("off") {
                continue;
            }
            // One answer per seed: each repetition's where the run keeps them, else the
            // exec's, of execs with as many repetitions as the timed ones (a warm-up's one
            // repetition has a digest of its own kind).
            let base: Vec<&RunRecord> = self
                .runs
                .iter()
                .filter(|r| r.variant == "base" && r.bench == b.name && r.exit_code == 0)
                .collect();
            let timed_reps = base
                .iter()
                .filter(|r| !r.warmup)
                .map(|r| r.reps.len())
                .max();
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for r in base
                .iter()
                .filter(|r| !r.warmup || Some(r.reps.len()) == timed_reps)
            {
                if !r.rep_digests.is_empty() {
                    for d in &r.rep_digests {
                        *counts.entry(d).or_default() += 1;
                    }
                } else if let Some(d) = r.output_digest.as_deref() {
                    *counts.entry(d).or_default() += 1;
                }
            }
            let rounds: usize = counts.values().sum();
            let equal_pairs: usize = counts.values().map(|c| c * (c - 1) / 2).sum();
            if rounds < 3 || equal_pairs == 0 {
                continue;
            }
            let estimate = (rounds * (rounds - 1)) as f64 / (2 * equal_pairs) as f64;
            if estimate < (rounds.max(20)) as f64 {
                out.push(format!(
                    "bench `{}`: base's output took {} distinct value(s) in {} runs, each with a fresh \
                     HARNESS_BENCH_SEED (about {:.0} possible answers): its input does not depend enough \
                     on the seed, so a patch could print remembered answers and pass the output check; \
                     draw the whole input from the seed",
                    b.name,
                    counts.len(),
                    rounds,
                    estimate
                ));
            }
        }
        out
    }

    /// The variant whose runs stand for `variant`: itself, or the one it shares with.
    pub fn runs_of<'a>(&'a self, variant: &'a str) -> &'a str {
        self.shared
            .get(variant)
            .map(String::as_str)
            .unwrap_or(variant)
    }

    /// Mean GPU joules per measured round of `variant` (None without telemetry, or when a
    /// run's energy is unknown).
    pub fn energy_per_round(&self, variant: &str) -> Option<f64> {
        let source = self.runs_of(variant);
        let mut by_round: BTreeMap<u32, f64> = BTreeMap::new();
        for r in self
            .runs
            .iter()
            .filter(|r| r.variant == source && r.counts())
        {
            let e = r.gpu.as_ref()?.energy_j?;
            *by_round.entry(r.round).or_default() += e;
        }
        (!by_round.is_empty()).then(|| by_round.values().sum::<f64>() / by_round.len() as f64)
    }

    /// Energy of `variant` beside base's and human's, when all three have telemetry.
    pub fn energy(&self, variant: &str) -> Option<EnergySummary> {
        let (base_j, human_j, patch_j) = (
            self.energy_per_round("base")?,
            self.energy_per_round("human")?,
            self.energy_per_round(variant)?,
        );
        let sources = ["base", "human", self.runs_of(variant)];
        let throttled_runs = self
            .runs
            .iter()
            .filter(|r| sources.contains(&r.variant.as_str()) && r.counts())
            .filter(|r| r.gpu.as_ref().is_some_and(|g| g.throttled))
            .count();
        (patch_j > 0.0).then(|| EnergySummary {
            base_j,
            human_j,
            patch_j,
            base_over_patch: base_j / patch_j,
            human_over_patch: human_j / patch_j,
            throttled_runs,
        })
    }

    /// Whether this log holds timings for `variant` (measured or shared).
    pub fn covers(&self, variant: &str) -> bool {
        self.variants.iter().any(|v| v == variant) || self.shared.contains_key(variant)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(round: u32, variant: &str, digest: &str) -> RunRecord {
        RunRecord {
            warmup: round == 0,
            output_digest: Some(digest.into()),
            ..RunRecord::plain(variant, "b", round, 0.1)
        }
    }

    fn log(digests: &[&str], check: &str) -> BenchLog {
        BenchLog {
            schema_version: 1,
            instance_id: "t".into(),
            sample_variant: None,
            variants: vec!["base".into()],
            benches: vec![BenchSetting {
                name: "b".into(),
                command: "python3 bench.py".into(),
                warmups: 1,
                runs: 3,
                max_runs: 9,
                metric: "wall".into(),
                better: Better::Lower,
                timeout_s: 1.0,
                output_check: check.into(),
            }],
            schedule: Schedule {
                criterion: Criterion::STRICT,
                warmup_rounds: 1,
                min_rounds: 3,
                max_rounds: 9,
                max_seconds: 1.0,
                cpuset: None,
                replicas: 1,
                repetitions: 1,
                max_replicas: 1,
            },
            rounds: Vec::new(),
            runs: digests
                .iter()
                .enumerate()
                .map(|(i, d)| run(i as u32, "base", d))
                .chain([run(1, "s0", "x")])
                .collect(),
            decided_after: BTreeMap::new(),
            stopped_undecided: BTreeMap::new(),
            dropped: BTreeMap::new(),
            stop_reason: String::new(),
            seconds: 0.0,
            shared: BTreeMap::new(),
            shared_code_only: Default::default(),
            telemetry_lines: Vec::new(),
            warnings: Vec::new(),
            equivalence: Vec::new(),
        }
    }

    #[test]
    fn a_bench_whose_answer_repeats_across_seeds_is_warned_about() {
        assert!(
            log(&["a", "b", "c", "d"], "stdout")
                .seed_warnings()
                .is_empty()
        );
        let w = log(&["a", "b", "a", "c"], "stdout").seed_warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("3 distinct value(s) in 4 runs"), "{}", w[0]);
        // A concentrated answer repeating once by chance is not a small answer space...
        let fifteen: Vec<String> = (0..15).map(|i| format!("v{}", i.min(13))).collect();
        let fifteen: Vec<&str> = fifteen.iter().map(String::as_str).collect();
        assert!(log(&fifteen, "stdout").seed_warnings().is_empty());
        // ...but nine answers over fifteen rounds (a seed reduced modulo 9) is.
        let nine: Vec<String> = (0..15).map(|i| format!("v{}", i % 9)).collect();
        let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
        assert!(log(&nine, "stdout").seed_warnings()[0].contains("9 distinct value(s) in 15"));
        // A fixed input: one answer every round.
        assert!(log(&["a", "a", "a"], "stdout").seed_warnings()[0].contains("1 distinct"));
        // Each repetition's answer where the runs keep them (an equivalence check's bench);
        // a warm-up of one repetition, whose exec digest is of another kind, left out.
        let mut kept = log(&["w", "x", "x", "x"], "file r.json");
        for r in &mut kept.runs {
            r.reps = if r.warmup { vec![1.0] } else { vec![1.0; 3] };
            r.rep_digests = if r.warmup {
                vec!["w".into()]
            } else {
                vec!["a".into(); 3]
            };
        }
        let w = kept.seed_warnings();
        assert!(w[0].contains("1 distinct value(s) in 9 runs"), "{w:?}");
        // Too few rounds to say, or no output check at all.
        assert!(log(&["a", "a"], "stdout").seed_warnings().is_empty());
        assert!(
            log(&["a", "a", "a"], "off (prints a timestamp)")
                .seed_warnings()
                .is_empty()
        );
    }
}
