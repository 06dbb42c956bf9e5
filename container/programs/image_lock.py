"""The image build's last step, after the guard has locked the tree (guard.py lock-image):
what every run of every variant shares, fixed before any code under test runs.

- The interpreter the harness's own programs run under as root is pinned: its path and its
  standard library's folders are recorded in /opt/harness-build/interpreter.json and made
  root's and writable by no one else. The supervisor execs it by that path after checking
  they still are (never `python3` from the image's PATH, which may lead to a file the
  sandbox user wrote).
- Bytecode caches of the tree are compiled by root and left root's (caches.py).
"""
import json
import os
import shutil
import stat
import subprocess
import sys

import caches

RECORD = "/opt/harness-build/interpreter.json"
TESTBED = "/testbed"
ASK = ("import json, sys, sysconfig; print(json.dumps([sys.executable, sysconfig.get_path('stdlib'), "
       "sysconfig.get_path('platstdlib'), [p for p in sys.path if p.endswith('lib-dynload')]]))")


def inside(path, folders):
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def describe(python):
    out = subprocess.run([python, "-I", "-S", "-c", ASK], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, check=False, env={"PATH": "/usr/bin:/bin"})
    exe, stdlib, platstdlib, dynload = json.loads(out.stdout)
    return os.path.realpath(exe), [os.path.realpath(p) for p in [stdlib, platstdlib] + dynload]


def choose(cfg):
    """(executable, library folders) of an interpreter outside the tree and the user's home:
    the one this step runs under, else the system's."""
    avoid = [TESTBED, cfg["home"]]
    for python in (sys.executable, "/usr/local/bin/python3", "/usr/bin/python3"):
        if not python or not os.path.exists(python):
            continue
        exe, library = describe(python)
        if not inside(exe, avoid) and not any(inside(p, avoid) for p in library):
            return exe, sorted(set(library))
    raise SystemExit("harness: no Python interpreter outside /testbed and the sandbox user's home "
                     "for the harness's own programs")


def fix(path, st):
    """Root's, and writable by root alone (only what is not already: an untouched file is not
    copied into the new layer)."""
    if st.st_uid != 0 or st.st_gid != 0 and st.st_mode & 0o020:
        os.lchown(path, 0, 0)
    if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)


def lock_interpreter(exe, library):
    for path in [exe] + library:
        here = path
        while True:
            fix(here, os.lstat(here))
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    for folder in library:
        for here, dirs, files in os.walk(folder):
            for name in dirs + files:
                full = os.path.join(here, name)
                fix(full, os.lstat(full))


def pinned_valgrind(cfg):
    """The simulator, by its real path, when it is root's and outside the tree and home."""
    found = shutil.which("valgrind", path="/usr/local/bin:/usr/bin:/bin")
    if not found:
        return None
    real = os.path.realpath(found)
    if inside(real, [TESTBED, cfg["home"]]):
        return None
    lock_interpreter(real, [])
    return real


def run(cfg):
    exe, library = choose(cfg)
    lock_interpreter(exe, library)
    with open(RECORD, "w") as f:
        json.dump({"executable": exe, "library": library, "valgrind": pinned_valgrind(cfg)}, f)
    os.chmod(RECORD, 0o644)
    # Root's caches are the image's, not the code's: git (patch attempts' resets, an
    # agent's diff, the tree's digests) leaves them out.
    exclude = os.path.join(TESTBED, ".git", "info", "exclude")
    if os.path.isdir(os.path.dirname(exclude)) and not os.path.islink(exclude):
        with open(exclude, "a") as f:
            f.write("\n__pycache__/\n*.py[co]\n")
    caches.lock([TESTBED])
    caches.compile_tree([TESTBED])
