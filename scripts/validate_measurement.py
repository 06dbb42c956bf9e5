#!/usr/bin/env python3
"""Validates the harness's measurement on this machine, with real containers.

    scripts/validate-measurement.sh            # full: 15 min (quiet) to 90 min (noisy) on a 2-core machine
    scripts/validate-measurement.sh --quick    # fewer trials, about a quarter of that

Four checks, each printed with its figures (and written to validation.json):

  A/A           a no-op patch against base on an example task, many independent trials:
                how often is it judged optimised, and how wide are the intervals?
  known         tasks whose patch does a calibrated fraction of the work (true speedups
                1.10x, 1.30x, 2.0x): decisions against the 1.2 threshold, and the error of
                the estimated speedup.
  timer bias    a static binary that reads CLOCK_MONOTONIC at its first and last
                instruction, against the harness's in-container figure for the same run.
  stability     the example evaluation three times: are the verdicts identical?

Every trial is one task with its own interleaved measurement (base, human, patch), so trials
are independent. The same trials are also judged by GSO's rule on the means of their first
5 and 10 rounds (every run, as GSO takes them), to show what the strict criterion buys.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "harness")


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def harness(*args):
    out = subprocess.run([BIN, "-q", *args], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"harness {' '.join(args)} failed ({out.returncode})")
    return json.loads(out.stdout)


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def git_diff(repo_dir, rel, new_text):
    """A `git diff` of one file changed to new_text, made in a scratch repository."""
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(repo_dir, os.path.join(d, "r"))
        r = os.path.join(d, "r")
        sh("git", "init", "-q", r)
        sh("git", "-C", r, "add", "-A")
        sh("git", "-C", r, "-c", "user.name=v", "-c", "user.email=v@v", "commit", "-qm", "base")
        with open(os.path.join(r, rel), "w") as f:
            f.write(new_text)
        return subprocess.run(["git", "-C", r, "diff"], check=True, capture_output=True, text=True).stdout


def python_round(x, n):
    return round(x, n)


def gso_opt_base(bench, variant, rounds):
    """GSO's rule on the means of the first `rounds` measured rounds, every run counted."""
    runs = [r for r in bench["runs"] if not r["warmup"] and r["value"] is not None]
    chosen = sorted({r["round"] for r in runs if r["variant"] == variant})[:rounds]
    base = [r["value"] for r in runs if r["variant"] == "base" and r["round"] in chosen]
    patch = [r["value"] for r in runs if r["variant"] == variant and r["round"] in chosen]
    if not base or not patch:
        return None, None
    bm, pm = statistics.mean(base), statistics.mean(patch)
    speedup = bm / pm
    return bm > pm and python_round(speedup, 1) >= 1.2, speedup


def trial_results(results, run_id, model, ids):
    out = []
    for iid in ids:
        d = os.path.join(results, run_id, model, iid, "0")
        with open(os.path.join(d, "report.json")) as f:
            rep = json.load(f)
        bench = None
        if os.path.exists(os.path.join(d, "bench.json")):
            with open(os.path.join(d, "bench.json")) as f:
                bench = json.load(f)
        out.append((rep, bench))
    return out


def pct(n, d):
    return f"{n}/{d} ({100.0 * n / d:.1f}%)" if d else "0/0"


# ---- A/A ---------------------------------------------------------------------------------

