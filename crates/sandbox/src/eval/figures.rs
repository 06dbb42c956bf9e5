//! Whether a figure a bench prints is borne out by the time its run took.
//!
//! An output metric is measured inside the process that runs the patched code, so that code
//! can shape it: replace the clock, do the work before the clock starts (at import, say),
//! print its own. What it cannot shape is the wall time of its process, taken by the harness
//! outside it. When a task says the figure is a duration (`metric_unit`), the timed work is
//! part of the run, so a run whose figure is `d` shorter than base's should take about `d`
//! less wall time than base's run of the same round: `expected = wall(base) - d`. A sample
//! whose runs take clearly longer than that is refused: the per-round log-ratio
//! `wall(sample) / expected`, by a one-sided 95% t-bound, above 1.05. Ratios, not
//! differences, because this machine's speed drifts by round (the noise is multiplicative,
//! and a round's variants share it).
//!
//! What it cannot see: a figure that times a small part of a long run (a GPU kernel in a
//! process dominated by start-up) moves the wall time too little for any claim to be told
//! from noise.

use harness_core::timings::BenchLog;

/// At least this many rounds both variants ran before the check says anything.
const MIN_ROUNDS: usize = 3;
/// How much longer than expected a run may take before the figure is doubted: work a patch
/// adds outside the timed part (a heavier import) is its own business up to this.
const SLACK: f64 = 1.05;

/// Why `label`'s figure for `bench` (in seconds per unit `unit_s`) claims a saving over base
/// that the wall time of its runs does not show; None when it does, or there are too few
/// rounds to say.
pub fn unsupported_figure(log: &BenchLog, bench: &str, label: &str, unit_s: f64) -> Option<String> {
    let source = log.runs_of(label);
    let runs = |variant: String| {
        log.runs
            .iter()
            .filter(move |r| r.variant == variant && r.bench == bench && r.counts())
    };
    let (mut log_ratios, mut claimed, mut expected, mut took) = (vec![], vec![], vec![], vec![]);
    for b in runs("base".to_string()) {
        let Some(s) = runs(source.to_string()).find(|s| s.round == b.round) else {
            continue;
        };
        let (Some(vb), Some(vs)) = (b.value, s.value) else {
            continue;
        };
        let saved = (vb - vs) * unit_s;
        let expect = b.wall_s - saved;
        if expect <= 0.0 || s.wall_s <= 0.0 {
            continue; // the figure is not a part of the run's time (a wrong unit)
        }
        log_ratios.push((s.wall_s / expect).ln());
        claimed.push(saved);
        expected.push(expect);
        took.push(s.wall_s);
    }
    let n = log_ratios.len();
    if n < MIN_ROUNDS {
        return None;
    }
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let m = mean(&log_ratios);
    let sd = (log_ratios.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    let t = harness_core::replicated::student_t_quantile(0.95, (n - 1) as f64);
    let lower = (m - t * sd / (n as f64).sqrt()).exp();
    if lower <= SLACK {
        return None;
    }
    Some(format!(
        "bench `{bench}`: its figure says a run saves {:.1} ms over base's, so its runs should take about {:.0} ms; \
         they took {:.0} ms ({:.2}x that, at least {:.2}x at 95%, over {n} rounds): the figure does not measure the work \
         its run did (work moved outside the timed part, or the timing tampered with in-process), the wall time shows no such saving",
        mean(&claimed) * 1e3,
        mean(&expected) * 1e3,
        mean(&took) * 1e3,
        m.exp(),
        lower
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::timings::{RunRecord, Schedule};

    fn run(variant: &str, round: u32, wall: f64, figure_ms: f64) -> RunRecord {
        RunRecord {
            value: Some(figure_ms),
            ..RunRecord::plain(variant, "b", round, wall)
        }
    }

    fn log(runs: Vec<RunRecord>) -> BenchLog {
        BenchLog {
            schema_version: 1,
            instance_id: "t".into(),
            sample_variant: None,
            variants: vec!["base".into(), "s0".into()],
            benches: Vec::new(),
            schedule: Schedule {
                criterion: harness_core::criterion::Criterion::STRICT,
                warmup_rounds: 0,
                min_rounds: 1,
                max_rounds: 1,
                max_seconds: 1.0,
                cpuset: None,
                replicas: 1,
                repetitions: 1,
                max_replicas: 1,
            },
            rounds: Vec::new(),
            runs,
            decided_after: Default::default(),
            stopped_undecided: Default::default(),
            dropped: Default::default(),
            stop_reason: String::new(),
            seconds: 0.0,
            shared: Default::default(),
            shared_code_only: Default::default(),
            telemetry_lines: Vec::new(),
            warnings: Vec::new(),
            equivalence: Vec::new(),
        }
    }

    /// Base: 0.330 s a run, 37 ms of it the timed call; noise of a few ms per run.
    fn rounds(sample_wall: f64, sample_ms: f64) -> Vec<RunRecord> {
        let noise = [0.004, -0.003, 0.002, -0.001, 0.003, -0.004, 0.0];
        let mut runs = Vec::new();
        for (r, e) in noise.iter().enumerate() {
            runs.push(run("base", r as u32, 0.330 + e, 37.0 + e * 100.0));
            runs.push(run("s0", r as u32, sample_wall - e, sample_ms));
        }
        runs
    }

    #[test]
    fn an_honest_speedup_shows_in_the_wall_time() {
        // The call got 4x faster: 28 ms saved by the figure and by the clock.
        let l = log(rounds(0.302, 9.0));
        assert_eq!(unsupported_figure(&l, "b", "s0", 1e-3), None);
        // Saving more wall time than the figure says is fine (other parts got faster).
        let l = log(rounds(0.250, 30.0));
        assert_eq!(unsupported_figure(&l, "b", "s0", 1e-3), None);
    }

    #[test]
    fn a_figure_the_clock_does_not_bear_out_is_refused() {
        // The clock replaced in-process: the figure says 0.001 ms, the process takes as long.
        let l = log(rounds(0.330, 0.001));
        let why = unsupported_figure(&l, "b", "s0", 1e-3).unwrap();
        assert!(
            why.contains("wall time") && why.contains("saves 37.0 ms"),
            "{why}"
        );
        // The work moved to import time: the process is no faster, the figure is.
        let l = log(rounds(0.331, 0.5));
        assert!(unsupported_figure(&l, "b", "s0", 1e-3).is_some());
        // Too few rounds: nothing said.
        let mut few = rounds(0.330, 0.001);
        few.retain(|r| r.round < 2);
        assert_eq!(unsupported_figure(&log(few), "b", "s0", 1e-3), None);
    }
}
