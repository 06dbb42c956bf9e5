#!/usr/bin/env python3
"""A noisy neighbour: on every CPU, a process that alternates busy and idle spells of random
length (exponential, means --busy and --idle seconds), until stopped.

It makes a noisy hour on demand, so the measurement checks can be run on one: a bench
sharing a CPU with it loses about half of that CPU while a busy spell lasts, and spells of a
few tenths of a second (shorter than a round, longer than nothing) are the noise that made
real code look `inconclusive` on shared runners (issue 20). The hour it makes is reported
by the checks' own noise probe (fixed-loop CV), like any other hour.

    python3 scripts/noisy_neighbour.py [--busy 0.25] [--idle 0.5] [--seconds N]
"""
import argparse
import os
import random
import signal
import sys
import time


def spell(busy, idle, seed):
    rng = random.Random(seed)
    while True:
        end = time.perf_counter() + rng.expovariate(1 / busy)
        x = 0
        while time.perf_counter() < end:
            for i in range(2000):
                x = (x * 31 + i) & 0xFFFFFFFF
        time.sleep(rng.expovariate(1 / idle))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--busy", type=float, default=0.25, help="mean busy spell, seconds")
    ap.add_argument("--idle", type=float, default=0.5, help="mean idle spell, seconds")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long")
    args = ap.parse_args()
    children = []
    for cpu in sorted(os.sched_getaffinity(0)):
        pid = os.fork()
        if pid == 0:
            os.sched_setaffinity(0, {cpu})
            spell(args.busy, args.idle, cpu)
            os._exit(0)
        children.append(pid)

    def stop(*_):
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.seconds is not None:
        time.sleep(args.seconds)
        stop()
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
