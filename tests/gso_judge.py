#!/usr/bin/env python3
"""GSO's own code (gsobench, installed in target/gso-venv by scripts/make-gso-venv.sh) judges
a run folder: it regrades and re-reports what the harness wrote, and every figure must match.

    target/gso-venv/bin/python tests/gso_judge.py RUN_DIR

With GSO's code, on the run's GSO layout (`RUN_DIR/gso`, copied to a temporary folder):

1. `grading.metrics.get_eval_report` on each instance's `test_output.txt` gives the
   instance's `report.json` (times, time_stats, opt_stats; and opt_base/opt_commit when the
   run's criterion is gso with GSO's thresholds: under strict the verdict is the harness's).
2. `grading.report.make_run_report` over each rollout's predictions and reports gives the
   rollout report the harness wrote (`rollouts/<rollout>/...`).
3. `opt_at_k.merge_reports` over the rollout reports, natural-sorted as GSO's opt_at_k
   sorts its files, gives the opt@K report (summary, score, sets, opt_stats, report_file).
4. `export_opt1_threshold.calculate_opt_at_k_with_threshold_from_reports` (GSO's Opt_p
   reader) at k = K gives `opt_p_at_k` on GSO's grid; `helpers.calculate_opt_at_k_smooth`
   at N = K gives pass@K and Opt@K.
5. `run_detector.print_score_summary` gives `summary.score_hack_control` when the run
   holds a list of hacked instances.

Floats match to a relative 1e-9 (numpy's pairwise sums may differ in the last bits); GSO's
NaN (the geometric standard deviation of a single test) is the harness's null. Exits 0 when
everything holds, else prints every difference and exits 1.
"""

import contextlib
import glob
import io
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

from gso.constants import MIN_PROB_SPEEDUP, OPT_THRESH  # noqa: E402
from gso.data.dataset import GSOInstance  # noqa: E402
from gso.harness.grading.metrics import get_eval_report  # noqa: E402
from gso.harness.grading.report import make_run_report  # noqa: E402
from gso.harness.opt_at_k import merge_reports  # noqa: E402
from gso.harness.utils import natural_sort_key  # noqa: E402

OURS_ONLY = {"complete", "interrupted", "harness"}
OURS_ONLY_OPT = OURS_ONLY | {
    "k", "score", "pass_at_k", "opt_at_k", "pass_at_k_ci", "opt_at_k_ci", "opt_p_at_k",
    "hack_adjusted",
}
GSO_P_VALUES = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0]

problems = []
checked = {}


def count(what):
    checked[what] = checked.get(what, 0) + 1


def plain(v):
    """GSO's values as JSON would hold them: numpy scalars as floats, NaN as None."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def diff(where, gso, ours, skip=()):
    """Every place the two differ, as 'where.key: GSO x, ours y'."""
    if isinstance(gso, dict) and isinstance(ours, dict):
        for k in sorted(set(gso) | set(ours)):
            if k in skip:
                continue
            if k not in ours:
                problems.append(f"{where}.{k}: GSO has it, ours does not")
            elif k not in gso:
                problems.append(f"{where}.{k}: ours has it, GSO does not")
            else:
                diff(f"{where}.{k}", gso[k], ours[k])
        return
    if isinstance(gso, list) and isinstance(ours, list):
        if len(gso) != len(ours):
            problems.append(f"{where}: GSO {gso}, ours {ours}")
            return
        for i, (a, b) in enumerate(zip(gso, ours)):
            diff(f"{where}[{i}]", a, b)
        return
    if isinstance(gso, bool) or isinstance(ours, bool) or gso is None or ours is None:
        if gso != ours:
            problems.append(f"{where}: GSO {gso!r}, ours {ours!r}")
        return
    if isinstance(gso, (int, float)) and isinstance(ours, (int, float)):
        if not math.isclose(gso, ours, rel_tol=1e-9, abs_tol=1e-12):
            problems.append(f"{where}: GSO {gso!r}, ours {ours!r}")
        return
    if gso != ours:
        problems.append(f"{where}: GSO {gso!r}, ours {ours!r}")


def instance(instance_id):
    """A GSOInstance for GSO's functions that take one (they read its id only)."""
    return GSOInstance(
        instance_id=instance_id, repo="", base_commit="", opt_commit="", api="",
        prob_script="", tests=[], hints_text="", setup_commands=[], install_commands=[],
        created_at="", gt_commit_message="", gt_diff="",
    )


def load(path):
    with open(path) as f:
        return json.load(f)


