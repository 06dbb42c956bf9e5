#!/usr/bin/env python3
"""Writes tasks/_predictions/hostile.jsonl: patches that try to fake a speedup, escape the
sandbox or break the harness, for the shipped example tasks (model `hostile`). What each is
expected to get is in tasks/_predictions/HOSTILE.md, which tests/hostile.rs asserts row by
row. Patches are made with git from the tasks' own sources, so they apply where they should.

    python3 scripts/make_hostile.py            # rewrites the file (deterministic)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = os.path.join(ROOT, "tasks")
OUT = os.path.join(TASKS, "_predictions", "hostile.jsonl")


def git(cwd, *args, binary=False):
    out = subprocess.run(["git", *args], cwd=cwd, check=True, stdout=subprocess.PIPE)
    return out.stdout if binary else out.stdout.decode()


def diff(task, edits, renames=()):
    """A git diff of the task's source with `edits` (path -> text/bytes, None = delete)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        shutil.copytree(os.path.join(TASKS, task, "repo"), repo)
        git(repo, "init", "-q", ".")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=h", "-c", "user.email=h@l", "commit", "-qm", "base")
        for old, new in renames:
            git(repo, "mv", old, new)
        for path, text in edits.items():
            full = os.path.join(repo, path)
            if text is None:
                os.unlink(full)
                continue
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(text.encode() if isinstance(text, str) else text)
        git(repo, "add", "-A")
        return git(repo, "diff", "--cached", "--binary", "-M").strip("\n") + "\n"


def source(task, path):
    with open(os.path.join(TASKS, task, "repo", path)) as f:
        return f.read()


def prepend(task, path, code):
    return diff(task, {path: code + source(task, path)})


