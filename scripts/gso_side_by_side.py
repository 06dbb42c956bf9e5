#!/usr/bin/env python3
"""GSO's own harness and this one on the same faithful GSO images with the same predictions.

    target/gso-venv/bin/python scripts/gso_side_by_side.py [--out DIR] [--rows tasks/_gso/rows.jsonl]

The images come from scripts/gso_images.py. For each row, three rollouts: the human fix
(`gt_diff`), a no-op (a new notes file) and a slower patch (the row's API wrapped to do its
work twice). GSO's `run_evaluation.main` (gsobench 0.1.9) grades each rollout against the
same Docker engine, as root with its eval.sh, five runs of each test per variant; then
`harness opt-at-k` (default strict criterion, intervals) runs the same predictions on the
same images through `tasks import-gso`, and `harness report --criterion gso` regrades them
under GSO's rule. The table holds, per instance and rollout: each harness's status, GSO's
GM speedup over base and HM over human (means of its five runs), ours with 95% intervals,
whether GSO's figure is inside ours, each verdict, and each harness's wall time.

Two things of GSO's are changed for this machine, both printed: the origin its eval.sh
fetches (`GSOInstance.repo_url`, GitHub) is the image's local bundle, and its
`cleanup_docker`, which stops and removes every container on the engine, only removes the
containers GSO made (`gso.eval.*`).

Run it alone on the engine: both harnesses time code.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import docker

import gso.harness.run_evaluation as gso_run
from gso.data.dataset import GSOInstance

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "target" / "release" / "harness"

# The API each row names, as (module file, function) to wrap for the slower rollout.
SLOW = {
    "tornado.httputil.parse_cookie": ("tornado/httputil.py", "parse_cookie"),
    "tornado.escape.xhtml_escape": ("tornado/escape.py", "xhtml_escape"),
    "pydantic.create_model": ("pydantic/main.py", "create_model"),
}


def gso_only_cleanup(client):
    """GSO's cleanup_docker, limited to the containers GSO made."""
    for c in client.containers.list(all=True):
        if c.name.startswith("gso.eval."):
            try:
                c.remove(force=True)
            except Exception as e:  # noqa: BLE001 - GSO's own handling: report and go on
                print(f"Failed to remove container {c.name}: {e}")


def image_tail(image, path, n=3):
    out = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "tail", "-n", str(n),
                          f"/testbed/{path}"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def slower_patch(row):
    path, func = SLOW[row["api"]]
    inst = GSOInstance(**row)
    tail = image_tail(inst.instance_image_key, path)
    count = int(subprocess.run(["docker", "run", "--rm", "--network", "none", inst.instance_image_key,
                                "wc", "-l", f"/testbed/{path}"], capture_output=True, text=True,
                               check=True).stdout.split()[0])
    added = ["", "", f"_gso_slow_{func} = {func}", "", "",
             f"def {func}(*args, **kwargs):  # does its work twice",
             f"    _gso_slow_{func}(*args, **kwargs)",
             f"    return _gso_slow_{func}(*args, **kwargs)"]
    start = count - len(tail) + 1
    hunk = [f"@@ -{start},{len(tail)} +{start},{len(tail) + len(added)} @@"]
    hunk += [" " + l for l in tail] + ["+" + l for l in added]
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n" + "\n".join(hunk) + "\n"


NOOP = ("diff --git a/GSO_NOTES.md b/GSO_NOTES.md\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/GSO_NOTES.md\n@@ -0,0 +1 @@\n+A note: nothing that runs changes.\n")


def rollouts(rows):
    kinds = {"human": lambda r: r["gt_diff"], "noop": lambda r: NOOP, "slower": slower_patch}
    return {k: [{"instance_id": r["instance_id"], "model_name_or_path": f"side-run_{i + 1}",
                 "model_patch": make(r)} for r in rows]
            for i, (k, make) in enumerate(kinds.items())}


# At import, so that GSO's worker processes (spawned: they import this script again) have
# them too: the origin eval.sh fetches is the image's bundle, and cleanup_docker only removes
# GSO's own containers.
GSOInstance.repo_url = property(lambda self: "/root/gso-origin.bundle")
gso_run.cleanup_docker = gso_only_cleanup


def run_gso(rows_path, preds, out, run_id):
    """GSO's run_evaluation, one rollout file at a time, from `out` (its logs/ go there)."""
    print("GSO: origin = the image's bundle; cleanup_docker limited to gso.eval.* containers")
    here = os.getcwd()
    os.chdir(out)
    reports, seconds = {}, {}
    try:
        for kind, rows in preds.items():
            path = out / f"{kind}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            t = time.time()
            gso_run.main(str(rows_path), "test", None, str(path), 1, 4096, 3600, run_id, False)
            seconds[kind] = time.time() - t
            model = rows[0]["model_name_or_path"]
            for r in rows:
                f = out / "logs" / "run_evaluation" / run_id / model / r["instance_id"] / "report.json"
                reports[(r["instance_id"], kind)] = json.loads(f.read_text())[r["instance_id"]] if f.exists() else None
    finally:
        os.chdir(here)
    return reports, seconds


