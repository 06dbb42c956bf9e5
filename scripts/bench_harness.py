#!/usr/bin/env python3
"""The harness's own speed, measured in one run on this machine (issue 12, item 8).

Prints four figures, with the targets they are held against:

1. Per-sample overhead before measurement (container, apply, test) on a trivial task,
   against the floor of raw `docker run --rm` of the same image doing the same work
   (target: at most 1.5x the floor).
2. The re-run of a finished 50-task dataset (target: under 2 s, no container started).
3. Peak RSS of the harness over 2,000 samples (target: under 150 MB).
4. Wall time of the 4 shipped example tasks (README's first command), cold (their images
   removed first) and warm (images cached, results not).

Timings on a shared machine are noisy: every figure is a median of repeated runs or a single
wall time, and is printed with what it was measured against in the same run.

Usage: python3 scripts/bench_harness.py [--skip-examples] [--tasks 50] [--samples 40]
       [--json OUT.json] [--bin PATH]

--bin measures another build of the harness (an older commit's release binary, say) instead
of building this checkout's, so two builds are compared on the same machine in the same hour.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "harness"

SLOW = "def work(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n"
FAST = "def work(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n"
TEST = "import mod\nassert mod.work(10) == 285\nprint('ok')\n"
BENCH = "import mod\nprint(mod.work(20000))\n"


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def diff(path, old, new):
    minus = "".join(f"-{l}\n" for l in old.splitlines())
    plus = "".join(f"+{l}\n" for l in new.splitlines())
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -1,{len(old.splitlines())} +1,{len(new.splitlines())} @@\n{minus}{plus}")


def make_task(root, tid):
    d = root / tid
    (d / "repo").mkdir(parents=True, exist_ok=True)
    (d / "repo" / "mod.py").write_text(SLOW)
    (d / "repo" / "test_mod.py").write_text(TEST)
    (d / "repo" / "bench.py").write_text(BENCH)
    (d / "human.patch").write_text(diff("mod.py", SLOW, FAST))
    (d / "task.toml").write_text(
        'protected = ["bench.py", "test_*.py"]\n[source]\npath = "repo"\n'
        '[human]\npatch = "human.patch"\n[test]\ncommand = "python3 test_mod.py"\ntimeout = 60\n'
        '[[bench]]\nname = "work"\ncommand = "python3 bench.py"\nwarmups = 0\nruns = 2\n'
        'timeout = 30\n[resources]\ncpus = 1\nmemory = "256m"\npids = 128\n')


def write_predictions(path, rows):
    with open(path, "w") as f:
        for tid, patch in rows:
            f.write(json.dumps({"instance_id": tid, "model_name_or_path": "bench",
                                "model_patch": patch}) + "\n")


def harness(args, **kw):
    return subprocess.run([str(BIN), *args], cwd=ROOT, capture_output=True, text=True, **kw)


def timed_harness(args):
    """Wall seconds, peak RSS in MB (GNU time), and the completed process."""
    t = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-v", str(BIN), *args], cwd=ROOT,
                       capture_output=True, text=True)
    wall = time.monotonic() - t
    rss_kb = next((int(l.split(":")[1]) for l in p.stderr.splitlines()
                   if "Maximum resident set size" in l), 0)
    return wall, rss_kb / 1024, p


def check(p, what):
    if p.returncode != 0:
        say(p.stdout[-3000:])
        say(p.stderr[-3000:])
        sys.exit(f"{what} failed with exit code {p.returncode}")


def containers_created(since, until, run_id):
    out = subprocess.run(
        ["docker", "events", "--since", str(since), "--until", str(until), "--filter",
         "type=container", "--filter", "event=create", "--filter",
         f"label=org.harness.run={run_id}", "--format", "{{.ID}}"],
        capture_output=True, text=True)
    return len([l for l in out.stdout.splitlines() if l.strip()])


def task_image(tid):
    out = subprocess.run(["docker", "images", "--filter", f"label=org.harness.instance={tid}",
                          "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True)
    tags = [l for l in out.stdout.splitlines() if l.strip() and "<none>" not in l]
    return tags[0] if tags else None


def overhead(work):
    """Figure 1: what a sample costs before its measurement (container, apply, test).

    The harness prepares a task's variants (base, human, K samples) concurrently, so the
    figure is the wall time from the start of the run to the start of the measurement,
    divided by the number of variants, against two floors doing the same work with raw
    `docker run --rm -i IMAGE sh -c 'patch && test'`: one at a time (median of 8), and as
    many at once as the harness runs (their wall time divided by their number). The
    per-sample latency the report.json files give is printed too.
    """
    ds = work / "overhead-ds"
    make_task(ds, "trivial")
    human = diff("mod.py", SLOW, FAST)
    k = 8
    variants = k + 2
    # Distinct trees, so every sample gets its own container, apply and test.
    rows = [("trivial", diff("mod.py", SLOW, FAST + "#" * (i + 1) + "\n")) for i in range(k)]
    preds = work / "overhead.jsonl"
    write_predictions(preds, rows)
    args = ["opt-at-k", "--model", "bench", "--k", str(k), "--predictions", str(preds),
            "--dataset", str(ds), "--results-dir", str(work / "out"),
            "--min-rounds", "1", "--max-rounds", "1", "--replicas", "1", "-v"]
    # Once to build the image, then timed runs in fresh run folders.
    check(harness(args + ["--run-id", "overhead-warm"]), "the overhead run")
    prepare = []
    latency = []
    for rep in range(3):
        run_id = f"overhead{rep}"
        p = harness(args + ["--run-id", run_id], env={**os.environ, "CI": "1"})
        check(p, "the overhead run")
        t_measure = next(float(l.split("]")[0].strip("[ s"))
                         for l in p.stderr.splitlines() if l.endswith("/all: measure"))
        prepare.append(t_measure / variants)
        for i in range(k):
            r = json.loads((work / "out" / run_id / "bench/trivial" / str(i) / "report.json")
                           .read_text())
            s = r["seconds"]
            latency.append(s["container"] + s["apply"] + s["test"])
    image = task_image("trivial")
    if not image:
        sys.exit("the trivial task's image is missing")
    cmd = ["docker", "run", "--rm", "-i", "-w", "/testbed", image, "sh", "-c",
           "patch -p1 -s && python3 test_mod.py"]

    def one():
        t = time.monotonic()
        subprocess.run(cmd, input=human, capture_output=True, text=True, check=True)
        return time.monotonic() - t

    sequential = statistics.median(one() for _ in range(8))
    parallel = []
    for _ in range(3):
        t = time.monotonic()
        procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, text=True)
                 for _ in range(variants)]
        for pr in procs:
            pr.communicate(human)
        parallel.append((time.monotonic() - t) / variants)
    per_variant = statistics.median(prepare)
    return {
        "variants": variants,
        "harness_per_variant_s": round(per_variant, 3),
        "docker_run_sequential_s": round(sequential, 3),
        "docker_run_concurrent_per_run_s": round(statistics.median(parallel), 3),
        "ratio_vs_sequential": round(per_variant / sequential, 2),
        "ratio_vs_concurrent": round(per_variant / statistics.median(parallel), 2),
        "sample_latency_s_median": round(statistics.median(latency), 3),
    }


def dataset_rerun(work, n_tasks, k):
    """Figures 2 and 3: a dataset of n_tasks x k samples, run once (peak RSS), then again."""
    ds = work / "big-ds"
    for i in range(n_tasks):
        make_task(ds, f"t{i:03d}")
    human = diff("mod.py", SLOW, FAST)
    # Sample 0 is the human patch (its tree is shared with human's: no extra bench); the
    # others touch the protected bench.py and are rejected before any container.
    reject = diff("bench.py", BENCH, BENCH + "# faster\n")
    rows = []
    for i in range(n_tasks):
        rows.append((f"t{i:03d}", human))
        rows.extend((f"t{i:03d}", reject) for _ in range(k - 1))
    preds = work / "big.jsonl"
    write_predictions(preds, rows)
    args = ["opt-at-k", "--model", "bench", "--k", str(k), "--predictions", str(preds),
            "--dataset", str(ds), "--results-dir", str(work / "out"), "--run-id", "big",
            "--min-rounds", "1", "--max-rounds", "1", "--replicas", "1", "-q", "--json"]
    say(f"  first run: {n_tasks} tasks x {k} samples ({n_tasks * k} samples) ...")
    first_wall, first_rss, p = timed_harness(args)
    check(p, "the first run of the big dataset")
    since = int(time.time())
    time.sleep(1.1)
    say("  the same command again (everything saved) ...")
    rerun = []
    for _ in range(3):
        wall, rss, p = timed_harness(args)
        check(p, "the re-run of the big dataset")
        rerun.append((wall, rss))
    time.sleep(1.1)
    until = int(time.time())
    started = containers_created(since, until, "big")
    evaluated = json.loads(p.stdout).get("invocation", {}).get("evaluated_samples")
    return {
        "tasks": n_tasks,
        "samples": n_tasks * k,
        "first_run_wall_s": round(first_wall, 1),
        "first_run_peak_rss_mb": round(first_rss, 1),
        "rerun_wall_s_median_of_3": round(statistics.median(w for w, _ in rerun), 2),
        "rerun_peak_rss_mb": round(max(r for _, r in rerun), 1),
        "rerun_containers_started": started,
        "rerun_samples_evaluated": evaluated,
    }


EXAMPLES = ["dedupe-list", "pair-sum", "primes-sieve", "word-freq"]


def examples(work):
    """Figure 4: README's first command, cold (example images removed) and warm."""
    args = ["opt-at-k", "--model", "demo-agent", "--predictions",
            "tasks/_predictions/demo-agent.jsonl", "--k", "3", "-q"]
    for tid in EXAMPLES:
        out = subprocess.run(["docker", "images", "-q", "--filter",
                              f"label=org.harness.instance={tid}"], capture_output=True, text=True)
        for image in set(out.stdout.split()):
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
    out = {}
    for kind in ("cold", "warm"):
        say(f"  examples, {kind} ...")
        wall, rss, p = timed_harness(args + ["--results-dir", str(work / f"examples-{kind}")])
        check(p, f"the examples ({kind})")
        out[f"{kind}_wall_s"] = round(wall, 1)
        out[f"{kind}_peak_rss_mb"] = round(rss, 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-examples", action="store_true")
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--samples", type=int, default=40, help="samples per task")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--bin", type=Path, help="the harness binary to measure (default: build this one)")
    a = ap.parse_args()
    global BIN
    if a.bin:
        BIN = a.bin.resolve()
    else:
        say("building the release binary ...")
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    if not shutil.which("/usr/bin/time"):
        sys.exit("GNU time (/usr/bin/time) is needed for peak RSS: apt-get install time")
    results = {}
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        work = Path(tmp)
        say("1/4 per-sample overhead against docker run --rm ...")
        results["overhead"] = overhead(work)
        say("2-3/4 a finished dataset re-run, and peak RSS ...")
        results["dataset"] = dataset_rerun(work, a.tasks, a.samples)
        if not a.skip_examples:
            say("4/4 the shipped examples, cold and warm ...")
            results["examples"] = examples(work)
    o, d = results["overhead"], results["dataset"]
    print("figure                                          measured                       target")
    print(f"before measurement, per variant ({o['variants']} at once)     "
          f"{o['harness_per_variant_s']:.2f} s; docker run --rm: "
          f"{o['docker_run_sequential_s']:.2f} s one at a time "
          f"({o['ratio_vs_sequential']:.2f}x), {o['docker_run_concurrent_per_run_s']:.2f} s "
          f"each {o['variants']} at once ({o['ratio_vs_concurrent']:.2f}x)   <= 1.5x   "
          f"{'yes' if o['ratio_vs_concurrent'] <= 1.5 else 'NO'}")
    print(f"  (a sample's own container+apply+test, overlapping the others: "
          f"{o['sample_latency_s_median']:.2f} s)")
    ok2 = d["rerun_wall_s_median_of_3"] < 2 and d["rerun_containers_started"] == 0
    print(f"re-run of a finished {d['tasks']}-task dataset             "
          f"{d['rerun_wall_s_median_of_3']:.2f} s, {d['rerun_containers_started']} containers   "
          f"< 2 s, 0   {'yes' if ok2 else 'NO'}")
    rss = max(d["first_run_peak_rss_mb"], d["rerun_peak_rss_mb"])
    print(f"peak RSS over {d['samples']} samples                    {rss:.0f} MB"
          f"              < 150 MB  {'yes' if rss < 150 else 'NO'}")
    if "examples" in results:
        e = results["examples"]
        print(f"4 shipped examples (K=3), cold / warm          {e['cold_wall_s']:.0f} s / "
              f"{e['warm_wall_s']:.0f} s")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
