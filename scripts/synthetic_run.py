#!/usr/bin/env python3
"""A large run folder made from a real one, for sizing the report pages.

    python3 scripts/synthetic_run.py SRC_RUN OUT_RUN --instances 100 --k 10
    harness report OUT_RUN          # writes OUT_RUN/report.html from it

Every instance of OUT_RUN is a copy of one of SRC_RUN's (round robin, renamed
`<id>-<n>`), every sample a copy of one of its samples (sample s takes the source's
s mod K): real bench.json timings, real logs, real reports, only more of them. run.json is
the source's with the new instance list, K, and no list of expected samples (every saved
sample counts). The figures mean nothing; the page's size and load time do.
"""
import argparse
import json
import os
import shutil


def model_dir(run, info):
    for name in os.listdir(run):
        path = os.path.join(run, name)
        if os.path.isdir(path) and all(
            os.path.isdir(os.path.join(path, i)) for i in info["instance_ids"][:1]
        ) and name != "rollouts":
            return name
    raise SystemExit(f"{run}: no model folder holding {info['instance_ids'][:1]}")


def rewrite(path, **fields):
    if not os.path.isfile(path):
        return
    with open(path) as f:
        data = json.load(f)
    data.update(fields)
    with open(path, "w") as f:
        json.dump(data, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--instances", type=int, default=100)
    ap.add_argument("--k", type=int, default=10)
    a = ap.parse_args()
    with open(os.path.join(a.src, "run.json")) as f:
        info = json.load(f)
    model = model_dir(a.src, info)
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(os.path.join(a.out, model))
    src_ids = info["instance_ids"]
    ids = []
    for n in range(a.instances):
        src_id = src_ids[n % len(src_ids)]
        new_id = f"{src_id}-{n:03d}"
        ids.append(new_id)
        src_samples = sorted(
            int(s) for s in os.listdir(os.path.join(a.src, model, src_id)) if s.isdigit()
        )
        for s in range(a.k):
            from_dir = os.path.join(a.src, model, src_id, str(src_samples[s % len(src_samples)]))
            to_dir = os.path.join(a.out, model, new_id, str(s))
            shutil.copytree(from_dir, to_dir)
            rewrite(os.path.join(to_dir, "report.json"), instance_id=new_id, sample=s)
            rewrite(os.path.join(to_dir, "bench.json"), instance_id=new_id)
    info.update(instance_ids=ids, k=a.k, samples=None, run_id=os.path.basename(a.out.rstrip("/")))
    with open(os.path.join(a.out, "run.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"{a.out}: {a.instances} instances x K={a.k} from {a.src}")


if __name__ == "__main__":
    main()
