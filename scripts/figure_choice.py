#!/usr/bin/env python3
"""Which figure of an exec's repetitions decides best: the fastest, the median or the mean.

Since issue 41 every timed repetition answers its own seed, so an exec's figure may be any
summary of its repetitions (`reps` in bench.json). This script takes finished runs (e.g. the
work folder of `scripts/validate_measurement.py --only human`), rewrites every exec's figure
as each summary in a copy of the run, regrades the copy with the harness
(`harness report --criterion strict`) and counts, per summary, the samples decided
(opt_commit yes or no, not undecided) and the samples judged optimised over human:

    python3 scripts/figure_choice.py RESULTS_DIR [--harness target/release/harness] [--json OUT]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARIES = {
    "fastest": min,
    "median": statistics.median,
    "mean": statistics.fmean,
}


def rewrite(bench_path, summary):
    with open(bench_path) as f:
        bench = json.load(f)
    better = {b["name"]: b.get("better", "lower") for b in bench.get("benches", [])}
    for r in bench.get("runs", []):
        reps = r.get("reps") or []
        if len(reps) < 2 or r.get("value") is None:
            continue
        if better.get(r.get("bench")) == "higher" and summary is min:
            r["value"] = max(reps)
        else:
            r["value"] = summary(reps)
    with open(bench_path, "w") as f:
        json.dump(bench, f)


def regrade(harness, run_dir, name, summary):
    tmp = tempfile.mkdtemp(prefix="figure-%s." % name)
    copy = os.path.join(tmp, os.path.basename(run_dir))
    shutil.copytree(run_dir, copy, symlinks=True)
    for bench_path in glob.glob(os.path.join(copy, "*", "*", "*", "bench.json")):
        rewrite(bench_path, summary)
    subprocess.run([harness, "-q", "report", "--criterion", "strict", copy], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reports = []
    for path in glob.glob(os.path.join(copy, "*", "*", "*", "report.json")):
        with open(path) as f:
            reports.append(json.load(f))
    shutil.rmtree(tmp, ignore_errors=True)
    return reports


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--harness", default=os.path.join(ROOT, "target", "release", "harness"))
    ap.add_argument("--json")
    args = ap.parse_args()
    runs = sorted(d for d in glob.glob(os.path.join(args.results, "*")) if os.path.exists(os.path.join(d, "run.json")))
    if not runs:
        sys.exit("no run folders in %s" % args.results)
    table = {}
    for name, summary in SUMMARIES.items():
        decided = yes = total = 0
        per_task = {}
        for run_dir in runs:
            for rep in regrade(args.harness, run_dir, name, summary):
                if rep.get("status") != "passed":
                    continue
                total += 1
                d = rep.get("decision_commit")
                task = per_task.setdefault(rep.get("instance_id"), [0, 0, 0])
                task[2] += 1
                if d in ("yes", "no"):
                    decided += 1
                    task[1] += 1
                if rep.get("opt_commit"):
                    yes += 1
                    task[0] += 1
        table[name] = {"samples": total, "decided": decided, "opt_commit": yes, "tasks": per_task}
        print("%-8s  decided %d of %d, opt_commit %d   %s" % (
            name, decided, total, yes,
            ", ".join("%s %d/%d" % (t, v[0], v[2]) for t, v in sorted(per_task.items()))))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
