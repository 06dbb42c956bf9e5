#!/usr/bin/env python3
"""Keeps the code under test away from the files that judge it.

Inside a task container the code under test (install, test and bench commands, and the
patch's own code) runs as an unprivileged user, RUN_UID. This module, run as root, sets that
up and checks it held:

- lock: every directory of /testbed is root-owned and world-writable with the sticky bit
  (like /tmp: anyone may add files, nobody may remove or rename what is not theirs), every
  protected file is root-owned and read-only, every other file belongs to RUN_UID. So the
  code may build, write caches and edit its own files, but cannot change, replace, rename or
  delete a protected file.
- snapshot / verify: content digests of the protected files (and of the harness's own files
  and the interpreter), taken after the patch is applied and compared after every install,
  test and bench run. Also watched: files matching a protected pattern that appear later
  (a conftest.py written at run time), and Python start-up hooks in the user's site folder.
- kill_user: every process of RUN_UID is killed after each run, so nothing the code left
  running disturbs the next measurement (of another variant: they share cores).

Protected patterns arrive as regular expressions over '/'-separated repository paths, in a
syntax common to Python's re and Rust's regex (the harness translates the task's globs).
Used at image build time (lock-image) and at run time (after-apply), by timed_run.py, and
only with the standard library, under `python3 -I -S`.
"""
import hashlib
import json
import os
import re
import stat
import subprocess
import sys

TESTBED = "/testbed"
CONFIG = "/opt/harness/config.json"
MANIFEST = "/opt/harness/manifest.json"
RESULT_PREFIX = "HARNESS_RESULT"
# Folders whose contents are caches, never sources: not protected, not walked.
SKIP_DIRS = {".git", "__pycache__"}
# Python start-up hooks: a file of one of these names in a site folder runs in every
# interpreter that starts, the timer's excepted (it runs with -I -S).
STARTUP_HOOK = re.compile(r"(^|.*/)(sitecustomize\.py|usercustomize\.py|[^/]*\.pth)$")


def load_config(path=CONFIG):
    with open(path) as f:
        cfg = json.load(f)
    cfg["_protected"] = [re.compile(p) for p in cfg.get("protected", [])]
    return cfg


def is_protected(rel, cfg):
    return any(r.match(rel) for r in cfg["_protected"])


def walk(root, skip=SKIP_DIRS):
    """Root-relative paths of every file and symlink under root (symlinks not followed)."""
    out = []
    for here, dirs, files in os.walk(root):
        links = [d for d in dirs if os.path.islink(os.path.join(here, d))]
        dirs[:] = sorted(d for d in dirs if d not in skip and d not in links)
        rel_here = os.path.relpath(here, root)
        for name in sorted(files + links):
            out.append(name if rel_here == "." else rel_here + "/" + name)
    return out


def ensure_user(cfg):
    """Adds RUN_UID's user and group without useradd (not every base image has it)."""
    uid, gid, name, home = cfg["uid"], cfg["gid"], cfg["user"], cfg["home"]
    with open("/etc/passwd") as f:
        have_user = any(line.split(":")[2:3] == [str(uid)] for line in f if line.count(":") >= 2)
    if not have_user:
        with open("/etc/passwd", "a") as f:
            f.write("%s:x:%d:%d:harness sandbox user:%s:/bin/sh\n" % (name, uid, gid, home))
    with open("/etc/group") as f:
        have_group = any(line.split(":")[2:3] == [str(gid)] for line in f if line.count(":") >= 2)
    if not have_group:
        with open("/etc/group", "a") as f:
            f.write("%s:x:%d:\n" % (name, gid))
    os.makedirs(home, exist_ok=True)
    os.chown(home, uid, gid)
    os.chmod(home, 0o755)
    # git refuses a repository owned by another user unless told it is safe.
    with open("/etc/gitconfig", "a") as f:
        f.write("[safe]\n\tdirectory = *\n")


