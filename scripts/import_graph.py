#!/usr/bin/env python3
"""The crate's import graph between files, from its `crate::` and `super::` paths, and the
floor check CI runs.

    python3 scripts/import_graph.py            # files, arrows, circles, upward imports
    python3 scripts/import_graph.py --check    # exit 1 on an import from a floor above

Floors, lowest first; a file may import from its own floor and the ones below:
  0 telemetry/  sealed leaf: NVML sampling, imports nothing of the crate
  1 core/       task model, rule, statistics, verdicts, metrics, timings, results, events
  2 sandbox/    Docker, the in-container assets and protections, images, evaluation
  3 app/        one module per command, the reports, the progress reporter
  4 cli/, lib.rs, main.rs
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
FLOORS = [("telemetry", 0), ("core", 1), ("sandbox", 2), ("app", 3)]
FLOOR_NAMES = {0: "telemetry", 1: "core", 2: "sandbox", 3: "app", 4: "cli"}
SEGMENT = r"[A-Za-z_][A-Za-z0-9_]*"


def files():
    out = []
    for here, _, names in os.walk(ROOT):
        for n in names:
            if n.endswith(".rs"):
                out.append(os.path.relpath(os.path.join(here, n), ROOT))
    return sorted(out)


def module_of(rel):
    """`core/task/mod.rs` -> ["core", "task"]; `lib.rs`/`main.rs` -> []."""
    parts = rel[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in (["lib"], ["main"]):
        return []
    return parts


def floor(rel):
    for prefix, f in FLOORS:
        if rel == prefix + ".rs" or rel.startswith(prefix + "/"):
            return f
    return 4


def resolve(segments, known):
    """The file a module path names: its longest prefix that is a file of the crate."""
    for n in range(len(segments), 0, -1):
        for cand in ("/".join(segments[:n]) + ".rs", "/".join(segments[:n]) + "/mod.rs"):
            if cand in known:
                return cand
    return None


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def paths_in(text):
    """(line, [segments]) of every crate::/super:: path, braces of `use` expanded."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"\b(crate|super|harness)::((?:%s::)*)(\{[^}]*\}|%s)?" % (SEGMENT, SEGMENT), line):
            head = [m.group(1)] + [s for s in m.group(2).split("::") if s]
            tail = m.group(3) or ""
            if tail.startswith("{"):
                for item in tail[1:-1].split(","):
                    item = item.strip().split(" as ")[0]
                    if item and item != "self":
                        out.append((n, head + [s for s in item.split("::") if s]))
                if tail[1:-1].strip():
                    out.append((n, head))
            else:
                out.append((n, head + ([tail] if tail else [])))
    return out


def graph():
    known = set(files())
    edges = {}
    for rel in sorted(known):
        with open(os.path.join(ROOT, rel)) as f:
            text = strip_comments(f.read())
        here = module_of(rel)
        for line, segs in paths_in(text):
            if segs[0] in ("crate", "harness"):
                target = segs[1:]
            else:
                base = list(here)
                while segs and segs[0] == "super":
                    base = base[:-1]
                    segs = segs[1:]
                target = base + segs
            dest = resolve(target, known)
            if dest and dest != rel:
                edges.setdefault(rel, {}).setdefault(dest, line)
    return known, edges


def circles(nodes, edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(argv):
    nodes, edges = graph()
    upward = []
    for src, dests in sorted(edges.items()):
        for dest, line in sorted(dests.items()):
            if floor(dest) > floor(src):
                upward.append("src/%s:%d imports src/%s (%s -> %s, a floor above)" % (
                    src, line, dest, FLOOR_NAMES[floor(src)], FLOOR_NAMES[floor(dest)]))
    if "--check" in argv:
        for u in upward:
            print(u)
        if upward:
            print("%d import(s) from a floor above; see scripts/import_graph.py for the floors" % len(upward))
            return 1
        print("floors: no upward import among %d files" % len(nodes))
        return 0
    comps = circles(nodes, edges)
    print("%d files, %d arrows, %d circle(s)" % (len(nodes), sum(len(d) for d in edges.values()), len(comps)))
    for c in comps:
        print("  circle of %d: %s" % (len(c), " ".join(c)))
    for u in upward:
        print("  upward: " + u)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
