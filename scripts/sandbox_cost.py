#!/usr/bin/env python3
"""What a fresh sandbox per timed run costs, for the two designs weighed in issue 27, on this
machine, in one run (medians of repeated calls; the same image, flags and command for all):

  exec            `docker exec C python3 -c pass` (as the sandbox user): no sandbox
  namespaces      `docker exec C harness-supervisor run -- python3 -c pass`: the chosen
                  design (new mount, IPC and PID namespaces, an overlay over every
                  writable mount, the init, the drop to the user)
  setup           the supervisor's own report of the sandbox's making (setup_ns)
  container       `docker run --rm IMG python3 -c pass`: a fresh container per run
  commit          `docker commit C` of a container after an install-like step (the other
                  design needs one per container)
  cold start      python3 -c pass timed inside a new container, first vs second start

    python3 scripts/sandbox_cost.py [--image IMG] [--runs 20] [--json OUT]

IMG defaults to the newest harness task image of primes-sieve (run the README's first
command once to build it). The supervisor is this checkout's build
(target/supervisor/x86_64-unknown-linux-gnu/release/harness-supervisor).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUPERVISOR = os.path.join(ROOT, "target", "supervisor", "x86_64-unknown-linux-gnu", "release",
                          "harness-supervisor")
CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "SYS_ADMIN", "SYS_CHROOT", "NET_ADMIN"]
FLAGS = (["--cap-drop", "ALL"] + [x for c in CAPS for x in ("--cap-add", c)]
         + ["--security-opt", "no-new-privileges", "--security-opt", "apparmor=unconfined",
            "--network", "none", "--init", "--label", "org.harness.cost-probe=true",
            "--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777", "--tmpfs", "/run/harness:rw,noexec,mode=0755"])


def sh(*args, check=True):
    return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def timed(argv, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t)
    return out


def newest_image():
    names = sh("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "harness-task/primes-sieve").stdout.split()
    if not names:
        sys.exit("no harness-task/primes-sieve image: run the README's first command once")
    return names[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    image = args.image or newest_image()
    cid = sh("docker", "run", "-d", *FLAGS, image, "sleep", "infinity").stdout.strip()
    figures = {"image": image}
    try:
        sh("docker", "exec", cid, "mkdir", "-p", "/opt/harness/bin")
        sh("docker", "cp", SUPERVISOR, cid + ":/opt/harness/bin/harness-supervisor")
        user = ["docker", "exec", "--user", "10001", "-w", "/testbed", cid]
        sup = ["docker", "exec", "-w", "/testbed", cid, "/opt/harness/bin/harness-supervisor", "run"]
        timed(user + ["python3", "-c", "pass"], 3)
        timed(sup + ["--", "python3", "-c", "pass"], 3)
        exec_s, ns_s = [], []
        for _ in range(args.runs):  # interleaved, so drift hits both alike
            exec_s += timed(user + ["python3", "-c", "pass"], 1)
            ns_s += timed(sup + ["--", "python3", "-c", "pass"], 1)
        figures["exec_s"] = statistics.median(exec_s)
        figures["namespaces_s"] = statistics.median(ns_s)
        setups = []
        for _ in range(args.runs):
            out = sh(*sup, "--", "true").stdout.strip().splitlines()[-1]
            setups.append(json.loads(out)["fresh"]["setup_ns"] / 1e9)
        figures["setup_s"] = statistics.median(setups)
        runs = max(5, args.runs // 2)
        figures["container_s"] = statistics.median(timed(
            ["docker", "run", "--rm", *FLAGS, "--user", "10001", "-w", "/testbed", image, "python3", "-c", "pass"], runs))
        sh("docker", "exec", cid, "sh", "-c", "cd /testbed && python3 -c 'import primes' && mkdir -p build && "
           "head -c 20000000 /dev/urandom > build/blob")
        commits = []
        for i in range(3):
            t = time.perf_counter()
            ref = sh("docker", "commit", cid).stdout.strip()
            commits.append(time.perf_counter() - t)
            sh("docker", "rmi", ref, check=False)
        figures["commit_s"] = statistics.median(commits)
        cold = sh("docker", "run", "--rm", *FLAGS, image, "python3", "-c",
                  "import subprocess, time\n"
                  "def one():\n    t = time.perf_counter(); subprocess.run(['python3', '-c', 'pass']); return time.perf_counter() - t\n"
                  "print(one(), one())").stdout.split()
        figures["cold_first_start_s"], figures["cold_second_start_s"] = float(cold[0]), float(cold[1])
    finally:
        sh("docker", "rm", "-f", cid, check=False)
    figures["namespaces_added_s"] = figures["namespaces_s"] - figures["exec_s"]
    figures["container_added_s"] = figures["container_s"] - figures["exec_s"]
    for k, v in figures.items():
        print("%-22s %s" % (k, "%.4f" % v if isinstance(v, float) else v))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
