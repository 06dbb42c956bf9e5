#!/usr/bin/env python3
"""What gVisor (`runsc do`) would cost the code under test, beside the same command run
natively, in turns, the same hour: one of the designs issue 40 weighed for the sandbox.

    python3 scripts/gvisor_cost.py [--runs 10] [--runsc runsc]

Prints, per workload, the median seconds natively and under runsc and their ratio. The
workloads are what timed benchmarks do: pure computation, system calls, imports (files).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

WORKLOADS = {
    "start (true)": ["/bin/true"],
    "compute": ["python3", "-c", "sum(i * i for i in range(3_000_000))"],
    "stat x200k": ["python3", "-c", "import os\nfor _ in range(200_000): os.stat('/etc/hostname')"],
    "imports": ["python3", "-c", "import json, email.parser, http.client, xml.dom.minidom, sqlite3, decimal"],
}


def timed(argv):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--runsc", default="runsc")
    args = ap.parse_args()
    wrap = [args.runsc, "--network=none", "do"]
    out = {}
    for name, argv in WORKLOADS.items():
        native, gvisor = [], []
        for _ in range(args.runs):
            native.append(timed(argv))
            gvisor.append(timed(wrap + argv))
        n, g = statistics.median(native), statistics.median(gvisor)
        out[name] = {"native_s": round(n, 4), "runsc_s": round(g, 4), "ratio": round(g / n, 2)}
        print(f"{name:14} native {n:8.4f} s   runsc {g:8.4f} s   x{g / n:6.2f}", file=sys.stderr)
    version = subprocess.run([args.runsc, "--version"], capture_output=True, text=True).stdout
    print(json.dumps({"runsc": version.splitlines()[0] if version else None, "runs": args.runs, "workloads": out}, indent=1))


if __name__ == "__main__":
    main()
