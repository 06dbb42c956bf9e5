#!/usr/bin/env python3
"""What a fresh sandbox per timed run costs on this machine, in one run (medians of repeated
calls, interleaved so the hour's drift hits each alike; the same image and command for all):

  exec            `docker exec -u 10001 C python3 -c pass`: no sandbox
  namespaces      `docker exec C harness-supervisor run ... -- python3 -c pass`: this
                  checkout's design (issue 40: a user namespace owning new mount and IPC
                  namespaces, layers over what the user may write, the rest read-only, in a
                  container with Docker's default capabilities or fewer and the harness's
                  seccomp profile)
  setup           the supervisor's own report of the sandbox's making (setup_ns)
  container       `docker run --rm IMG python3 -c pass`: a fresh container per run
  commit          `docker commit C` of a container after an install-like step (the design
                  of a fresh container per run needs one per container)

With --old-supervisor PATH (the supervisor of an earlier build, e.g. 37adbf2's), the design
of issue 27 is measured beside it in the same run: mount, IPC and PID namespaces made by root
holding SYS_ADMIN (and SYS_CHROOT, NET_ADMIN) with AppArmor turned off, an overlay over
every writable mount.

    python3 scripts/sandbox_cost.py [--image IMG] [--runs 20] [--old-supervisor PATH] [--json OUT]

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
COMMON = ["--security-opt", "no-new-privileges", "--network", "none", "--init",
          "--label", "org.harness.cost-probe=true",
          "--tmpfs", "/tmp:rw,nosuid,nodev,noatime,mode=1777",
          "--tmpfs", "/run/harness:rw,noexec,noatime,mode=0755"]
NEW_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "SETFCAP", "KILL", "SYS_CHROOT"]
OLD_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "SYS_ADMIN", "SYS_CHROOT",
            "NET_ADMIN"]


def flags(design):
    caps = NEW_CAPS if design == "new" else OLD_CAPS
    out = ["--cap-drop", "ALL"] + [x for c in caps for x in ("--cap-add", c)] + COMMON
    if design == "new":
        out += ["--security-opt", "seccomp=" + os.path.join(ROOT, "container", "seccomp.json")]
    else:
        out += ["--security-opt", "apparmor=unconfined"]
    return out


def run_args(design):
    if design == "new":
        return ["--layer", "/testbed", "--layer", "/home/harnessrun"]
    return []


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


def start(image, design, supervisor):
    cid = sh("docker", "run", "-d", *flags(design), image, "sleep", "infinity").stdout.strip()
    sh("docker", "exec", cid, "mkdir", "-p", "/opt/harness/bin")
    sh("docker", "cp", supervisor, cid + ":/opt/harness/bin/harness-supervisor")
    return cid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--old-supervisor")
    ap.add_argument("--json")
    args = ap.parse_args()
    image = args.image or newest_image()
    designs = [("new", SUPERVISOR)] + ([("old", args.old_supervisor)] if args.old_supervisor else [])
    cids = {}
    figures = {"image": image}
    try:
        for design, supervisor in designs:
            cids[design] = start(image, design, supervisor)
        user = {d: ["docker", "exec", "--user", "10001", "-w", "/testbed", c] for d, c in cids.items()}
        sup = {d: ["docker", "exec", "-w", "/testbed", c, "/opt/harness/bin/harness-supervisor", "run"]
               + run_args(d) for d, c in cids.items()}
        for d in cids:
            timed(user[d] + ["python3", "-c", "pass"], 3)
            timed(sup[d] + ["--", "python3", "-c", "pass"], 3)
        samples = {d: {"exec": [], "ns": [], "setup": []} for d in cids}
        for _ in range(args.runs):  # interleaved, so drift hits every design alike
            for d in cids:
                samples[d]["exec"] += timed(user[d] + ["python3", "-c", "pass"], 1)
                samples[d]["ns"] += timed(sup[d] + ["--", "python3", "-c", "pass"], 1)
                out = sh(*sup[d], "--", "true").stdout.strip().splitlines()[-1]
                samples[d]["setup"].append(json.loads(out)["fresh"]["setup_ns"] / 1e9)
        for d, s in samples.items():
            figures[d + "_exec_s"] = statistics.median(s["exec"])
            figures[d + "_namespaces_s"] = statistics.median(s["ns"])
            figures[d + "_setup_s"] = statistics.median(s["setup"])
            figures[d + "_namespaces_added_s"] = figures[d + "_namespaces_s"] - figures[d + "_exec_s"]
        runs = max(5, args.runs // 2)
        figures["container_s"] = statistics.median(timed(
            ["docker", "run", "--rm", *flags("new"), "--user", "10001", "-w", "/testbed", image,
             "python3", "-c", "pass"], runs))
        figures["container_added_s"] = figures["container_s"] - figures["new_exec_s"]
        cid = cids["new"]
        sh("docker", "exec", cid, "sh", "-c", "cd /testbed && python3 -c 'import primes' && mkdir -p build && "
           "head -c 20000000 /dev/urandom > build/blob")
        commits = []
        for _ in range(3):
            t = time.perf_counter()
            ref = sh("docker", "commit", cid).stdout.strip()
            commits.append(time.perf_counter() - t)
            sh("docker", "rmi", ref, check=False)
        figures["commit_s"] = statistics.median(commits)
    finally:
        for cid in cids.values():
            sh("docker", "rm", "-f", cid, check=False)
    for k, v in figures.items():
        print("%-26s %s" % (k, "%.4f" % v if isinstance(v, float) else v))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
