#!/usr/bin/env python3
"""Reads a run folder's GSO reports the way gso-bench/gso's own tools read them, and checks
that they hold what those tools expect, under GSO's meanings. Standard library only.

    python3 tests/gso_reader.py RUN_DIR

What it checks, each against GSO's code at c89aecd (src/gso/harness/...):

1. Key sets: every report's `summary`, `instance_sets` and `opt_stats[id]` keys are exactly
   the keys `grading/report.py:make_run_report` (run and rollout reports) or
   `opt_at_k.py:merge_reports` (opt@K report) write, so GSO's scripts, which count every
   `*_ids` key as attempted, see no set of ours. Counts equal the sets they count.
2. merge_reports: GSO's merge recomputed here from the rollout reports equals the opt@K
   report (sets, opt_stats and report_file), apart from the two documented meanings
   (`total_predictions`, `incomplete_instances`; empty/error instances no rollout completed).
3. plot_speedups.py: every opt_stats entry has per_test_means base/patch/commit/main, and the
   geometric mean it plots equals gm_speedup_patch_base.
4. plot_opt1_threshold.py: attempted instances (union of `*_ids`) are exactly the run's
   instances, and its threshold rule at p = 0.95 marks exactly the opt_commit ids under gso.
5. Values: every opt_stats entry recomputed with GSO's formulas (metrics.py) from the
   sample's bench.json, over the rounds base, human and the sample all ran, to 1e-9.

Exits 0 when everything holds; else prints every problem and exits 1.
"""

import json
import math
import re
import sys
from pathlib import Path

SUMMARY_KEYS = [
    "total_instances", "total_predictions", "completed_instances", "incomplete_instances",
    "passed_instances", "base_failed_instances", "patch_failed_instances",
    "test_failed_instances", "empty_patch_instances", "error_instances", "opt_base",
    "opt_commit", "opt_main",
]
RUN_SETS = [
    "completed_ids", "passed_ids", "base_failed_ids", "patch_failed_ids", "test_failed_ids",
    "incomplete_ids", "empty_patch_ids", "error_ids", "opt_base_ids", "opt_commit_ids",
    "opt_main_ids",
]
MERGE_SETS = [s for s in RUN_SETS if s != "incomplete_ids"]
OPT_KEYS = [
    "opt_perc_patch_base", "opt_perc_patch_commit", "opt_perc_patch_main",
    "speedup_patch_base", "speedup_patch_commit", "speedup_patch_main",
    "gm_speedup_patch_base", "gm_speedup_patch_commit", "gm_speedup_patch_main",
] + [
    f"{m}_speedup_{pair}" if m != "slowdown" else f"slowdown_perc_{pair}"
    for pair in ["patch_commit", "patch_base", "commit_base"]
    for m in ["am", "gm", "gsd", "slowdown", "hm"]
] + ["per_test_speedups"]
TIME_KEYS = [
    "base_mean", "base_std", "patch_mean", "patch_std", "commit_mean", "commit_std",
    "main_mean", "main_std", "per_test_means",
]
COUNTED = {
    "completed_instances": "completed_ids", "passed_instances": "passed_ids",
    "base_failed_instances": "base_failed_ids", "patch_failed_instances": "patch_failed_ids",
    "test_failed_instances": "test_failed_ids", "empty_patch_instances": "empty_patch_ids",
    "error_instances": "error_ids", "opt_base": "opt_base_ids", "opt_commit": "opt_commit_ids",
    "opt_main": "opt_main_ids",
}
MIN_PROB_SPEEDUP = 1.2  # gso.constants
PROBLEMS = []


def problem(msg):
    PROBLEMS.append(msg)


def close(a, b, tol=1e-9):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) or isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


# --- GSO's formulas (grading/metrics.py), in plain Python ---------------------------------

def mean(xs):
    return sum(xs) / len(xs)


def std(xs, ddof):
    if len(xs) <= ddof:
        return float("nan")
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - ddof))


def per_test_speedups(before, after):
    return [b / a if a > 0 else float("inf") for b, a in zip(before, after)]


def speedup(before_mean, after_mean, before, after):
    """(am, gm, gsd, hm, slowdown percent); NaN written as None, as the reports do."""
    s = per_test_speedups(before, after)
    logs = [math.log(x) for x in s]
    gsd = math.exp(std(logs, 1)) if len(logs) > 1 else None
    pos = [x for x in s if x > 0]
    hm = len(s) / sum(1 / x for x in pos) if pos else float("inf")
    slow = len([r for r in s if r < 1.0]) / len(s) * 100 if s else None
    return before_mean / after_mean, math.exp(mean(logs)), gsd, hm, slow


def time_stats(means):
    return mean(means), (std(means, 1) if len(means) > 1 else 0.0)


