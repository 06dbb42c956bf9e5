#!/usr/bin/env python3
"""The channel battery (tests/fixtures/channels/battery.py) channel by channel: one task per
channel, whose test and bench leave state through that channel and look for what an earlier
run left. Runs `harness opt-at-k` once over all of them and prints, per channel, what the
timed runs saw:

    carried   a later run saw the state (the channel is open)
    refused   the harness saw a change and failed the run (closed by a check, after the fact)
    blocked   the kernel refused to make it (closed before it opens)
    closed    made, and no later run saw it

    python3 scripts/channel_battery.py [--harness target/release/harness] [--keep DIR]
                                       [--json OUT] [--combined] [CHANNEL...]

With --combined, one task tries every channel at once (what tests/channels.rs runs): one
row, `closed` when no timed run saw anything, with the channels the kernel refused.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATTERY = os.path.join(ROOT, "tests", "fixtures", "channels", "battery.py")

TASK_TOML = """protected = ["battery.py"]
[source]
path = "repo"
[human]
patch = "human.patch"
[install]
commands = ["python3 battery.py --install"]
timeout = 60
[test]
command = "python3 battery.py {channels}"
timeout = 60
[[bench]]
name = "battery"
command = "python3 battery.py {channels}"
warmups = 1
runs = 3
timeout = 60
[resources]
cpus = 1
memory = "512m"
pids = 128
"""


def new_file(path, text):
    lines = text.splitlines()
    body = "".join("+" + line + "\n" for line in lines)
    return ("diff --git a/{p} b/{p}\nnew file mode 100644\n--- /dev/null\n+++ b/{p}\n"
            "@@ -0,0 +1,{n} @@\n{body}").format(p=path, n=len(lines), body=body)


def make_task(ds, task_id, channels):
    repo = os.path.join(ds, task_id, "repo")
    os.makedirs(os.path.join(repo, "battery_dir"))
    os.makedirs(os.path.join(repo, "battery_refdir"))
    shutil.copy(BATTERY, os.path.join(repo, "battery.py"))
    files = {
        "battery_mod.py": "MARKER = 0\n",
        "battery_data.txt": "data\n",
        "battery_atime.txt": "read by the battery alone\n",
        "battery_reference.txt": "read by no run\n",
        "battery_dir/.keep": "",
        "battery_refdir/.keep": "",
    }
    for name, text in files.items():
        with open(os.path.join(repo, name), "w") as f:
            f.write(text)
    with open(os.path.join(ds, task_id, "task.toml"), "w") as f:
        f.write(TASK_TOML.format(channels=" ".join(channels)))
    with open(os.path.join(ds, task_id, "human.patch"), "w") as f:
        f.write(new_file("human.txt", "the human's note"))
    return {"instance_id": task_id, "model_name_or_path": "battery",
            "model_patch": new_file("sample.txt", "the sample's note")}


def classify(report):
    detail = report.get("detail") or ""
    status = report.get("status")
    if "carried:" in detail:
        return "carried", detail
    if status in ("base_failed", "test_failed") and detail:
        return "refused", detail
    if status == "passed":
        return "closed", ""
    return "other", "%s: %s" % (status, detail)


def test_output(folder):
    """The sample's test output (the battery's first run, in the test phase)."""
    try:
        with open(os.path.join(folder, "test_output.txt")) as f:
            return f.read()
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness", default=os.path.join(ROOT, "target", "release", "harness"))
    ap.add_argument("--keep")
    ap.add_argument("--json")
    ap.add_argument("--combined", action="store_true")
    ap.add_argument("channels", nargs="*")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(BATTERY))
    import battery  # noqa: E402  (the channel names only; nothing runs on the host)
    channels = args.channels or list(battery.CHANNELS)
    work = args.keep or tempfile.mkdtemp(prefix="battery-")
    ds = os.path.join(work, "ds")
    os.makedirs(ds, exist_ok=True)
    groups = [("all", channels)] if args.combined else [(c, [c]) for c in channels]
    preds = [make_task(ds, "ch-" + name, group) for name, group in groups]
    with open(os.path.join(work, "preds.jsonl"), "w") as f:
        for p in preds:
            f.write(json.dumps(p) + "\n")
    cmd = [args.harness, "opt-at-k", "--model", "battery", "--k", "1", "--dataset", ds,
           "--predictions", os.path.join(work, "preds.jsonl"), "--results-dir",
           os.path.join(work, "out"), "--run-id", "battery", "--replicas", "1",
           "--min-rounds", "3", "--max-rounds", "3", "-q"]
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    rows = []
    for c, _ in groups:
        folder = os.path.join(work, "out", "battery", "battery", "ch-" + c, "0")
        path = os.path.join(folder, "report.json")
        try:
            with open(path) as f:
                report = json.load(f)
        except OSError as e:
            rows.append({"channel": c, "outcome": "missing", "detail": str(e)})
            continue
        outcome, detail = classify(report)
        blocked = re.search(r"blocked: ([^\n|]*)", test_output(folder))
        blocked = [b.strip() for b in blocked.group(1).split(",")] if blocked else []
        if c in blocked and outcome == "closed":
            outcome = "blocked"
        rows.append({"channel": c, "outcome": outcome, "detail": detail[:300],
                     "blocked": blocked, "status": report.get("status")})
    width = max(len(r["channel"]) for r in rows)
    for r in rows:
        print("%-*s  %-8s  %s" % (width, r["channel"], r["outcome"], r["detail"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
