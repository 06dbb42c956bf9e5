#!/usr/bin/env python3
"""The structure check CI runs: what the crates' boundaries cannot say themselves.

    python3 scripts/structure.py            # each crate's modules, arrows and circles
    python3 scripts/structure.py --check    # exit 1 on any finding below

The floors are crates (telemetry < core < store < sandbox < harness): an import from a floor
above does not compile. What is left to check here:
  - no circle between the files of a crate, nor between its folders (a module folder such as
    app/export/ counted as one node);
  - harness-core's dependency tree holds no tokio, clap or bollard, and harness-store's and
    harness-telemetry's no tokio, clap or bollard either (`cargo tree -e normal`);
  - no source file over 800 lines (tests/ aside), no Rust function over 120 lines (test
    code aside).
"""
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = {
    "harness-telemetry": "crates/telemetry/src",
    "harness-core": "crates/core/src",
    "harness-store": "crates/store/src",
    "harness-sandbox": "crates/sandbox/src",
    "harness": "src",
    "harness-supervisor": "container/supervisor/src",
}
FORBIDDEN = {
    "harness-core": ("tokio", "clap", "bollard"),
    "harness-store": ("tokio", "clap", "bollard"),
    "harness-telemetry": ("tokio", "clap", "bollard"),
}
# The crate names a root crate reaches its floors by (`harness::core` is `harness-core`).
ALIASES = {"core", "store", "sandbox", "telemetry"}
MAX_FILE_LINES = 800
MAX_FN_LINES = 120
SEGMENT = r"[A-Za-z_][A-Za-z0-9_]*"


def rust_files(root):
    out = []
    for here, _, names in os.walk(os.path.join(REPO, root)):
        out += [os.path.relpath(os.path.join(here, n), os.path.join(REPO, root))
                for n in names if n.endswith(".rs")]
    return sorted(out)


def module_of(rel):
    """`task/mod.rs` -> ["task"]; `lib.rs`/`main.rs` -> []."""
    parts = rel[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in (["lib"], ["main"]):
        return []
    return parts


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
        for m in re.finditer(r"\b(crate|super)::((?:%s::)*)(\{[^}]*\}|%s)?" % (SEGMENT, SEGMENT), line):
            head = [m.group(1)] + [s for s in m.group(2).split("::") if s]
            tail = m.group(3) or ""
            if tail.startswith("{"):
                for item in tail[1:-1].split(","):
                    item = item.strip().split(" as ")[0]
                    if item and item != "self":
                        out.append((n, head + [s for s in item.split("::") if s]))
            else:
                out.append((n, head + ([tail] if tail else [])))
    return out


def graph(root):
    known = set(rust_files(root))
    edges = {}
    for rel in sorted(known):
        with open(os.path.join(REPO, root, rel)) as f:
            text = strip_comments(f.read())
        here = module_of(rel)
        for _, segs in paths_in(text):
            if segs[0] == "crate":
                target = segs[1:]
            else:
                base = list(here)
                while segs and segs[0] == "super":
                    base = base[:-1]
                    segs = segs[1:]
                target = base + segs
            if target and target[0] in ALIASES and root == "src":
                continue  # another crate, through the root's re-export
            dest = resolve(target, known)
            if dest and dest != rel:
                edges.setdefault(rel, set()).add(dest)
    return known, edges


def folder_of(rel):
    """A file's node in the folder graph: its first folder, or itself at the crate's top."""
    parts = rel.split("/")
    return parts[0] if len(parts) > 1 else rel


def circles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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


def module_findings(crate, root):
    nodes, edges = graph(root)
    found = ["%s: circle of files: %s" % (crate, " ".join(c)) for c in circles(nodes, edges)]
    # app/ is the crate's folder of commands: its own folders are the nodes there.
    def node(rel):
        if root == "src" and rel.startswith("app/"):
            return "app/" + folder_of(rel[len("app/"):])
        return folder_of(rel)
    folder_edges = {}
    for src, dests in edges.items():
        for d in dests:
            a, b = node(src), node(d)
            if a != b:
                folder_edges.setdefault(a, set()).add(b)
    folders = {node(n) for n in nodes}
    found += ["%s: circle of folders: %s" % (crate, " ".join(c))
              for c in circles(folders, folder_edges) if any("/" in x or not x.endswith(".rs") for x in c)
              and not all(x.endswith(".rs") for x in c)]
    return found, nodes, edges


def dependency_findings():
    found = []
    for crate, names in FORBIDDEN.items():
        out = subprocess.run(["cargo", "tree", "-q", "-p", crate, "-e", "normal", "--prefix", "none"],
                             cwd=REPO, capture_output=True, text=True)
        if out.returncode != 0:
            found.append("%s: cargo tree failed: %s" % (crate, out.stderr.strip()[:300]))
            continue
        have = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
        for name in names:
            if name in have:
                found.append("%s: depends on %s (cargo tree -p %s -i %s says through what)" % (crate, name, crate, name))
    return found


def fn_lengths(text):
    """(name, first line, lines) of every fn, by its braces (comments and strings blanked)."""
    clean = re.sub(r'"(?:\\.|[^"\\])*"', '""', strip_comments(text))
    clean = re.sub(r"'(?:\\.|[^'\\])'", "' '", clean)
    lines = clean.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:pub(?:\([a-z]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(%s)" % SEGMENT, line)
        if not m:
            continue
        depth, started = 0, False
        for j in range(i, len(lines)):
            for ch in lines[j]:
                if ch == "{":
                    depth += 1
                    started = True
                elif ch == "}":
                    depth -= 1
                elif ch == ";" and not started and depth == 0:
                    break
            else:
                if started and depth == 0:
                    out.append((m.group(1), i + 1, j - i + 1))
                    break
                continue
            break
    return out


def is_test_file(rel):
    """Test code is exempt from the function limit (a scenario reads best whole)."""
    name = os.path.basename(rel)
    return rel.startswith("tests/") or name == "tests.rs" or name.endswith("_tests.rs")


def size_findings():
    found = []
    roots = list(CRATES.values()) + ["container/programs", "scripts", "tests"]
    for root in roots:
        for here, _, names in os.walk(os.path.join(REPO, root)):
            for n in sorted(names):
                if not n.endswith((".rs", ".py", ".sh")):
                    continue
                path = os.path.join(here, n)
                rel = os.path.relpath(path, REPO)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                count = text.count("\n")
                if count > MAX_FILE_LINES and not rel.startswith("tests/"):
                    found.append("%s: %d lines (over %d)" % (rel, count, MAX_FILE_LINES))
                if n.endswith(".rs") and not is_test_file(rel):
                    test_from = text.find("#[cfg(test)]")
                    first_test_line = text.count("\n", 0, test_from) + 1 if test_from >= 0 else None
                    for name, line, length in fn_lengths(text):
                        if first_test_line is not None and line > first_test_line:
                            continue
                        if length > MAX_FN_LINES:
                            found.append("%s:%d: fn %s is %d lines (over %d)" % (rel, line, name, length, MAX_FN_LINES))
    return found


def main(argv):
    findings = []
    for crate, root in CRATES.items():
        found, nodes, edges = module_findings(crate, root)
        findings += found
        if "--check" not in argv:
            print("%s: %d files, %d arrows" % (crate, len(nodes), sum(len(d) for d in edges.values())))
    findings += dependency_findings()
    findings += size_findings()
    for f in findings:
        print(f)
    if "--check" in argv:
        if findings:
            print("%d finding(s); see scripts/structure.py for what is checked" % len(findings))
            return 1
        print("structure: no circle, no forbidden dependency, no file or function over its limit")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