def gso_stats(base, patch, commit):
    """GSO's `opt_stats | time_stats` for per-test means."""
    bm, bs = time_stats(base)
    pm, ps = time_stats(patch)
    cm, cs = time_stats(commit)
    out = {k: None for k in OPT_KEYS + TIME_KEYS}
    for pair, (b_mean, a_mean, b, a) in {
        "patch_commit": (cm, pm, commit, patch),
        "patch_base": (bm, pm, base, patch),
        "commit_base": (bm, cm, base, commit),
    }.items():
        am, gm, gsd, hm, slow = speedup(b_mean, a_mean, b, a)
        out.update({f"am_speedup_{pair}": am, f"gm_speedup_{pair}": gm,
                    f"gsd_speedup_{pair}": gsd, f"hm_speedup_{pair}": hm,
                    f"slowdown_perc_{pair}": slow})
    out["per_test_speedups"] = {
        "patch_base_speedups": per_test_speedups(base, patch),
        "commit_base_speedups": per_test_speedups(base, commit),
        "patch_commit_speedups": per_test_speedups(commit, patch),
    }
    out.update({"base_mean": bm, "base_std": bs, "patch_mean": pm, "patch_std": ps,
                "commit_mean": cm, "commit_std": cs,
                "per_test_means": {"base": base, "patch": patch, "commit": commit, "main": []}})
    return out


# --- the run folder ------------------------------------------------------------------------

def load(path):
    with open(path) as f:
        return json.load(f)


def slug(name):
    return name.replace("/", "__")


def rounds_of(log, reference, variant):
    """Rounds in which `reference` and `variant` both have a counted figure for every bench:
    the first record of (variant, round, bench), not a warm-up, exit 0, with a value."""
    first = {}
    for r in log["runs"]:
        first.setdefault((r["variant"], r["round"], r["bench"]), r)

    def value(v, rnd, bench):
        r = first.get((v, rnd, bench))
        if r is None or r["warmup"] or r["exit_code"] != 0 or r["value"] is None:
            return None
        return r["value"]

    out = {}
    for rnd in sorted({r["round"] for r in log["runs"] if r["variant"] == variant}):
        ref = [value(reference, rnd, b["name"]) for b in log["benches"]]
        pat = [value(variant, rnd, b["name"]) for b in log["benches"]]
        if None not in ref and None not in pat:
            out[rnd] = (ref, pat)
    return out


def per_test_means_from_bench(bench_json, sample):
    """GSO's per-test means of base, the sample (patch) and human (commit), over the rounds
    all three ran; a higher-is-better figure as the reciprocal of its mean."""
    log = load(bench_json)
    variant = log.get("shared", {}).get(f"s{sample}", f"s{sample}")
    with_base = rounds_of(log, "base", variant)
    with_human = rounds_of(log, "human", variant)
    common = sorted(set(with_base) & set(with_human))
    if not common:
        return None
    cols = {"base": [], "patch": [], "commit": []}
    for i, b in enumerate(log["benches"]):
        fix = (lambda m: 1.0 / m) if b["better"] == "higher" else (lambda m: m)
        cols["base"].append(fix(mean([with_base[r][0][i] for r in common])))
        cols["patch"].append(fix(mean([with_base[r][1][i] for r in common])))
        cols["commit"].append(fix(mean([with_human[r][0][i] for r in common])))
    return cols


def check_keys(name, report, sets, merged):
    for k in ["summary", "instance_sets", "opt_stats", "schema_version"]:
        if k not in report:
            problem(f"{name}: no top-level key {k}")
            return False
    # Key sets, not order: GSO's scripts read by key (json writes ours sorted).
    want = SUMMARY_KEYS + (["k"] if merged else [])
    if sorted(report["summary"]) != sorted(want):
        problem(f"{name}: summary keys {sorted(report['summary'])}, GSO writes {want}")
    if sorted(report["instance_sets"]) != sorted(sets):
        problem(f"{name}: instance_sets keys {sorted(report['instance_sets'])}, GSO writes {sets}")
    for key, ids in report["instance_sets"].items():
        if ids != sorted(set(ids)):
            problem(f"{name}: {key} is not a sorted list of distinct ids")
    for count, key in COUNTED.items():
        if report["summary"].get(count) != len(report["instance_sets"].get(key, [])):
            problem(f"{name}: summary.{count} {report['summary'].get(count)} "
                    f"!= len({key}) {len(report['instance_sets'].get(key, []))}")
    opt_keys = set(OPT_KEYS + TIME_KEYS)
    for iid, st in report["opt_stats"].items():
        extra = set(st) - opt_keys - ({"report_file"} if merged else set())
        missing = opt_keys - set(st)
        if extra or missing:
            problem(f"{name}: opt_stats[{iid}] extra {sorted(extra)} missing {sorted(missing)}")
        if merged and "report_file" not in st:
            problem(f"{name}: opt_stats[{iid}] has no report_file")
        if iid not in report["instance_sets"]["opt_base_ids"]:
            problem(f"{name}: opt_stats holds {iid}, which is not opt_base")
    return True


