"""Whether a timed repetition may follow another: the files the sandbox user can write are
as the first one found them, or differ only by Python's own bytecode caches.

A bench's first run in a fresh container writes __pycache__/*.pyc for the modules it
imports. Those must not stop the repetitions that follow (the first one, paying for the
compile, would then be the only figure), but a .pyc is also a file the code under test can
write anything into: an answer for this seed, kept for the next repetition. So a new or
changed .pyc passes only when it is exactly what CPython's import writes for the source
beside it: the magic number of the interpreter, a timestamp header matching the source's
mtime and size, and, loaded, a code object equal in every field (names, file name,
constants, nested code) to the source compiled afresh, with no byte after it. Anything
else, or a cache of another interpreter, ends the repetitions (the first one's figure is
kept, as before). The check runs as the sandbox user in an isolated interpreter, so a
hostile file can at worst fail it.
"""
import os
import stat
import sys

import guard

# Largest .pyc worth reading; a bigger one is not taken as a cache.
MAX_PYC_BYTES = 16 * 1024 * 1024

CHECKER = r"""
import importlib.util, io, marshal, os, sys
TAG = sys.implementation.cache_tag
CODE = type(compile("", "", "exec"))

def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, CODE):
        for name in dir(a):
            if not name.startswith("co_"):
                continue
            x, y = getattr(a, name), getattr(b, name)
            if callable(x):
                continue
            if name == "co_consts":
                if len(x) != len(y) or not all(same(p, q) for p, q in zip(x, y)):
                    return False
            elif x != y:
                return False
        return True
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
    # repr tells -0.0 from 0.0 and 1.0 from 1.0000000000000002 the same way marshal does.
    return a == b and repr(a) == repr(b)

def is_cache(pyc):
    folder, name = os.path.split(pyc)
    parts = name.split(".")
    if os.path.basename(folder) != "__pycache__" or parts[1:] != [TAG, "pyc"]:
        return False
    source = os.path.join(os.path.dirname(folder), parts[0] + ".py")
    st = os.stat(source)
    with open(source, "rb") as f:
        text = f.read()
    with open(pyc, "rb") as f:
        data = f.read(%d + 1)
    if len(data) > %d or data[:4] != importlib.util.MAGIC_NUMBER or data[4:8] != bytes(4):
        return False
    stamp = int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF
    if (int.from_bytes(data[8:12], "little"), int.from_bytes(data[12:16], "little")) != stamp:
        return False
    body = io.BytesIO(data[16:])
    code = marshal.load(body)
    if body.tell() != len(data) - 16:
        return False
    return same(code, compile(text, source, "exec", dont_inherit=True))

sys.exit(0 if all(is_cache(p) for p in sys.argv[1:]) else 1)
""" % (MAX_PYC_BYTES, MAX_PYC_BYTES)


def output_paths(opts):
    """The bench's own output files: made fresh for every repetition."""
    skip = {os.path.join(opts["out_dir"], "stdout"), os.path.join(opts["out_dir"], "stderr")}
    if opts["output_file"]:
        skip.add(os.path.join(guard.TESTBED, opts["output_file"]))
    return skip


def writable_files(cfg, opts):
    """(path, size, mtime) of every file the sandbox user can write: the tree, its home, the
    memory file systems and message queues; the bench's own output files left out."""
    return {(path, st.st_size, st.st_mtime_ns)
            for path, st in guard.writable_entries(cfg, output_paths(opts))
            if not stat.S_ISDIR(st.st_mode)}


def files_if_unchanged(cfg, opts, before, run_as_user):
    """The writable files now, when the next repetition may run from them (nothing but true
    bytecode caches changed since `before`), else None."""
    if guard.user_ipc(cfg["uid"]):
        return None  # shared memory or a queue it left: as good as a file
    now = writable_files(cfg, opts)
    caches = new_caches(before, now)
    if caches is None or not are_caches(caches, run_as_user):
        return None
    return now


def new_caches(before, after):
    """The .pyc files under a __pycache__ folder that are new or changed from `before` to
    `after` (sets of (path, size, mtime)), or None when anything else changed or went."""
    before_paths = {path for path, _, _ in before}
    after_paths = {path for path, _, _ in after}
    changed = {path for path, _, _ in after - before}
    if before_paths - after_paths:
        return None
    for path in changed:
        if os.path.basename(os.path.dirname(path)) != "__pycache__" or not path.endswith(".pyc"):
            return None
    return sorted(changed)


def are_caches(paths, run_as_user):
    """Whether every path is a true cache of its source; `run_as_user(argv)` runs argv as
    the sandbox user and returns its exit code."""
    if not paths:
        return True
    argv = [sys.executable, "-I", "-S", "-B", "-c", CHECKER] + list(paths)
    return run_as_user(argv) == 0
