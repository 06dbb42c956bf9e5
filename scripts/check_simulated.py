#!/usr/bin/env python3
"""The simulated criterion against the clock on a dataset, with real containers.

    python3 scripts/check_simulated.py [--dataset tasks/_real] [--bin target/release/harness]
                                       [--criteria simulated strict] [--out DIR]

For every task: two samples, human's code in a tree that is not human's (the human patch
plus one unused new file, so it is counted or timed on its own, never shared), and a no-op
(the new file only). Each criterion runs once over the whole dataset; the table gives, per
task, human's speedup over base, the sample's speedup and verdicts, and each run's wall time.
Targets (issue 20): human's code opt_commit yes on at least 90% of the tasks whose human
speedup is at least 1.35x; the no-op never optimised.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEW_FILE = ("diff --git a/harness_check_note.txt b/harness_check_note.txt\nnew file mode 100644\n"
            "--- /dev/null\n+++ b/harness_check_note.txt\n@@ -0,0 +1 @@\n+unused\n")


def predictions(dataset, path):
    rows = []
    for t in sorted(os.listdir(dataset)):
        human = os.path.join(dataset, t, "human.patch")
        if not os.path.isfile(human):
            continue
        with open(human) as f:
            patch = f.read()
        if not patch.endswith("\n"):
            patch += "\n"
        rows.append({"instance_id": t, "model_name_or_path": "check", "sample": 0,
                     "model_patch": patch + NEW_FILE})
        rows.append({"instance_id": t, "model_name_or_path": "check", "sample": 1,
                     "model_patch": NEW_FILE})
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return sorted({r["instance_id"] for r in rows})


def run(binary, dataset, preds, criterion, out):
    t = time.time()
    cmd = [binary, "opt-at-k", "--model", "check", "--k", "2", "--criterion", criterion,
           "--run-id", criterion, "--dataset", dataset, "--predictions", preds,
           "--results-dir", out, "-q"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.time() - t


def sample(out, criterion, task, s):
    with open(os.path.join(out, criterion, "check", task, str(s), "report.json")) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=os.path.join(ROOT, "tasks", "_real"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "harness"))
    ap.add_argument("--criteria", nargs="+", default=["simulated", "strict"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="harness-simulated.")
    os.makedirs(out, exist_ok=True)
    preds = os.path.join(out, "check.jsonl")
    tasks = predictions(args.dataset, preds)
    walls = {c: run(args.bin, args.dataset, preds, c, out) for c in args.criteria}
    report = {"walls": walls, "tasks": {}}
    print("| task | " + " | ".join(f"{c}: human/base, sample/base, HM, verdict; no-op" for c in args.criteria) + " |")
    print("|---|" + "---|" * len(args.criteria))
    for t in tasks:
        cells = []
        for c in args.criteria:
            h, n = sample(out, c, t, 0), sample(out, c, t, 1)
            st = h.get("opt_stats") or {}
            cell = (f"{st.get('gm_speedup_commit_base', 0):.2f}x, {st.get('gm_speedup_patch_base', 0):.2f}x, "
                    f"{st.get('hm_speedup_patch_commit', 0):.2f}, "
                    f"{'opt_commit' if h['opt_commit'] else ('inconclusive' if h['inconclusive'] else 'no')}; "
                    f"{'OPTIMISED' if n['opt_base'] else 'no'}")
            report["tasks"].setdefault(t, {})[c] = {"human_code": h, "no_op": n}
            cells.append(cell)
        print(f"| {t} | " + " | ".join(cells) + " |")
    print("\nwall time per criterion (whole dataset): " + ", ".join(f"{c} {w:.0f} s" for c, w in walls.items()))
    with open(os.path.join(out, "check_simulated.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(f"results: {out}")


if __name__ == "__main__":
    sys.exit(main())
