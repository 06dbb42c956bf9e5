#!/usr/bin/env python3
"""Which measurement effort buys the most decision per second? Measured on real tasks.

For each task of tasks/_real (or --tasks), three variants are measured the way the harness
measures them (one pinned CPU, containers of the harness base image, rounds in a shuffled
order): base, human, and human's code again in its own containers ("human2", the
non-identical tree of issue 20). Every exec times the bench --reps times in a row, each in a
fresh process, and records each repetition's wall and CPU time.

From the same data every strategy is scored:

  single      the first repetition of each exec (one run per exec, as before)
  floor2/3    the fastest of the first 2 / 3 repetitions of each exec
  mean3       the mean of 3
  cpu1/cpu3f  CPU time (user+sys) of one repetition / the floor of 3

For each: the within-container spread (sd of log figure around its container's mean), the
between-container spread (sd of container means beyond what the within spread explains), the
seconds one figure costs (the exec's own overhead, measured, plus the repetitions), and from
these the standard error of the log ratio human2/human reachable with a 30 s budget per
variant over 5 containers: the smaller, the sooner a verdict is decided. The strategy with
the smallest is the one that buys the most decision per second.

    python3 scripts/probe_strategies.py [--rounds 12] [--containers 3] [--reps 3] [--noisy]

--noisy runs scripts/noisy_neighbour.py beside it (an emulated noisy hour; the hour's noise
is measured and printed either way).
"""
import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from validate_measurement import hour_noise  # noqa: E402

IMAGE = "harness-base:bookworm"
LABEL = "harness.probe=strategies"

DRIVER = r"""
import json, os, resource, subprocess, sys, time
reps, seed = int(sys.argv[1]), sys.argv[2]
cmd = sys.argv[3:]
env = dict(os.environ, HARNESS_BENCH_SEED=seed)
subprocess.run(["true"])
out = []
for _ in range(reps):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.append([wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)])
print(json.dumps(out))
"""


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def tree(task_dir, with_human, work):
    d = tempfile.mkdtemp(dir=work)
    sh("cp", "-r", os.path.join(task_dir, "repo", "."), d)
    if with_human:
        sh("git", "apply", os.path.join(task_dir, "human.patch"), cwd=d)
    return d


def start(tree_dir, cpuset):
    cid = sh("docker", "run", "-d", "--rm", "--network", "none", "--label", LABEL, "--cpuset-cpus", cpuset,
             "-v", f"{tree_dir}:/src:ro", IMAGE, "sh", "-c",
             "cp -r /src /testbed && sleep infinity").stdout.strip()
    return cid


def probe_task(task_dir, args, work):
    variants = {"base": False, "human": True, "human2": True}
    containers = {v: [start(tree(task_dir, h, work), args.cpuset) for _ in range(args.containers)]
                  for v, h in variants.items()}
    time.sleep(1)
    figures = {v: [] for v in variants}  # (container, [[wall, cpu] per rep], exec seconds)
    rng = random.Random(0)
    try:
        for rnd in range(args.rounds):
            order = list(variants)
            rng.shuffle(order)
            seed = str(rng.randrange(1 << 60))
            for v in order:
                c = rnd % args.containers
                t = time.perf_counter()
                out = sh("docker", "exec", "-w", "/testbed", containers[v][c], "python3", "-c", DRIVER,
                         str(args.reps), seed, "python3", "bench.py").stdout
                figures[v].append((c, json.loads(out), time.perf_counter() - t))
    finally:
        ids = [c for cs in containers.values() for c in cs]
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)
    return figures


STRATEGIES = {
    "single": (1, lambda reps: reps[0][0]),
    "floor2": (2, lambda reps: min(r[0] for r in reps[:2])),
    "floor3": (3, lambda reps: min(r[0] for r in reps[:3])),
    "mean3": (3, lambda reps: statistics.mean(r[0] for r in reps[:3])),
    "cpu1": (1, lambda reps: reps[0][1]),
    "cpu3f": (3, lambda reps: min(r[1] for r in reps[:3])),
}