def aa(work, trials):
    src = os.path.join(ROOT, "tasks", "primes-sieve")
    with open(os.path.join(ROOT, "tasks", "_predictions", "demo-agent.jsonl")) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    noop = [r for r in rows if r["instance_id"] == "primes-sieve"][2]["model_patch"]
    ds = os.path.join(work, "aa-ds")
    ids = [f"aa-{i:02d}" for i in range(trials)]
    preds = []
    for iid in ids:
        shutil.copytree(src, os.path.join(ds, iid))
        preds.append(json.dumps({"instance_id": iid, "model_name_or_path": "noop", "model_patch": noop}))
    write(os.path.join(work, "aa.jsonl"), "\n".join(preds) + "\n")
    results = os.path.join(work, "results")
    t0 = time.time()
    harness("opt-at-k", "--model", "noop", "--predictions", os.path.join(work, "aa.jsonl"), "--k", "1",
            "--dataset", ds, "--results-dir", results, "--run-id", "aa", "--json")
    wall = time.time() - t0
    res = trial_results(results, "aa", "noop", ids)
    strict_yes = sum(1 for rep, _ in res if rep["decision_base"] == "yes")
    inconclusive = sum(1 for rep, _ in res if rep["inconclusive"])
    widths = [(rep["intervals"]["gm_speedup_patch_base"]["hi"] - rep["intervals"]["gm_speedup_patch_base"]["lo"])
              / rep["intervals"]["gm_speedup_patch_base"]["estimate"] for rep, _ in res if rep.get("intervals")]
    estimates = [rep["opt_stats"]["gm_speedup_patch_base"] for rep, _ in res if rep.get("opt_stats")]
    rounds = [rep["measured_rounds"] for rep, _ in res]
    gso5 = [gso_opt_base(b, "s0", 5) for _, b in res if b]
    gso10 = [gso_opt_base(b, "s0", 10) for _, b in res if b]
    out = {
        "trials": trials,
        "strict_judged_optimised": strict_yes,
        "strict_inconclusive": inconclusive,
        "gso_5_rounds_judged_optimised": sum(1 for v, _ in gso5 if v),
        "gso_10_rounds_judged_optimised": sum(1 for v, _ in gso10 if v),
        "gso_5_rounds_speedup_range": [min(s for _, s in gso5), max(s for _, s in gso5)],
        "estimate_range": [min(estimates), max(estimates)],
        "ci_relative_width_median": statistics.median(widths) if widths else None,
        "ci_relative_width_max": max(widths) if widths else None,
        "measured_rounds_median": statistics.median(rounds),
        "wall_seconds": wall,
    }
    print("\nA/A: no-op patch vs base on primes-sieve, %d independent trials (%.0f s)" % (trials, wall))
    print("  strict: judged optimised %s; inconclusive %s" % (pct(strict_yes, trials), pct(inconclusive, trials)))
    print("  gso on the same trials, 5 rounds: judged optimised %s; 10 rounds: %s"
          % (pct(out["gso_5_rounds_judged_optimised"], len(gso5)), pct(out["gso_10_rounds_judged_optimised"], len(gso10))))
    print("  no-op speedup estimates %.3f .. %.3f (GSO 5-round means: %.3f .. %.3f)"
          % (*out["estimate_range"], *out["gso_5_rounds_speedup_range"]))
    if widths:
        print("  95%% interval width: median %.1f%%, max %.1f%% of the estimate; median %d rounds"
              % (100 * out["ci_relative_width_median"], 100 * out["ci_relative_width_max"], out["measured_rounds_median"]))
    return out


# ---- known speedups ----------------------------------------------------------------------

UNITS = 2_400_000
MODULE = """\"\"\"Calibrated CPU work: spin() runs UNITS iterations of integer arithmetic.\"\"\"
UNITS = {units}


def spin(units=None):
    x = 0
    for i in range(UNITS if units is None else units):
        x = (x * 31 + i) & 0xFFFFFFFF
    return x


def checksum(n):
    return n * (n - 1) // 2
"""
BENCH = """import json
import time

import calib

# Untimed warm-up, so first-touch costs (allocator arenas, caches) are not in the figure
# and the figure is proportional to the work.
calib.spin(200000)
start = time.perf_counter()
calib.spin()
print(json.dumps({"own_s": time.perf_counter() - start}))
"""
TEST = "import calib\nassert calib.checksum(10) == 45\nprint('ok')\n"
TOML = """description = "calibrated work for validation"
protected = ["bench.py", "test_calib.py"]
[source]
path = "repo"
[human]
patch = "human.patch"
[test]
command = "python3 test_calib.py"
[[bench]]
name = "spin"
command = "python3 bench.py"
warmups = 1
runs = 10
max_runs = 40
metric = "output"
json_key = "own_s"
[resources]
cpus = 1
memory = "512m"
"""