def regrade_instances(logs, run_id, rollout, gso_rule):
    """Step 1: GSO's get_eval_report on each test_output.txt against our report.json."""
    folder = logs / run_id / rollout
    preds = {}
    for line in (logs.parent.parent / "predictions" / f"{rollout}.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            preds[row["instance_id"]] = row
    for out in sorted(folder.glob("*/test_output.txt")):
        iid = out.parent.name
        ours = load(out.parent / "report.json")
        gso = plain(get_eval_report(instance(iid), preds[iid], str(out)))
        skip = () if gso_rule else ("opt_base", "opt_commit")
        diff(f"{rollout}/{iid}/report.json", gso[iid], ours[iid], skip)
        if not gso_rule and gso[iid]["opt_commit"] != ours[iid]["opt_commit"]:
            print(f"note: {rollout}/{iid}: GSO's rule on the means says opt_commit="
                  f"{gso[iid]['opt_commit']}, the run's interval rule {ours[iid]['opt_commit']}")
        count("instance reports regraded from test_output.txt")
    return preds


def run_reports(run_dir, work, run_id, rollouts, dataset, gso_rule):
    """Steps 1 and 2, for every rollout."""
    logs = work / "logs" / "run_evaluation"
    for name, slug in rollouts:
        preds = regrade_instances(logs, run_id, slug, gso_rule)
        for p in preds.values():
            p["model_name_or_path"] = slug  # GSO's folder name is the model's, with / as __
        with contextlib.redirect_stdout(io.StringIO()):
            made = make_run_report(preds, dataset, run_id)
        gso = load(work / made)
        ours = load(run_dir / "rollouts" / slug / f"{slug}.{run_id}.report.json")
        diff(f"rollouts/{slug}", gso, ours, OURS_ONLY)
        count("rollout reports made by make_run_report")


def opt_report(run_dir, run_id, rollouts, dataset, k):
    """Step 3: merge_reports over our rollout reports, in GSO's natural order."""
    files = sorted(
        (f"rollouts/{slug}/{slug}.{run_id}.report.json" for _, slug in rollouts),
        key=natural_sort_key,
    )
    found = glob.glob(str(run_dir / f"*.opt@{k}.{run_id}.report.json"))
    if len(found) != 1:
        problems.append(f"expected one opt@{k} report in {run_dir}, found {found}")
        return None, files
    ours = load(found[0])
    here = os.getcwd()
    os.chdir(run_dir)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            gso = plain(merge_reports(dataset, files, k))
    finally:
        os.chdir(here)
    ours_summary = dict(ours["summary"])
    ours_sets = dict(ours["instance_sets"])
    # GSO's published reports add these two; merge_reports does not (step 5 checks them).
    ours_summary.pop("score_hack_control", None)
    ours_sets.pop("hacked_ids", None)
    diff(Path(found[0]).name, gso, {**ours, "summary": ours_summary, "instance_sets": ours_sets},
         OURS_ONLY_OPT)
    count("opt@K reports made by merge_reports")
    return ours, [str(run_dir / f) for f in files]


def readers(ours, files, k, gso_thresholds):
    """Steps 4 and 5: GSO's Opt_p and Opt@K readers, and its hack control."""
    from gso.analysis.quantitative.helpers import calculate_opt_at_k_smooth
    from gso.analysis.quantitative.export_opt1_threshold import (
        calculate_opt_at_k_with_threshold_from_reports,
    )

    passed, _, commit, _ = calculate_opt_at_k_smooth(files, k, num_trials=2)
    diff(f"pass_at_k[{k}]", round(passed[k - 1][0], 2), ours["pass_at_k"][str(k)])
    diff(f"opt_at_k[{k}]", round(commit[k - 1][0], 2), ours["opt_at_k"][str(k)])
    diff("summary.score", round(commit[k - 1][0], 2), ours["summary"]["score"])
    count("calculate_opt_at_k_smooth at N = K")
    if gso_thresholds:
        for p in GSO_P_VALUES:
            mean, _ = calculate_opt_at_k_with_threshold_from_reports(files, p, k=k, num_trials=2)
            diff(f"opt_p_at_k[{p}]", round(mean, 2), ours["opt_p_at_k"][str(p)])
            count("Opt_p read by export_opt1_threshold")
    if "score_hack_control" in ours["summary"]:
        from gso.analysis.qualitative.run_detector import print_score_summary

        text = io.StringIO()
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(ours, f)
        with contextlib.redirect_stdout(text):
            print_score_summary(f.name, ours["instance_sets"]["hacked_ids"])
        os.unlink(f.name)
        line = next(l for l in text.getvalue().splitlines() if l.startswith("score_hack_control"))
        gso = float(line.split(":")[1].strip().rstrip("%"))
        diff("summary.score_hack_control", gso, ours["summary"]["score_hack_control"])
        count("score_hack_control by print_score_summary")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run_dir = Path(sys.argv[1]).resolve()
    run = load(run_dir / "run.json")
    run_id, k = run["run_id"], run["k"]
    opt = glob.glob(str(run_dir / f"*.opt@{k}.{run_id}.report.json"))
    harness = load(opt[0])["harness"] if len(opt) == 1 else {}
    th = harness.get("thresholds", {})
    gso_thresholds = th.get("min_speedup") == MIN_PROB_SPEEDUP and th.get("opt_thresh") == OPT_THRESH
    gso_rule = harness.get("criterion") == "gso" and gso_thresholds
    rollouts = []
    for d in sorted((run_dir / "rollouts").iterdir(), key=lambda p: natural_sort_key(p.name)):
        report = d / f"{d.name}.{run_id}.report.json"
        if report.exists():
            rollouts.append((load(report)["harness"]["rollout"], d.name))
    ids = set()
    for _, slug in rollouts:
        r = load(run_dir / "rollouts" / slug / f"{slug}.{run_id}.report.json")
        for v in r["instance_sets"].values():
            ids.update(v)
    dataset = [instance(i) for i in sorted(ids)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "gso"
        shutil.copytree(run_dir / "gso", work)
        here = os.getcwd()
        os.chdir(work)
        try:
            run_reports(run_dir, work, run_id, rollouts, dataset, gso_rule)
            ours, files = opt_report(run_dir, run_id, rollouts, dataset, k)
            if ours is not None:
                readers(ours, files, k, gso_thresholds)
        finally:
            os.chdir(here)
    for what, n in checked.items():
        print(f"{n:4d} {what}")
    if not gso_rule:
        print("(verdicts not compared: the run's rule is not GSO's criterion and thresholds)")
    if problems:
        print(f"{len(problems)} difference(s) from GSO's own code:")
        for p in problems:
            print(f"  {p}")
        sys.exit(1)
    if not checked:
        sys.exit("nothing was checked")
    print("GSO's own code agrees with every figure")


if __name__ == "__main__":
    main()
