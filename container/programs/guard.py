#!/usr/bin/env python3
"""Keeps the code under test away from the files that judge it.

Inside a task container the code under test (install, test and bench commands, and the
patch's own code) runs as an unprivileged user, RUN_UID. This module sets that up and checks
it held: at image build as root, at run time as the warden (WARDEN_UID, an unprivileged user
of the harness's own), asking root's supervisor for what needs root (broker.py):

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

Protected files and the tree's folders are root's; what the warden makes at run time (its
bytecode caches, its state) is the warden's: neither is the sandbox user's to change.

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
import sys

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from processes import kill_user, live_threads, uids_of, user_processes  # noqa: E402,F401
from timer_contract import line as result_line, undecodable  # noqa: E402
from treewalk import (GIT_ENV, GIT_SAFE, MAX_DEPTH, SKIP_DIRS, TESTBED, TRUSTED, UNWALKABLE,  # noqa: E402,F401
                      WARDEN_GID, WARDEN_UID, WARDEN_USER, digest, is_protected, iwalk, read_regular, walk)

# What the guard watches besides the protected files (watched.py), and git (subprocess),
# are imported when first needed: a timed run's timer needs neither, and every module it
# imports is paid at every timed exec.
def snapshot(cfg):
    import watched
    return watched.snapshot(cfg)


def installed_modules():
    import watched
    return watched.installed_modules()


def base_tree_paths():
    import watched
    return watched.base_tree_paths()


def written_changes(cfg, written):
    import watched
    return watched.written_changes(cfg, written)


def run_git(args):
    """The output of the guard's git (GIT_SAFE) in the tree, as text."""
    import subprocess
    return subprocess.run(GIT_SAFE + args, cwd=TESTBED, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          check=False, env=GIT_ENV).stdout.decode("utf-8", "surrogateescape")


CONFIG = "/opt/harness/config.json"
MANIFEST = "/opt/harness/var/manifest.json"
def load_config(path=CONFIG):
    with open(path) as f:
        cfg = json.load(f)
    cfg["_protected"] = [re.compile(p) for p in cfg.get("protected", [])]
    state = load_state()
    installed = state.get("installed_modules")
    if installed is not None:
        cfg["_installed"] = set(installed)
    # Read by root's git right after the patch, before any code under test ran: later, the
    # repository is the sandbox user's to change (its refs, a `commondir`), and root's git
    # must not read it.
    base_paths = state.get("base_paths")
    if base_paths is not None:
        cfg["_base_paths"] = set(base_paths)
    return cfg


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
    for who, wid in ((WARDEN_USER, WARDEN_UID),):
        with open("/etc/passwd") as f:
            known = any(line.split(":")[2:3] == [str(wid)] for line in f if line.count(":") >= 2)
        if not known:
            with open("/etc/passwd", "a") as f:
                f.write("%s:x:%d:%d:harness warden:/nonexistent:/usr/sbin/nologin\n" % (who, wid, wid))
            with open("/etc/group", "a") as f:
                f.write("%s:x:%d:\n" % (who, wid))
    os.makedirs(home, exist_ok=True)
    os.chown(home, uid, gid)
    os.chmod(home, 0o755)
    # git refuses a repository owned by another user unless told it is safe.
    with open("/etc/gitconfig", "a") as f:
        f.write("[safe]\n\tdirectory = *\n")


def set_owner(full, uid, gid, mode=None):
    """Gives `full` to uid:gid, with `mode` unless it is a symlink: directly at image build
    (root), through root's supervisor at run time (the warden)."""
    if os.geteuid() == 0:
        os.lchown(full, uid, gid)
        if mode is not None and not os.path.islink(full):
            os.chmod(full, mode)
    else:
        broker.chown(full, uid, gid, mode)


def lock_path(full, rel, cfg):
    st = os.lstat(full)
    if stat.S_ISDIR(st.st_mode):
        set_owner(full, 0, 0, 0o1777)
    elif rel is not None and is_protected(rel, cfg):
        set_owner(full, 0, 0, None if stat.S_ISLNK(st.st_mode) else stat.S_IMODE(st.st_mode) & 0o555)
    else:
        # Never a set-id bit on anything the sandbox user owns; readable by others, so the
        # warden reads what it checks without root.
        mode = None if stat.S_ISLNK(st.st_mode) else (stat.S_IMODE(st.st_mode) & 0o777) | 0o004
        set_owner(full, cfg["uid"], cfg["gid"], mode)


