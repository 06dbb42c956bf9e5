//! Runs made under a known disturbance (the CPU changed speed, the quota throttled the
//! container, it sat off-CPU, a GPU throttled or its telemetry is missing): flagged in
//! bench.json, never set aside.

use harness_core::timings::{RunGpu, RunRecord};

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

/// A run's telemetry over all the task's GPUs.
pub(super) fn run_gpu(report: harness_telemetry::RunReport) -> RunGpu {
    let energy_j = report
        .devices
        .iter()
        .map(|d| d.run_energy_j())
        .sum::<Option<f64>>();
    RunGpu {
        energy_j,
        throttled: report.devices.iter().any(|d| d.throttled),
        devices: report.devices,
    }
}

/// Why a GPU run is disturbed: clocks throttled for heat or power, a device's telemetry
/// incomplete, or no telemetry at all.
pub(super) fn gpu_disturbance(gpu: &Result<RunGpu, String>) -> Option<String> {
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