def components(execs, fig):
    """(within sd, between sd) of log figures, one-way random effects by container."""
    by_c = {}
    for c, reps, _ in execs:
        by_c.setdefault(c, []).append(math.log(fig(reps)))
    within = [x - statistics.mean(xs) for xs in by_c.values() for x in xs]
    dof = sum(len(xs) - 1 for xs in by_c.values())
    s2w = sum(w * w for w in within) / max(dof, 1)
    means = [statistics.mean(xs) for xs in by_c.values()]
    n = statistics.mean(len(xs) for xs in by_c.values())
    s2b = max(0.0, (statistics.variance(means) if len(means) > 1 else 0.0) - s2w / n)
    return math.sqrt(s2w), math.sqrt(s2b)


def score(figures, budget_s=30.0, containers=5):
    """Per strategy: spreads, seconds per figure, and the reachable standard error of the log
    ratio of two variants with the same code (human2 / human)."""
    run_s = statistics.median(r[0] for v in figures.values() for _, reps, _ in v for r in reps)
    exec_s = statistics.median(t for v in figures.values() for _, _, t in v)
    reps = len(next(iter(figures.values()))[0][1])
    overhead = max(0.0, exec_s - reps * run_s)
    out = {"run_s": run_s, "exec_overhead_s": overhead, "strategies": {}}
    for name, (r, fig) in STRATEGIES.items():
        comps = [components(figures[v], fig) for v in ("human", "human2")]
        sw = math.sqrt(statistics.mean(c[0] ** 2 for c in comps))
        sb = math.sqrt(statistics.mean(c[1] ** 2 for c in comps))
        cost = overhead + r * run_s
        n = max(containers, budget_s / cost)
        se = math.sqrt(2 * (sb ** 2 / containers + sw ** 2 / n))
        out["strategies"][name] = {"within_sd": sw, "between_sd": sb, "seconds_per_figure": cost,
                                   "figures_in_budget": n, "se_log_ratio": se}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="+", default=None)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--containers", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpuset", default="1")
    ap.add_argument("--noisy", action="store_true", help="run scripts/noisy_neighbour.py beside it")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    tasks = [os.path.abspath(t) for t in args.tasks] if args.tasks else sorted(os.path.join(ROOT, "tasks", "_real", d) for d in os.listdir(
        os.path.join(ROOT, "tasks", "_real")) if os.path.isdir(os.path.join(ROOT, "tasks", "_real", d)))
    neighbour = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "noisy_neighbour.py")]) \
        if args.noisy else None
    result = {"noisy_neighbour": args.noisy, "tasks": {}}
    try:
        result["hour_noise_before"] = hour_noise()
        with tempfile.TemporaryDirectory() as work:
            for t in tasks:
                figures = probe_task(t, args, work)
                s = score(figures)
                result["tasks"][os.path.basename(t)] = {"score": s, "figures": figures}
                print(f"{os.path.basename(t)}: run {s['run_s']:.2f} s, exec overhead {s['exec_overhead_s']:.2f} s")
                for name, st in s["strategies"].items():
                    print(f"  {name:7s} within sd {st['within_sd']:.3f}  between sd {st['between_sd']:.3f}  "
                          f"{st['seconds_per_figure']:.2f} s/figure  se(log ratio, 30 s x 5 containers) "
                          f"{st['se_log_ratio']:.4f}")
        result["hour_noise_after"] = hour_noise()
    finally:
        if neighbour:
            neighbour.terminate()
            neighbour.wait()
    cv = max(result["hour_noise_before"]["cv"], result["hour_noise_after"]["cv"])
    print(f"hour noise: fixed-loop CV {result['hour_noise_before']['cv']:.1%} before, "
          f"{result['hour_noise_after']['cv']:.1%} after ({'noisy' if cv >= 0.15 else 'quiet'})")
    ranks = {}
    for t in result["tasks"].values():
        for name, st in t["score"]["strategies"].items():
            ranks.setdefault(name, []).append(st["se_log_ratio"])
    print("median se(log ratio) over tasks:", ", ".join(
        f"{k} {statistics.median(v):.4f}" for k, v in sorted(ranks.items(), key=lambda kv: statistics.median(kv[1]))))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
