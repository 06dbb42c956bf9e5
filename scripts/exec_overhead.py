#!/usr/bin/env python3
"""The harness's own time per timed exec, outside the timed repetitions, for one or more
builds of the harness on the same machine in the same hour (issue 27, item 7):

    overhead = exec_s - (sum of the exec's timed repetitions)     (bench.json, every run)

on the shipped primes-sieve with demo-agent's first sample, under the default criterion. The
builds run in turns (A B A B ...), so the hour's drift hits each alike; each figure is the
median over every run of every turn.

    python3 scripts/exec_overhead.py --bin NAME=PATH [--bin NAME=PATH ...] [--turns 2] [--json OUT]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def overheads(bench):
    out = []
    for r in bench["runs"]:
        if r.get("exec_s") is None:
            continue
        timed = sum(r.get("reps") or [r["wall_s"]])
        out.append(r["exec_s"] - timed)
    return out


def one_turn(binary, work, tag):
    results = os.path.join(work, tag)
    subprocess.run([binary, "opt-at-k", "--model", "demo-agent", "--predictions",
                    os.path.join(ROOT, "tasks/_predictions/demo-agent.jsonl"), "--k", "1",
                    "--instance-ids", "primes-sieve", "--dataset", os.path.join(ROOT, "tasks"),
                    "--results-dir", results, "--run-id", "overhead", "-q"],
                   check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    with open(os.path.join(results, "overhead/demo-agent/primes-sieve/0/bench.json")) as f:
        return overheads(json.load(f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.bin]
    per = {name: [] for name, _ in builds}
    with tempfile.TemporaryDirectory() as work:
        for turn in range(args.turns):
            for name, path in builds:
                per[name] += one_turn(path, work, "%s-%d" % (name, turn))
    figures = {name: {"median_s": statistics.median(v), "runs": len(v),
                      "p25_s": statistics.quantiles(v, n=4)[0], "p75_s": statistics.quantiles(v, n=4)[2]}
               for name, v in per.items()}
    for name, f in figures.items():
        print("%-10s overhead per exec: median %.3f s (quartiles %.3f-%.3f), %d runs"
              % (name, f["median_s"], f["p25_s"], f["p75_s"], f["runs"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