def lock_path(full, rel, cfg):
    st = os.lstat(full)
    if stat.S_ISDIR(st.st_mode):
        os.chown(full, 0, 0)
        os.chmod(full, 0o1777)
    elif rel is not None and is_protected(rel, cfg):
        os.lchown(full, 0, 0)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(full, stat.S_IMODE(st.st_mode) & 0o555)
    else:
        os.lchown(full, cfg["uid"], cfg["gid"])
        if not stat.S_ISLNK(st.st_mode):
            # Never a set-id bit on anything the sandbox user owns.
            os.chmod(full, stat.S_IMODE(st.st_mode) & 0o777)


def lock_tree(cfg):
    """The whole tree, .git included (the sandbox user resets it between patch attempts)."""
    for here, dirs, files in os.walk(TESTBED):
        lock_path(here, None, cfg)
        rel_here = os.path.relpath(here, TESTBED)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            rel = name if rel_here == "." else rel_here + "/" + name
            lock_path(os.path.join(here, name), None if rel.startswith(".git/") else rel, cfg)


def status_entries(ignored=False):
    """(XY code, path) of what differs from the base commit, untracked files included."""
    args = ["git", "-c", "safe.directory=*", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
    if ignored:
        args.append("--ignored=matching")
    out = subprocess.run(
        args, cwd=TESTBED, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False,
    ).stdout.decode("utf-8", "surrogateescape")
    return [(entry[:2], entry[3:]) for entry in out.split("\0") if len(entry) > 3]


def changed_paths():
    return [path for _, path in status_entries()]


def tree_digests(cfg):
    """Two digests of the tree as the patch left it, from one pass over every path that
    differs from base (with its executable bit, or "missing"); ignored files count when their
    mtime is not the image's fixed one (a patch wrote them).
    - tree: by content. Equal digests = byte-identical trees.
    - code: the same, but a Python file counts by its syntax tree (ast.dump, without
      positions) rather than its bytes. Equal digests = trees that differ at most in the
      comments and layout of Python files, so they run the same instructions (only line
      numbers differ). Docstrings are code (they are in the tree); a file that does not
      parse counts by its bytes."""
    source_mtime = cfg.get("source_mtime")
    tree, code = hashlib.sha256(), hashlib.sha256()
    for status, rel in sorted(status_entries(ignored=True), key=lambda e: e[1]):
        full = os.path.join(TESTBED, rel)
        if status == "!!":
            try:
                if source_mtime is None or int(os.lstat(full).st_mtime) == source_mtime:
                    continue
            except OSError:
                continue
        by_content = digest(full)
        by_code = (python_code(full) if rel.endswith(".py") else None) or by_content
        mode = ""
        try:
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
                mode = ":x"
        except OSError:
            pass
        name = rel.encode("utf-8", "surrogateescape") + b"\0"
        tree.update(name + (by_content + mode).encode() + b"\0")
        code.update(name + (by_code + mode).encode() + b"\0")
    return "sha256:" + tree.hexdigest(), "sha256:" + code.hexdigest()


def python_code(full):
    """The digest of a Python file's syntax tree, or None when it is not a regular file or
    does not parse."""
    import ast
    try:
        st = os.lstat(full)
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(full, "rb") as f:
            source = f.read()
        dumped = ast.dump(ast.parse(source, filename=full), include_attributes=False)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return "ast:" + hashlib.sha256(dumped.encode("utf-8", "surrogateescape")).hexdigest()


def lock_changed(cfg):
    """After a patch: the files it changed or made, and the folders it made."""
    for rel in changed_paths():
        full = os.path.join(TESTBED, rel)
        if not os.path.lexists(full):
            continue
        lock_path(full, rel, cfg)
        parent = os.path.dirname(rel)
        while parent:
            lock_path(os.path.join(TESTBED, parent), None, cfg)
            parent = os.path.dirname(parent)


def digest(full):
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return "symlink:" + os.readlink(full)
    if not stat.S_ISREG(st.st_mode):
        return "type:%o" % stat.S_IFMT(st.st_mode)
    h = hashlib.sha256()
    with open(full, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            h.update(block)
    return "sha256:" + h.hexdigest()


def user_site_hooks(cfg):
    """Start-up hooks in the sandbox user's home (pip --user and site put them there)."""
    home = cfg["home"]
    found = {}
    for rel in walk(home, skip={"__pycache__"}):
        if STARTUP_HOOK.match(rel):
            found["~/" + rel] = digest(os.path.join(home, rel))
    return found


def snapshot(cfg):
    """path -> digest of everything watched: protected files of the tree, the harness's own
    files and interpreter (absolute paths), start-up hooks in the user's home (~/...)."""
    snap = {}
    for rel in walk(TESTBED):
        if is_protected(rel, cfg):
            snap[rel] = digest(os.path.join(TESTBED, rel))
    for path in cfg.get("extras", []) + [os.path.realpath(sys.executable)]:
        snap[path] = digest(path)
    snap.update(user_site_hooks(cfg))
    return snap


def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)


def changes(cfg, manifest=None):
    """What differs from the manifest: path -> new digest ("missing" when gone)."""
    if manifest is None:
        manifest = load_manifest()
    now = snapshot(cfg)
    diff = {}
    for path in sorted(set(manifest) | set(now)):
        before, after = manifest.get(path, "missing"), now.get(path, "missing")
        if before != after:
            diff[path] = after
    return diff


def clear_planted_bytecode(cfg, manifest=None):
    """A .pyc the sandbox user put beside a protected module would be imported instead of
    it (same recorded mtime and size): such files are removed before every run."""
    if manifest is None:
        manifest = load_manifest()
    removed = []
    for rel in manifest:
        if rel.startswith("/") or rel.startswith("~/") or not rel.endswith(".py"):
            continue
        cache = os.path.join(TESTBED, os.path.dirname(rel), "__pycache__")
        stem = os.path.basename(rel)[:-3] + "."
        try:
            names = os.listdir(cache)
        except OSError:
            continue
        for name in names:
            full = os.path.join(cache, name)
            if name.startswith(stem) and name.endswith(".pyc"):
                try:
                    if os.lstat(full).st_uid != 0:
                        os.unlink(full)
                        removed.append(os.path.relpath(full, TESTBED))
                except OSError:
                    pass
    return removed


def user_pids(uid):
    """Live (not zombie) processes of uid."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat("/proc/" + name).st_uid != uid:
                continue
            with open("/proc/%s/stat" % name) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state not in ("Z", "X"):
                pids.append(int(name))
        except (OSError, IndexError):
            pass
    return pids


def kill_user(uid, rounds=200):
    """SIGKILLs every process of uid, again until none is left (a fork bomb refills).
    Returns how many distinct processes were killed."""
    killed = set()
    for _ in range(rounds):
        pids = user_pids(uid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, 9)
                killed.add(pid)
            except OSError:
                pass
        # Zombies are skipped: the caller reaps its own child, the container's init the rest.
    return len(killed)


def emit(result):
    nonce = os.environ.get("HARNESS_NONCE", "")
    sys.stdout.write("\n%s%s %s\n" % (RESULT_PREFIX, ":" + nonce if nonce else "", json.dumps(result)))
    sys.stdout.flush()


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: guard.py lock-image CONFIG | after-apply | snapshot\n")
        return 2
    cmd = argv[1]
    if cmd == "lock-image":
        cfg = load_config(argv[2])
        ensure_user(cfg)
        lock_tree(cfg)
        return 0
    cfg = load_config()
    if cmd == "after-apply":
        tree, code = tree_digests(cfg)
        lock_changed(cfg)
        snap = snapshot(cfg)
        tmp = MANIFEST + ".tmp"
        with open(tmp, "w") as f:
            json.dump(snap, f, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, MANIFEST)
        emit({"snapshot": snap, "tree": tree, "code": code})
        return 0
    if cmd == "snapshot":
        emit({"snapshot": snapshot(cfg), "changes": changes(cfg)})
        return 0
    sys.stderr.write("guard.py: unknown command %r\n" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