def image_environment():
    """In a prebuilt image (no fixed source mtime): the paths git ignores at base, which are
    the image's own environment (a virtualenv, build outputs), as prefixes ("x/" a folder)."""
    out = run_git(["status", "--porcelain=v1", "-z", "--ignored=matching", "--untracked-files=normal"])
    return tuple(e[3:] for e in out.split("\0") if e.startswith("!! "))


def in_environment(rel, env):
    return any(rel == p.rstrip("/") or (p.endswith("/") and rel.startswith(p)) for p in env)


def open_environment_path(full, rel, cfg):
    """A path of a prebuilt image's environment: left as the image has it where the sandbox
    user can already use it, so locking does not copy it into a new layer. Folders are made
    writable for all without the sticky bit (the user may replace what install replaces);
    a file is the user's only when it is not writable for all already; protected files are
    locked as anywhere."""
    st = os.lstat(full)
    if stat.S_ISDIR(st.st_mode):
        if stat.S_IMODE(st.st_mode) != 0o777:
            os.chmod(full, 0o777)
        # The user's at the tree's top (sticky): an install may make it anew (`uv venv`).
        if "/" not in rel and (st.st_uid, st.st_gid) != (cfg["uid"], cfg["gid"]):
            set_owner(full, cfg["uid"], cfg["gid"])
    elif stat.S_ISLNK(st.st_mode):
        return
    elif is_protected(rel, cfg) or stat.S_IMODE(st.st_mode) & 0o006 != 0o006 or st.st_mode & 0o6000:
        lock_path(full, rel, cfg)


def lock_tree(cfg):
    """The whole tree, .git included (the sandbox user resets it between patch attempts),
    but .git/config, which only root's git reads from then on, and must not be able to make
    it run a command. In a prebuilt image, its environment (ignored paths) and git's object
    store are left where the user can already use them (see open_environment_path)."""
    prebuilt = cfg.get("source_mtime") is None
    env = image_environment() if prebuilt else ()
    for here, dirs, files in iwalk(TESTBED):
        rel_here = os.path.relpath(here, TESTBED)
        if env and rel_here != "." and in_environment(rel_here, env):
            open_environment_path(here, rel_here, cfg)
        else:
            lock_path(here, None, cfg)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            rel = name if rel_here == "." else rel_here + "/" + name
            full = os.path.join(here, name)
            if prebuilt and rel.startswith(".git/objects/") and not os.path.islink(full):
                continue  # read-only objects: git never rewrites them
            if env and in_environment(rel, env):
                open_environment_path(full, rel, cfg)
            else:
                lock_path(full, None if rel.startswith(".git/") else rel, cfg)
    config = os.path.join(TESTBED, ".git", "config")
    if os.path.isfile(config) and not os.path.islink(config):
        os.chown(config, 0, 0)
        os.chmod(config, 0o444)


# Where the sandbox user may write at run time besides the tree and its home: size-limited
# memory file systems the harness mounts over these paths (and /dev/shm, Docker's own).
TMPFS_PATHS = ("/tmp", "/var/tmp", "/run/harness", "/dev/shm")
NOT_WALKED = ("/proc", "/sys", "/dev")


def lock_root_fs(cfg):
    """Takes write permission for others off every folder and file of the image outside the
    tree, the sandbox user's home and the tmpfs paths (e.g. /run/lock, a world-writable
    /var/mail): the only disk the code under test can fill is what the harness measures."""
    keep = (TESTBED, cfg["home"]) + TMPFS_PATHS
    fixed = []
    for here, dirs, files in iwalk("/"):
        if here in NOT_WALKED or here in keep or any(here.startswith(k + "/") for k in keep + NOT_WALKED):
            dirs[:] = []
            continue
        for name in [here] + [os.path.join(here, n) for n in files + dirs]:
            try:
                st = os.lstat(name)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o002 or name in keep:
                continue
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                continue
            os.chmod(name, stat.S_IMODE(st.st_mode) & ~0o002)
            fixed.append(name)
    return fixed


def status_entries(ignored=False):
    """(XY code, path) of what differs from the base commit, untracked files included."""
    args = ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
    if ignored:
        args.append("--ignored=matching")
    out = run_git(args)
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
        is_folder = os.path.isdir(full) and not os.path.islink(full)
        by_content = digest_folder(full) if is_folder else digest(full)
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


