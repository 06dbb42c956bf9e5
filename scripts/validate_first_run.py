#!/usr/bin/env python3
"""Does a run that builds its images measure like one that finds them cached?

Each trial removes the dataset's task images, runs the same predictions (each task's human
patch) once, so that run builds every image, then once more with the images cached, and
compares the two runs with `harness compare`: the same code, so every task should tie, and
the ratio of speedups should be near 1. Trials alternate between the binaries given, so each
is measured in the same hour; the figures per binary are the A/A false winners and the
spread of log(ratio) of the first run over the second.

Before the timing gate (issue 29), images were built on their own cores while other tasks'
rounds were timed: the first run of the examples measured dedupe-list 19% faster than the
three runs after it.

    python3 scripts/validate_first_run.py --bin before=/tmp/harness-old --bin after=target/release/harness \
        [--trials 3] [--dataset tasks] [--out validation/DATE-first-run.json]
"""

import argparse
import json
import math
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate_compare as vc  # noqa: E402
import validate_measurement as vm  # noqa: E402


def one_trial(work, dataset, name, binary):
    vm.BIN = binary
    vc.REUSE = False
    vc.remove_task_images(dataset)
    preds = vc.rows(dataset, vc.human_patch)
    first, w1 = vc.one_run(work, dataset, f"{name}-first", preds, [])
    second, w2 = vc.one_run(work, dataset, f"{name}-cached", preds, [])
    out = []
    for iid, winner, ratio in vc.compare(first, second, 0.035):
        out.append({"instance_id": iid, "winner": winner, "estimate": (ratio or {}).get("estimate"),
                    "lo": (ratio or {}).get("lo"), "hi": (ratio or {}).get("hi")})
    return {"first_s": w1, "cached_s": w2, "first": first, "cached": second, "comparisons": out}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH, repeatable")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--dataset", default="tasks")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bin]
    work = tempfile.mkdtemp(prefix="harness-first-run.")
    print(f"work folder: {work}")
    before = vm.hour_noise()
    trials = {name: [] for name, _ in bins}
    for k in range(a.trials):
        for name, path in bins:
            t = one_trial(work, a.dataset, f"{name}{k}", os.path.abspath(path))
            trials[name].append(t)
            worst = max(t["comparisons"], key=lambda c: abs(math.log(c["estimate"] or 1)))
            print(f"  {name} trial {k + 1}: first run {t['first_s']:.0f} s, cached {t['cached_s']:.0f} s; "
                  f"winners {sum(c['winner'] in ('first', 'second') for c in t['comparisons'])}/"
                  f"{len(t['comparisons'])}; largest first/cached {worst['estimate']:.3f} ({worst['instance_id']})")
    after = vm.hour_noise()
    report = {"dataset": a.dataset, "trials": trials,
              "hour_noise": {"before": before, "after": after, "cv": max(before["cv"], after["cv"])}}
    print()
    for name, ts in trials.items():
        comps = [c for t in ts for c in t["comparisons"] if c["estimate"]]
        logs = [math.log(c["estimate"]) for c in comps]
        wins = sum(c["winner"] in ("first", "second") for c in comps)
        rms = math.sqrt(sum(x * x for x in logs) / len(logs)) if logs else float("nan")
        worst = max(abs(x) for x in logs) if logs else float("nan")
        report[name] = {"comparisons": len(comps), "false_winners": wins, "rms_log_ratio": rms,
                        "max_abs_log_ratio": worst,
                        "first_run_s": [t["first_s"] for t in ts], "cached_run_s": [t["cached_s"] for t in ts]}
        print(f"{name}: false winners {vm.pct(wins, len(comps))}; first over cached: rms log ratio {rms:.4f}, "
              f"largest {math.exp(worst):.3f}x; first runs {', '.join('%.0f' % t['first_s'] for t in ts)} s")
    print(f"hour noise: fixed-loop CV {before['cv']:.1%} before, {after['cv']:.1%} after")
    out = a.out or os.path.join(work, "first-run.json")
    vm.write(out, json.dumps(report, indent=1) + "\n")
    print(f"figures written to {out}")


if __name__ == "__main__":
    main()