def known(work, trials, levels=(1.10, 1.30, 2.0)):
    ds = os.path.join(work, "known-ds")
    preds = []
    ids = {}
    for level in levels:
        units = round(UNITS / level)
        true = UNITS / units
        ids[level] = []
        for i in range(trials):
            iid = f"k{int(round(level * 100))}-{i:02d}"
            d = os.path.join(ds, iid)
            write(os.path.join(d, "repo", "calib.py"), MODULE.format(units=UNITS))
            write(os.path.join(d, "repo", "bench.py"), BENCH)
            write(os.path.join(d, "repo", "test_calib.py"), TEST)
            write(os.path.join(d, "task.toml"), TOML)
            write(os.path.join(d, "human.patch"),
                  git_diff(os.path.join(d, "repo"), "calib.py", MODULE.format(units=UNITS // 4)))
            patch = git_diff(os.path.join(d, "repo"), "calib.py", MODULE.format(units=units))
            preds.append(json.dumps({"instance_id": iid, "model_name_or_path": "calibrated", "model_patch": patch}))
            ids[level].append((iid, true))
    write(os.path.join(work, "known.jsonl"), "\n".join(preds) + "\n")
    results = os.path.join(work, "results")
    t0 = time.time()
    harness("opt-at-k", "--model", "calibrated", "--predictions", os.path.join(work, "known.jsonl"), "--k", "1",
            "--dataset", ds, "--results-dir", results, "--run-id", "known", "--json")
    wall = time.time() - t0
    out = {"trials_per_level": trials, "wall_seconds": wall, "levels": {}}
    print("\nKnown speedups: patch does 1/x of the work, %d trials per level (%.0f s)" % (trials, wall))
    print("  %-6s %-8s %-22s %-16s %-16s %-12s %-12s %s" % ("true", "rounds", "strict yes/no/undec.", "gso@5 yes", "gso@10 yes",
                                                            "median err", "max err", "CI covers truth"))
    for level in levels:
        res = trial_results(results, "known", "calibrated", [i for i, _ in ids[level]])
        true = ids[level][0][1]
        dec = [rep["decision_base"] for rep, _ in res]
        errs = [abs(rep["opt_stats"]["gm_speedup_patch_base"] / true - 1) for rep, _ in res if rep.get("opt_stats")]
        covers = sum(1 for rep, _ in res if rep.get("intervals")
                     and rep["intervals"]["gm_speedup_patch_base"]["lo"] <= true <= rep["intervals"]["gm_speedup_patch_base"]["hi"])
        gso5 = [gso_opt_base(b, "s0", 5)[0] for _, b in res if b]
        gso10 = [gso_opt_base(b, "s0", 10)[0] for _, b in res if b]
        rounds = statistics.median(rep["measured_rounds"] for rep, _ in res)
        row = {
            "true_speedup": true,
            "strict_yes": dec.count("yes"), "strict_no": dec.count("no"), "strict_undecided": dec.count("undecided"),
            "gso_5_yes": sum(1 for v in gso5 if v), "gso_10_yes": sum(1 for v in gso10 if v),
            "median_abs_error": statistics.median(errs) if errs else None,
            "max_abs_error": max(errs) if errs else None,
            "ci_covers_truth": covers, "median_rounds": rounds,
            "trials": [{"instance": rep.get("instance_id"), "decision": rep["decision_base"],
                        "estimate": rep.get("opt_stats", {}).get("gm_speedup_patch_base"),
                        "interval": rep.get("intervals", {}).get("gm_speedup_patch_base"),
                        "rounds": rep["measured_rounds"]} for rep, _ in res],
        }
        out["levels"][f"{level:.2f}"] = row
        print("  %-6.3f %-8s %-22s %-16s %-16s %-12s %-12s %s" % (
            true, rounds, f"{row['strict_yes']}/{row['strict_no']}/{row['strict_undecided']}",
            pct(row["gso_5_yes"], len(gso5)), pct(row["gso_10_yes"], len(gso10)),
            f"{100 * row['median_abs_error']:.2f}%", f"{100 * row['max_abs_error']:.2f}%", pct(covers, len(res))))
    return out


# ---- timer bias --------------------------------------------------------------------------

OWN_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <time.h>
static uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec; }
int main(void) {
    uint64_t a = now();
    volatile uint64_t x = 0;
    for (uint64_t i = 0; i < 120000000ull; i++) x += i;
    uint64_t b = now();
    printf("{\"own_s\": %.9f}\n", (b - a) / 1e9);
    return 0;
}
"""


def timer_bias(work, runs):
    ds = os.path.join(work, "timer-ds")
    d = os.path.join(ds, "timer")
    write(os.path.join(d, "repo", "own.c"), OWN_C)
    sh("gcc", "-O1", "-static", "-o", os.path.join(d, "repo", "own"), os.path.join(d, "repo", "own.c"))
    write(os.path.join(d, "repo", "test.sh"), "#!/bin/sh\n./own >/dev/null\n", 0o755)
    os.remove(os.path.join(d, "repo", "own.c"))
    # The "patch" variant is the same program; the human reference a comment change.
    write(os.path.join(d, "repo", "NOTES"), "timer bias check\n")
    write(os.path.join(d, "human.patch"), git_diff(os.path.join(d, "repo"), "NOTES", "timer bias check (human)\n"))
    write(os.path.join(d, "task.toml"), TOML.replace("python3 test_calib.py", "sh test.sh")
          .replace("python3 bench.py", "./own").replace('protected = ["bench.py", "test_calib.py"]', 'protected = ["own"]')
          .replace("runs = 10", f"runs = {runs}").replace("max_runs = 40", f"max_runs = {runs}"))
    patch = git_diff(os.path.join(d, "repo"), "NOTES", "timer bias check (sample)\n")
    write(os.path.join(work, "timer.jsonl"),
          json.dumps({"instance_id": "timer", "model_name_or_path": "timer", "model_patch": patch}) + "\n")
    results = os.path.join(work, "results")
    harness("opt-at-k", "--model", "timer", "--predictions", os.path.join(work, "timer.jsonl"), "--k", "1",
            "--dataset", ds, "--results-dir", results, "--run-id", "timer", "--json", "--criterion", "gso")
    with open(os.path.join(results, "timer", "timer", "timer", "0", "bench.json")) as f:
        bench = json.load(f)
    diffs = sorted((r["wall_s"] - r["value"]) * 1000 for r in bench["runs"] if r["value"] is not None)
    out = {
        "runs": len(diffs),
        "median_ms": statistics.median(diffs),
        "p95_ms": diffs[int(0.95 * (len(diffs) - 1))],
        "max_ms": diffs[-1],
        "min_ms": diffs[0],
    }
    print("\nTimer bias: harness in-container wall time minus the program's own CLOCK_MONOTONIC span, %d runs" % len(diffs))
    print("  median %.3f ms, p95 %.3f ms, max %.3f ms, min %.3f ms (target: under 2 ms per run)"
          % (out["median_ms"], out["p95_ms"], out["max_ms"], out["min_ms"]))
    return out


# ---- stability ---------------------------------------------------------------------------

def stability(work, repeats):
    results = os.path.join(work, "results")
    verdicts = []
    walls = []
    for i in range(repeats):
        t0 = time.time()
        summary = harness("opt-at-k", "--model", "demo-agent", "--predictions", "tasks/_predictions/demo-agent.jsonl",
                          "--k", "3", "--results-dir", results, "--run-id", f"stability-{i}", "--json")
        walls.append(time.time() - t0)
        v = {}
        for inst in summary["instances"]:
            for s in inst["samples"]:
                v[(inst["instance_id"], s["sample"])] = (s["status"], s["opt_base"], s["opt_commit"], s["inconclusive"])
        verdicts.append(v)
    keys = sorted(verdicts[0])
    same = sum(1 for k in keys if all(v.get(k) == verdicts[0][k] for v in verdicts[1:]))
    out = {"repeats": repeats, "samples": len(keys), "identical": same, "wall_seconds": walls,
           "differences": [str(k) for k in keys if not all(v.get(k) == verdicts[0][k] for v in verdicts[1:])]}
    print("\nStability: the example evaluation %d times (strict): identical verdicts for %s samples; runs took %s s"
          % (repeats, pct(same, len(keys)), ", ".join("%.0f" % w for w in walls)))
    for k in out["differences"]:
        print("  differs:", k, [v.get(eval(k)) for v in verdicts])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer trials (A/A 10, known 5 per level, stability 2)")
    ap.add_argument("--aa-trials", type=int, default=40)
    ap.add_argument("--known-trials", type=int, default=20)
    ap.add_argument("--known-levels", type=float, nargs="+", default=[1.10, 1.30, 2.0],
                    help="true speedups of the known-speedup check")
    ap.add_argument("--timer-runs", type=int, default=30)
    ap.add_argument("--stability-runs", type=int, default=3)
    ap.add_argument("--only", choices=["aa", "known", "timer", "stability"], action="append")
    ap.add_argument("--out", default=None, help="where to write validation.json (default: the work folder)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    if args.quick:
        args.aa_trials, args.known_trials, args.stability_runs = 10, 5, 2
    only = set(args.only or ["aa", "known", "timer", "stability"])
    work = tempfile.mkdtemp(prefix="harness-validate.")
    print(f"work folder: {work}")
    out = {"machine": {"nproc": os.cpu_count()}}
    try:
        if "timer" in only:
            out["timer_bias"] = timer_bias(work, args.timer_runs)
        if "aa" in only:
            out["aa"] = aa(work, args.aa_trials)
        if "known" in only:
            out["known"] = known(work, args.known_trials, tuple(args.known_levels))
        if "stability" in only:
            out["stability"] = stability(work, args.stability_runs)
    finally:
        path = args.out or os.path.join(work, "validation.json")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        print(f"\nfigures written to {path}")
        if not args.keep and args.out:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