def digest_folder(top):
    """A folder that git status names as one path (a submodule, a nested repository, an
    ignored folder): by every entry under it, folders (empty ones too) and executable bits
    included, but its own .git, so that trees which differ inside it never count as
    identical."""
    entries = []
    for here, dirs, files in iwalk(top):
        if here == top:
            dirs[:] = [d for d in dirs if d != ".git"]
            files = [f for f in files if f != ".git"]
        for name in files + dirs:
            entries.append(os.path.relpath(os.path.join(here, name), top))
    h = hashlib.sha256()
    for rel in sorted(entries):
        full = os.path.join(top, rel)
        try:
            st = os.lstat(full)
            kind = "d" if stat.S_ISDIR(st.st_mode) else "x" if st.st_mode & 0o111 else "f"
        except OSError:
            kind = "?"
        what = kind if kind == "d" else kind + digest(full)
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + what.encode() + b"\0")
    return "folder:" + h.hexdigest()


def python_code(full):
    """The digest of a Python file's syntax tree, or None when it is not a regular file or
    does not parse."""
    import ast
    try:
        source = read_regular(full)
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


def human_paths(patch, commit):
    """The tree's paths the human's change touches: those its patch names (git reads them
    off the patch, applying nothing) and, for a commit the image holds, those it changes."""
    paths = set()
    if os.path.isfile(patch) and os.path.getsize(patch) > 0:
        out = run_git(["apply", "--numstat", "-z", patch])
        # "added\tdeleted\tpath\0", or for a rename "added\tdeleted\t\0old\0new\0".
        for field in out.split("\0"):
            name = field.split("\t")[-1]
            if name:
                paths.add(name)
    if commit:
        out = run_git(["diff", "--name-only", "-z", "--no-renames", "harness-base^", commit, "--"])
        paths |= {p for p in out.split("\0") if p}
    return sorted(p for p in paths if not p.startswith("/") and ".." not in p.split("/"))


def unlock_human(cfg, patch, commit):
    """Before the human's application, which runs as the sandbox user like every other
    (nothing of the image runs as root): what it touches and root holds (protected files,
    the folders above them and everything in a folder it removes, .git/config for a commit
    with submodules) is handed to the sandbox user. after-apply hands it all back. The human's
    change is the task's own and trusted; nothing of a sample has run in its container."""
    unlocked = []
    todo = [os.path.join(TESTBED, p) for p in human_paths(patch, commit)]
    if commit:
        todo.append(os.path.join(TESTBED, ".git", "config"))
    seen = set()
    for full in todo:
        here = full
        chain = []
        while here.startswith(TESTBED + "/"):
            chain.append(here)
            here = os.path.dirname(here)
        for path in chain:
            if path in seen or not os.path.lexists(path):
                continue
            seen.add(path)
            inside = [path]
            if os.path.isdir(path) and not os.path.islink(path) and path == full:
                for top, dirs, files in iwalk(path):
                    inside += [os.path.join(top, n) for n in dirs + files]
            for item in inside:
                try:
                    st = os.lstat(item)
                except OSError:
                    continue
                if st.st_uid in TRUSTED:
                    mode = None if stat.S_ISLNK(st.st_mode) else stat.S_IMODE(st.st_mode) | 0o200
                    set_owner(item, cfg["uid"], cfg["gid"], mode)
                    unlocked.append(os.path.relpath(item, TESTBED))
    state = load_state()
    state["unlocked"] = unlocked
    write_json_atomic(STATE, state)
    return unlocked


def relock_protected(cfg):
    """After the human's application: what unlock_human handed over is locked again."""
    state = load_state()
    for rel in state.pop("unlocked", []):
        full = os.path.join(TESTBED, rel)
        if not os.path.lexists(full):
            continue
        if rel == ".git/config":
            set_owner(full, 0, 0, 0o444)
        elif rel.startswith(".git/"):
            lock_path(full, None, cfg)
        else:
            lock_path(full, rel, cfg)
    write_json_atomic(STATE, state)


def free_bytes():
    """Free space of the tree's file system (None when it cannot be read): a drop is a
    reason for the disk watchdogs to count, never a verdict."""
    try:
        st = os.statvfs(TESTBED)
        return st.f_bavail * st.f_frsize
    except OSError:
        return None