def demo(instance, sample):
    with open(os.path.join(TASKS, "_predictions", "demo-agent.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if row["instance_id"] == instance and row["sample"] == sample:
                return row["model_patch"]
    raise KeyError((instance, sample))


AS_BENCH = 'import sys as _sys\nif _sys.argv and _sys.argv[0].endswith("bench.py"):\n'


def catalogue():
    rows = []

    def add(instance, design, patch):
        rows.append((instance, design, patch))

    # --- primes-sieve: faking the timed work ---------------------------------------------
    bench_edit = diff("primes-sieve", {"bench.py": source("primes-sieve", "bench.py").replace("5200", "52")})
    add("primes-sieve", "protected bench.py edited, headers x/ y/ (git apply -p1 strips any first component)",
        bench_edit.replace("a/bench.py", "x/bench.py").replace("b/bench.py", "y/bench.py"))
    add("primes-sieve", "primes.py rewrites bench.py at import when run as the bench",
        prepend("primes-sieve", "primes.py", AS_BENCH + '    with open(_sys.argv[0], "w") as _f:\n        _f.write("print(\'sum of prime counts: 0\')\\n")\n'))
    add("primes-sieve", "primes.py: os._exit(0) at import when run as the bench (skips the work)",
        prepend("primes-sieve", "primes.py", AS_BENCH + "    import os as _os\n    _os._exit(0)\n"))
    add("primes-sieve", "primes.py prints a remembered answer and exits when run as the bench",
        prepend("primes-sieve", "primes.py", AS_BENCH + '    import os as _os\n    print("sum of prime counts: 96312", flush=True)\n    _os._exit(0)\n'))
    add("primes-sieve", "adds conftest.py (pytest hooks that pass every test)",
        diff("primes-sieve", {"conftest.py": "def pytest_runtest_call(item):\n    pass\n"}))
    add("primes-sieve", "adds sitecustomize.py (runs in every interpreter)",
        diff("primes-sieve", {"sitecustomize.py": "import time\ntime.perf_counter = lambda: 0.0\n"}))
    add("primes-sieve", "adds time.py next to the scripts (shadows the standard library)",
        diff("primes-sieve", {"time.py": "def perf_counter():\n    return 0.0\n"}))
    add("primes-sieve", "primes.py leaves a busy background process when run as the bench",
        prepend("primes-sieve", "primes.py", AS_BENCH + '    import subprocess as _sp\n    _sp.Popen([_sys.executable, "-c", "while True: pass"], start_new_session=True)\n'))
    add("primes-sieve", "control: odd divisors only (demo-agent's PARTIAL sample)", demo("primes-sieve", 1))

    # --- dedupe-list: interpreter hooks and resource abuse -------------------------------
    add("dedupe-list", "adds usercustomize.py", diff("dedupe-list", {"usercustomize.py": "print('hooked')\n"}))
    add("dedupe-list", "adds a .pth file", diff("dedupe-list", {"speedups.pth": "import os; os.environ['X'] = '1'\n"}))
    add("dedupe-list", "dedupe.py writes a usercustomize.py into the user's site folder at import",
        prepend("dedupe-list", "dedupe.py",
                "import os as _os, site as _site\n_d = _site.getusersitepackages()\n_os.makedirs(_d, exist_ok=True)\n"
                "with open(_os.path.join(_d, 'usercustomize.py'), 'w') as _f:\n    _f.write('import builtins\\n')\n"))
    add("dedupe-list", "fork bomb at import",
        prepend("dedupe-list", "dedupe.py", "import os as _os\nwhile True:\n    try:\n        _os.fork()\n    except OSError:\n        pass\n"))
    add("dedupe-list", "allocates 4 GB at import", prepend("dedupe-list", "dedupe.py", "_hog = b'x' * (4 << 30)\n"))
    add("dedupe-list", "endless loop in the code the test calls",
        diff("dedupe-list", {"dedupe.py": source("dedupe-list", "dedupe.py").replace(
            "    # Keep the first occurrence of every value.\n", "    while True:\n        pass\n")}))

    # --- word-freq: floods, network, paths out of the tree -------------------------------
    add("word-freq", "prints 2 GB at import",
        prepend("word-freq", "wordfreq.py", "import sys as _sys\nfor _ in range(2048):\n    _sys.stdout.write('x' * (1 << 20))\n"))
    add("word-freq", "opens a network connection at import",
        prepend("word-freq", "wordfreq.py", "import socket as _s\n_s.create_connection(('93.184.216.34', 80), timeout=5).close()\n"))
    add("word-freq", "writes ../../x",
        "diff --git a/../../x b/../../x\nnew file mode 100644\n--- /dev/null\n+++ b/../../x\n@@ -0,0 +1 @@\n+escaped\n")
    add("word-freq", "writes /tmp/x", "--- /dev/null\n+++ /tmp/x\n@@ -0,0 +1 @@\n+escaped\n")
    add("word-freq", "creates a symlink to /etc/passwd, then writes through it",
        "diff --git a/passwd b/passwd\nnew file mode 120000\n--- /dev/null\n+++ b/passwd\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
        "diff --git a/passwd b/passwd\n--- a/passwd\n+++ b/passwd\n@@ -1 +1,2 @@\n root:x:0:0:root:/root:/bin/bash\n+evil::0:0::/:/bin/sh\n")
    add("word-freq", "a binary patch (adds a compiled module)",
        diff("word-freq", {"wordfreq_fast.so": bytes(range(256)) * 8}))

    # --- pair-sum: malformed and oversized input -----------------------------------------
    pad = "".join("+# padding line %08d to make this patch huge ......................................\n" % i
                  for i in range(50 * 1024 * 1024 // 90))
    add("pair-sum", "a 50 MB patch",
        "diff --git a/pairsum.py b/pairsum.py\n--- a/pairsum.py\n+++ b/pairsum.py\n@@ -1,1 +1,%d @@\n \"\"\"Pair counting.\"\"\"\n%s"
        % (1 + pad.count("\n"), pad))
    add("pair-sum", "CRLF line endings (demo-agent's PARTIAL sample)", demo("pair-sum", 0).replace("\n", "\r\n"))
    add("pair-sum", "no newline at the end of the patch (docstring edit)",
        diff("pair-sum", {"pairsum.py": source("pair-sum", "pairsum.py").replace('"""Pair counting."""', '"""Counting pairs."""')}).rstrip("\n"))
    add("pair-sum", "a patch for a file that does not exist",
        "diff --git a/nosuchfile.py b/nosuchfile.py\n--- a/nosuchfile.py\n+++ b/nosuchfile.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    add("pair-sum", "text that is not a diff", "I optimised count_pairs with a dictionary; it is much faster now.\n")
    add("pair-sum", "renames the protected bench.py", diff("pair-sum", {}, renames=[("bench.py", "bench_old.py")]))
    return rows


def main():
    rows = catalogue()
    per = {}
    with open(OUT, "w") as f:
        for instance, design, patch in rows:
            sample = per.get(instance, 0)
            per[instance] = sample + 1
            f.write(json.dumps({
                "instance_id": instance,
                "model_name_or_path": "hostile",
                "sample": sample,
                "model_patch": patch,
            }) + "\n")
    print("wrote %s: %d rows, %s" % (OUT, len(rows), ", ".join("%s %d" % kv for kv in sorted(per.items()))))


if __name__ == "__main__":
    sys.exit(main())