def gso_merge(rollouts, total):
    """opt_at_k.py's merge_reports over (file, report) pairs, in rollout order."""
    priority = {"passed": 5, "test_failed": 4, "patch_failed": 3, "empty_patch": 2,
                "base_failed": 1, "error": 0, None: -1}
    order = ["passed", "patch_failed", "test_failed", "empty_patch", "base_failed", "error"]
    sets = {k: set() for k in MERGE_SETS}
    status = {}
    for _, r in rollouts:
        cur = r["instance_sets"]
        for iid in cur["completed_ids"]:
            st = next((s for s in order if iid in cur[f"{s}_ids"]), None)
            if priority[st] > priority[status.get(iid)]:
                status[iid] = st
        for m in ["opt_base_ids", "opt_commit_ids", "opt_main_ids"]:
            sets[m].update(cur[m])
    for iid, st in status.items():
        sets["completed_ids"].add(iid)
        if st:
            sets[f"{st}_ids"].add(iid)
    stats = {}
    for file, r in rollouts:
        for iid in sets["opt_commit_ids"]:
            new = r["opt_stats"].get(iid)
            if new and new.get("gm_speedup_patch_commit"):
                cur = stats.get(iid, {})
                if (not cur or not cur.get("gm_speedup_patch_commit")
                        or new["gm_speedup_patch_commit"] > cur.get("gm_speedup_patch_commit", 0)):
                    stats[iid] = dict(new, report_file=file)
    return {k: sorted(v) for k, v in sets.items()}, stats, len(status)


def check_values(name, run_dir, model, iid, sample, st):
    bench = run_dir / slug(model) / iid / str(sample) / "bench.json"
    if not bench.is_file():
        problem(f"{name}: {iid}: no {bench}")
        return
    cols = per_test_means_from_bench(bench, sample)
    if cols is None:
        problem(f"{name}: {iid}: no round that base, human and s{sample} all ran")
        return
    want = gso_stats(cols["base"], cols["patch"], cols["commit"])
    for k, v in want.items():
        got = st.get(k)
        if isinstance(v, dict):
            for kk, vv in v.items():
                if not close(got.get(kk) if got else None, vv):
                    problem(f"{name}: {iid}: {k}.{kk} = {got.get(kk) if got else None}, GSO's "
                            f"formula on bench.json gives {vv}")
        elif not close(got, v):
            problem(f"{name}: {iid}: {k} = {got}, GSO's formula on bench.json gives {v}")


def plot_speedups_reads(name, report):
    for iid, st in report["opt_stats"].items():
        ptm = st["per_test_means"]
        base, patch = ptm["base"], ptm["patch"]
        _, _ = ptm["commit"], ptm["main"]
        gm = speedup(mean(base), mean(patch), base, patch)[1]
        if not close(gm, st["gm_speedup_patch_base"]):
            problem(f"{name}: plot_speedups' geomean for {iid} is {gm}, "
                    f"gm_speedup_patch_base {st['gm_speedup_patch_base']}")


def threshold_reads(name, report, instances, p, want_opt):
    """plot_opt1_threshold.py's per-report reading at threshold p."""
    attempted = set()
    for key, ids in report["instance_sets"].items():
        if key.endswith("_ids"):
            attempted.update(ids)
    if attempted != instances:
        problem(f"{name}: GSO's attempted instances {sorted(attempted)} != the run's "
                f"{sorted(instances)}")
    opt, unsure = set(), set()
    for iid, st in report["opt_stats"].items():
        gm = st["gm_speedup_patch_base"]
        if (round(gm, 1) >= MIN_PROB_SPEEDUP) != (gm >= MIN_PROB_SPEEDUP):
            unsure.add(iid)  # the script rounds GM to 0.1, metrics.py does not
        if (st["base_mean"] > st["patch_mean"]
                and round(st["gm_speedup_patch_base"], 1) >= MIN_PROB_SPEEDUP
                and st["hm_speedup_patch_commit"] > p):
            opt.add(iid)
    if want_opt is not None and opt - unsure != set(want_opt) - unsure:
        problem(f"{name}: the threshold script finds opt at p={p}: {sorted(opt)}, "
                f"the report's opt_commit_ids {sorted(want_opt)}")