def disk_usage(cfg):
    """Bytes the tree (with .git) and the sandbox user's home take on disk: the only places
    on the container's own, disk-backed file system it can write (see lock_root_fs). At run
    time root counts them (a folder the user closed to others counts too), and the files
    deleted there but still held open."""
    if broker.available():
        # Files unlinked but held open take disk no walk sees: root counts them too.
        return broker.held() + sum(broker.du(root) for root in (TESTBED, cfg["home"])
                                   if os.path.lexists(root))
    total = 0
    for root in (TESTBED, cfg["home"]):
        for here, dirs, files in iwalk(root):
            for name in files + dirs:
                try:
                    total += os.lstat(os.path.join(here, name)).st_blocks * 512
                except OSError:
                    pass
    return total


STATE = "/opt/harness/var/state.json"
MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def layer_size(cfg):
    """What one sandboxed run may write in all (tree, home, /tmp...): the task's disk limit,
    held in memory and charged to the container's, so at most half the container's memory
    (a run that fills it is stopped as past the disk limit, before the OOM killer would take
    the harness's own processes)."""
    size = int(cfg.get("disk_limit") or 0) or (1 << 30)
    for path in MEMORY_LIMITS:
        try:
            with open(path) as f:
                size = min(size, int(f.read().strip()) // 2)
            break
        except (OSError, ValueError):
            continue
    return max(size, 16 << 20)
def load_state():
    try:
        with open(STATE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


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
                    if os.lstat(full).st_uid not in TRUSTED:
                        if broker.available():
                            broker.remove(full)
                        else:
                            os.unlink(full)
                        removed.append(os.path.relpath(full, TESTBED))
                except OSError:
                    pass
    return removed


def write_json_atomic(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def emit(result):
    sys.stdout.write(result_line(result))
    sys.stdout.flush()


def after_apply(cfg):
    """Locks what the patch changed and takes the manifest every later run is checked
    against: {"snapshot", "tree", "code"}, or {"tree_error"} when the tree holds a folder
    the guard could not read."""
    # Nothing of the sandbox user's may outlive the patch's application.
    kill_user(cfg["uid"], cfg["gid"])
    if load_state().get("unlocked"):
        # The human's application ran with the protected files handed to the sandbox user
        # (unlock): every one of them is root's again, changed or not.
        relock_protected(cfg)
    tree, code = tree_digests(cfg)
    lock_changed(cfg)
    installed = sorted(installed_modules())
    cfg["_installed"] = set(installed)
    snap = snapshot(cfg)
    bad_name = undecodable(snap) or undecodable(cfg.get("_base_paths") or [])
    if bad_name is not None:
        # A name that is not UTF-8 cannot be compared, shown or diffed faithfully: refused.
        return {"tree_error": "the patch made a file name that is not UTF-8: %s"
                              % bad_name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")}
    if UNWALKABLE:
        return {"tree_error": "the guard cannot read %s%s" % (
            UNWALKABLE[0], " and %d more" % (len(UNWALKABLE) - 1) if len(UNWALKABLE) > 1 else "")}
    write_json_atomic(MANIFEST, snap)
    write_json_atomic(STATE, {"disk_base": disk_usage(cfg), "installed_modules": installed,
                              "base_paths": sorted(cfg.get("_base_paths") or base_tree_paths())})
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import caches
    caches.prime_access_times([TESTBED, cfg["home"]])
    return {"snapshot": snap, "tree": tree, "code": code}


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: guard.py lock-image CONFIG | after-apply | unlock-human PATCH [COMMIT]"
                         " | snapshot\n")
        return 2
    cmd = argv[1]
    if cmd == "lock-image":
        cfg = load_config(argv[2])
        ensure_user(cfg)
        lock_tree(cfg)
        lock_root_fs(cfg)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import image_lock  # beside this file in the build context
        image_lock.run(cfg)
        return 0
    cfg = load_config()
    if cmd == "after-apply":
        try:
            emit(after_apply(cfg))
        except (OSError, RecursionError, MemoryError, UnicodeError) as e:
            # What the patch made cannot be checked: the patch's fault, never the harness's.
            emit({"tree_error": "the guard cannot check the tree the patch made: %s: %s"
                                % (type(e).__name__, e)})
        return 0
    if cmd == "unlock-human":
        # argv: PATCH [COMMIT]
        unlocked = unlock_human(cfg, argv[2], argv[3] if len(argv) > 3 else "")
        emit({"unlocked": len(unlocked)})
        return 0
    if cmd == "snapshot":
        emit({"snapshot": snapshot(cfg), "changes": changes(cfg)})
        return 0
    sys.stderr.write("guard.py: unknown command %r\n" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