def run_ours(rows_path, preds, out):
    dataset = out / "tasks"
    subprocess.run([HARNESS, "tasks", "import-gso", rows_path, "--out", dataset], check=True)
    files = []
    for kind, rows in preds.items():
        f = out / f"ours-{rows[0]['model_name_or_path']}.jsonl"
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files.append(f)
    cmd = [HARNESS, "opt-at-k", "--model", "side", "--rollout-per-file", "--k", str(len(files)),
           "--dataset", dataset, "--results-dir", out / "ours", "--run-id", "side"]
    for f in files:
        cmd += ["--predictions", f]
    t = time.time()
    subprocess.run(cmd, check=True)
    seconds = time.time() - t
    run = out / "ours" / "side"
    strict = {}
    for kind_i, kind in enumerate(preds):
        for r in preds[kind]:
            rep = json.loads((run / "side" / r["instance_id"] / str(kind_i) / "report.json").read_text())
            strict[(r["instance_id"], kind)] = rep
    subprocess.run([HARNESS, "report", "--criterion", "gso", "--min-speedup", "1.1", run], check=True,
                   capture_output=True)
    gso_rule = {}
    for kind_i, kind in enumerate(preds):
        for r in preds[kind]:
            rep = json.loads((run / "side" / r["instance_id"] / str(kind_i) / "report.json").read_text())
            gso_rule[(r["instance_id"], kind)] = rep
    return strict, gso_rule, seconds


def gso_status(rep):
    if rep is None:
        return "error"
    if not rep["base_successfully_run"]:
        return "base_failed"
    if not rep["patch_successfully_applied"]:
        return "patch_failed"
    return "passed" if rep["test_passed"] else "test_failed"


def table(rows, preds, gso, strict, gso_rule, gso_seconds, our_seconds):
    out = ["| instance | rollout | GSO status | ours | GSO GM over base | ours (95%) | GSO HM over human | ours (95%) | GSO opt_base/opt_commit | ours strict | ours gso rule |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    data = []
    for r in rows:
        for kind in preds:
            key = (r["instance_id"], kind)
            g, s, q = gso[key], strict[key], gso_rule[key]
            gs = (g or {}).get("opt_stats", {})
            gm, hm = gs.get("gm_speedup_patch_base"), gs.get("hm_speedup_patch_commit")
            iv = s.get("intervals") or {}
            ost = s.get("opt_stats") or {}

            def within(x, i):
                return i is not None and x is not None and i["lo"] <= x <= i["hi"]

            gm_iv, hm_iv = iv.get("gm_speedup_patch_base"), iv.get("hm_speedup_patch_commit")
            row = {
                "instance": r["instance_id"], "rollout": kind, "gso_status": gso_status(g),
                "status": s["status"], "gso_gm_base": gm, "gm_base": ost.get("gm_speedup_patch_base"),
                "gm_base_ci": gm_iv, "gso_hm_commit": hm, "hm_commit": ost.get("hm_speedup_patch_commit"),
                "hm_commit_ci": hm_iv, "gso_opt": [bool(g and g["opt_base"]), bool(g and g["opt_commit"])],
                "strict_opt": [s["opt_base"], s["opt_commit"]], "gso_rule_opt": [q["opt_base"], q["opt_commit"]],
                "gm_within": within(gm, gm_iv), "hm_within": within(hm, hm_iv),
            }
            data.append(row)
            f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            ci = lambda i: "-" if not i else f"[{i['lo']:.3f}, {i['hi']:.3f}]"  # noqa: E731
            yn = lambda p: "/".join("yes" if b else "no" for b in p)  # noqa: E731
            out.append(f"| {r['instance_id']} | {kind} | {row['gso_status']} | {row['status']} | "
                       f"{f(gm)} | {f(row['gm_base'])} {ci(gm_iv)}{'' if row['gm_within'] or gm is None else ' (outside)'} | "
                       f"{f(hm)} | {f(row['hm_commit'])} {ci(hm_iv)}{'' if row['hm_within'] or hm is None else ' (outside)'} | "
                       f"{yn(row['gso_opt'])} | {yn(row['strict_opt'])} | {yn(row['gso_rule_opt'])} |")
    out.append("")
    out.append(f"Wall time: GSO's run_evaluation {sum(gso_seconds.values()):.0f} s "
               f"({', '.join(f'{k} {v:.0f} s' for k, v in gso_seconds.items())}); "
               f"harness opt-at-k {our_seconds:.0f} s (strict, images cached).")
    return "\n".join(out), data


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=Path, default=ROOT / "tasks" / "_gso" / "rows.jsonl")
    p.add_argument("--out", type=Path, default=ROOT / "target" / "gso-side-by-side")
    p.add_argument("--save", type=Path, help="write the table (.md) and figures (.json) here")
    a = p.parse_args()
    if not HARNESS.exists():
        sys.exit(f"{HARNESS}: build it first (cargo build --release)")
    rows = [json.loads(l) for l in a.rows.read_text().splitlines() if l.strip()]
    client = docker.from_env()
    for r in rows:
        client.images.get(GSOInstance(**r).instance_image_key)  # made by scripts/gso_images.py
    a.out.mkdir(parents=True, exist_ok=True)
    preds = rollouts(rows)
    gso, gso_seconds = run_gso(a.rows.resolve(), preds, a.out.resolve(), f"side-{int(time.time())}")
    strict, gso_rule, our_seconds = run_ours(a.rows.resolve(), preds, a.out.resolve())
    text, data = table(rows, preds, gso, strict, gso_rule, gso_seconds, our_seconds)
    print(text)
    if a.save:
        a.save.with_suffix(".md").write_text(text + "\n")
        a.save.with_suffix(".json").write_text(json.dumps(
            {"rows": data, "gso_seconds": gso_seconds, "our_seconds": our_seconds}, indent=1) + "\n")


if __name__ == "__main__":
    main()