def natural_key(s):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def main(run_dir):
    run_dir = Path(run_dir)
    info = load(run_dir / "run.json")
    model, run_id, k = info["model"], info["run_id"], info["k"]
    criterion = info["decision_rule"]["criterion"]
    best_name = f"{slug(model)}.{run_id}.report.json"
    opt_name = f"{slug(model)}.opt@{k}.{run_id}.report.json"
    best, opt = load(run_dir / best_name), load(run_dir / opt_name)
    instances = {i for ids in best["instance_sets"].values() for i in ids}
    skipped = set(best["harness"]["instance_sets"].get("skipped_ids", []))
    if len(instances) != best["summary"]["total_instances"] or instances & skipped:
        problem(f"{best_name}: {len(instances)} instances in GSO's sets, "
                f"total_instances {best['summary']['total_instances']}")

    files = sorted((str(p.relative_to(run_dir)) for p in run_dir.glob("rollouts/*/*.report.json")),
                   key=natural_key)
    rollouts = [(f, load(run_dir / f)) for f in files]
    rollouts.sort(key=lambda fr: fr[1]["harness"]["sample"])
    if len(rollouts) != k:
        problem(f"{len(rollouts)} rollout reports under rollouts/, K is {k}")

    for f, r in rollouts:
        if check_keys(f, r, RUN_SETS, merged=False):
            plot_speedups_reads(f, r)
            threshold_reads(f, r, instances, 0.95,
                            r["instance_sets"]["opt_commit_ids"] if criterion == "gso" else None)
            for iid, st in r["opt_stats"].items():
                check_values(f, run_dir, model, iid, r["harness"]["sample"], st)
    if check_keys(best_name, best, RUN_SETS, merged=False):
        plot_speedups_reads(best_name, best)
        threshold_reads(best_name, best, instances, 0.95, None)
        for iid, st in best["opt_stats"].items():
            sample = best["harness"]["instances"][iid]["sample"]
            check_values(best_name, run_dir, model, iid, sample, st)
    if check_keys(opt_name, opt, MERGE_SETS, merged=True):
        plot_speedups_reads(opt_name, opt)
        sets, stats, completed = gso_merge(rollouts, len(instances))
        for key in MERGE_SETS:
            ours, gso = opt["instance_sets"][key], sets[key]
            same = set(gso) <= set(ours) if key in ("empty_patch_ids", "error_ids") else ours == gso
            if not same:
                problem(f"{opt_name}: {key} {ours}, GSO's merge_reports gives {gso}")
        if set(stats) != set(opt["opt_stats"]):
            problem(f"{opt_name}: opt_stats for {sorted(opt['opt_stats'])}, GSO's merge: "
                    f"{sorted(stats)}")
        for iid, st in stats.items():
            mine = opt["opt_stats"].get(iid, {})
            if mine.get("report_file") != st["report_file"] or not close(
                    mine.get("gm_speedup_patch_commit"), st["gm_speedup_patch_commit"]):
                problem(f"{opt_name}: opt_stats[{iid}] from {mine.get('report_file')}, "
                        f"GSO's merge takes {st['report_file']}")
        by_file = dict(rollouts)
        for iid, st in opt["opt_stats"].items():
            src = by_file.get(st.get("report_file"), {}).get("opt_stats", {}).get(iid)
            if src is None:
                problem(f"{opt_name}: {iid}: report_file {st.get('report_file')} holds no entry")
                continue
            for key, v in src.items():
                got = st.get(key)
                same = all(close(got.get(kk), vv) for kk, vv in v.items()) if isinstance(
                    v, dict) else close(got, v)
                if not same:
                    problem(f"{opt_name}: {iid}: {key} = {got}, its rollout report has {v}")
        submitted = {i for _, r in rollouts for key, ids in r["instance_sets"].items()
                     if key != "incomplete_ids" for i in ids}
        s = opt["summary"]
        if s["total_predictions"] != len(submitted) or s["completed_instances"] != completed:
            problem(f"{opt_name}: total_predictions {s['total_predictions']} (submitted "
                    f"{len(submitted)}), completed {s['completed_instances']} (GSO {completed})")
        if s["incomplete_instances"] != len(instances) - len(submitted):
            problem(f"{opt_name}: incomplete_instances {s['incomplete_instances']}")
        if s["k"] != k or s["total_instances"] != len(instances):
            problem(f"{opt_name}: k {s['k']} total {s['total_instances']}")
        if "0.95" not in opt.get("opt_p_at_k", {}):
            problem(f"{opt_name}: no opt_p_at_k['0.95']")

    for p in PROBLEMS:
        print("GSO reader:", p)
    print(f"GSO reader: {run_dir}: {len(rollouts)} rollout report(s), "
          f"{len(best['opt_stats'])} best-of-K and {len(opt['opt_stats'])} opt@K opt_stats "
          f"entries checked; {len(PROBLEMS)} problem(s)")
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
