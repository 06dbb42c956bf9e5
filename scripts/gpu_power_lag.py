#!/usr/bin/env python3
"""How NVML's power reading follows the driver's energy counter, from a `harness gpu probe` JSON.

    python3 scripts/gpu_power_lag.py PROBE.json [--window 0.5]

Prints, per window of the probe: the power the counter says (joules it moved over the window's
seconds), the mean of the power readings in it, and the GPU's utilisation; then how often the
counter moved, and the lag (in seconds) that best lines the readings up with the counter. Where
the reading is an average over the last second (an H100 on driver 580), a step shows in the
counter at once and in the reading about half a second later.
"""
import argparse
import bisect
import json
import statistics


def windows(samples, width):
    ts = [s["t"] for s in samples]
    t = 0.0
    while True:
        i, j = bisect.bisect_left(ts, t), bisect.bisect_left(ts, t + width)
        if j >= len(samples) or ts[j] <= ts[i]:
            return
        moved = samples[j]["energy_counter_mj"] - samples[i]["energy_counter_mj"]
        readings = [s["power_w"] for s in samples[i:j] if s["power_w"] is not None]
        yield (t, moved / 1000 / (ts[j] - ts[i]), statistics.mean(readings),
               max(s["gpu_util"] or 0 for s in samples[i:j]))
        t += width


def counter_steps(samples):
    steps, last, since = [], None, None
    for s in samples:
        c = s["energy_counter_mj"]
        if last is not None and c != last:
            if since is not None:
                steps.append(s["t"] - since)
            since = s["t"]
        last = c
    return steps


def best_lag(samples, width=0.1, lags=None):
    """The shift of the readings (seconds) that makes them closest to the counter's power."""
    rows = list(windows(samples, width))
    lags = lags or [k * width for k in range(0, 21)]
    best = None
    for lag in lags:
        shift = round(lag / width)
        pairs = [(rows[k][1], rows[k + shift][2]) for k in range(len(rows) - shift)]
        if not pairs:
            continue
        err = statistics.mean(abs(a - b) for a, b in pairs)
        if best is None or err < best[1]:
            best = (lag, err)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("probe")
    ap.add_argument("--window", type=float, default=0.5)
    a = ap.parse_args()
    report = json.load(open(a.probe))
    for device in sorted({s["device_index"] for s in report["samples"]}):
        samples = [s for s in report["samples"]
                   if s["device_index"] == device and s["energy_counter_mj"] is not None]
        if len(samples) < 3:
            print(f"GPU {device}: no energy counter readings")
            continue
        print(f"GPU {device}: {len(samples)} samples, every {report['interval_ms']} ms")
        print(f"{'t s':>6} {'counter W':>10} {'reading W':>10} {'util %':>7}")
        for t, counter_w, reading_w, util in windows(samples, a.window):
            print(f"{t:6.1f} {counter_w:10.1f} {reading_w:10.1f} {util:7d}")
        steps = counter_steps(samples)
        if steps:
            print(f"counter moved {len(steps)} times, median every {statistics.median(steps):.3f} s")
        lag = best_lag(samples)
        if lag:
            print(f"readings line up best with the counter {lag[0]:.1f} s later "
                  f"(mean difference {lag[1]:.1f} W)")


if __name__ == "__main__":
    main()
