"""Python's bytecode caches: the same for every variant, written by no code under test.

Every timed run starts in a fresh sandbox, so a cache a run writes is gone after it, and a
module without a valid cache would be compiled in every timed run. So the harness compiles
the tree: root at image build (base's sources), the warden after each install (what the
patch and the install changed), with the harness's own pinned interpreter. Before that,
every cache folder the sandbox user made (during the install, say) is removed (by root's
supervisor, for the warden): a cache the code under test wrote is never loaded by a later
run, forged or not. The harness's cache folders are root's or the warden's and read-only to
the user, so the user cannot put a file in them.

Compiling runs nothing of the source (compile() only); a cache folder that is a symlink or
the user's is removed before root writes anything (root would otherwise write through it).
The tree is walked iteratively (no depth limit) without following symlinks.
"""
import compileall
import importlib.util
import os
import shutil
import stat

import broker

# Owners of caches the sandbox user cannot have written: root (image build), the warden.
TRUSTED = (0, 10002)

SKIP = {".git"}
MAX_DEPTH = 256  # guard.MAX_DEPTH (caches runs without guard)
CACHE_DIR = "__pycache__"


def walk_dirs(root):
    """Every folder under root (root included), symlinks not followed, .git skipped."""
    stack = [(root, 0)]
    while stack:
        here, depth = stack.pop()
        yield here
        if depth >= MAX_DEPTH:
            continue  # the guard refuses such a tree (guard.MAX_DEPTH)
        try:
            for e in broker.scandir(here):
                if e.name not in SKIP and e.is_dir(follow_symlinks=False):
                    stack.append((os.path.join(here, e.name), depth + 1))
        except OSError:
            continue


def cache_folders(roots):
    """Every __pycache__ under roots with its lstat (symlinks not followed)."""
    for root in roots:
        for here in list(walk_dirs(root)):
            if os.path.basename(here) != CACHE_DIR:
                continue
            try:
                yield here, os.lstat(here)
            except OSError:
                continue


def remove_users_caches(roots):
    """Removes every __pycache__ under roots that is not the harness's (or is a symlink),
    and any file in one of the harness's that is not. How many were removed."""
    removed = 0
    for here, st in cache_folders(roots):
        if stat.S_ISLNK(st.st_mode) or st.st_uid not in TRUSTED:
            removed += remove(here, st)
            continue
        for e in broker.scandir(here):
            full = os.path.join(here, e.name)
            try:
                est = os.lstat(full)
            except OSError:
                continue
            if est.st_uid not in TRUSTED or stat.S_ISLNK(est.st_mode):
                removed += remove(full, est)
    return removed


def remove_root_caches(roots):
    """Removes every __pycache__ of the harness's under roots (symlinks not followed). How
    many."""
    return sum(remove(here, st) for here, st in cache_folders(roots)
               if stat.S_ISDIR(st.st_mode) and st.st_uid in TRUSTED)


def remove(path, st):
    """Removes a file or folder (symlinks not followed): by root's supervisor at run time
    (a folder of root's sticky ones, a file of the sandbox user's)."""
    try:
        if broker.available():
            return 1 if broker.remove(path) else 0
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path)  # fd-based: it does not follow symlinks inside
        else:
            os.unlink(path)
        return 1
    except OSError:
        return 0


def lock(roots):
    """Makes every cache folder and cache under roots root's: folders 0755, files 0644."""
    for root in roots:
        for here in walk_dirs(root):
            if os.path.basename(here) != CACHE_DIR:
                continue
            os.chown(here, 0, 0)
            os.chmod(here, 0o755)
            with os.scandir(here) as it:
                for e in it:
                    if e.is_file(follow_symlinks=False):
                        os.chown(e.path, 0, 0)
                        os.chmod(e.path, 0o644)


def compile_tree(roots):
    """Compiles every .py under roots whose cache is missing or stale, as root. Returns
    (compiled or up to date, failed). A cache folder is made only where none is, or where
    root's is."""
    old = os.umask(0o022)
    ok = failed = 0
    try:
        for root in roots:
            for here in walk_dirs(root):
                if os.path.basename(here) == CACHE_DIR:
                    continue
                cache = os.path.join(here, CACHE_DIR)
                try:
                    st = os.lstat(cache)
                    if stat.S_ISLNK(st.st_mode) or st.st_uid not in TRUSTED:
                        continue
                except FileNotFoundError:
                    pass
                except OSError:
                    continue
                try:
                    entries = broker.scandir(here)
                except OSError:
                    continue
                for e in entries:
                    full = os.path.join(here, e.name)
                    if not e.name.endswith(".py") or not e.is_file(follow_symlinks=False):
                        continue
                    try:
                        good = compileall.compile_file(full, quiet=2, legacy=False)
                    except (OSError, ValueError, RecursionError, MemoryError):
                        good = False
                    ok += 1 if good else 0
                    failed += 0 if good else 1
    finally:
        os.umask(old)
    return ok, failed


def prime_access_times(roots):
    """Reads one byte of every file and lists every folder under roots, as root, so that
    their access times are now: with relatime (the default) a read moves an access time
    only when it is older than the file's last change or than a day, so for the next day no
    run can leave "I read this" in the access time of a file of the tree for a later run.
    (prime: how many files)."""
    primed = 0
    for root in roots:
        for here in walk_dirs(root):
            try:
                names = [e.name for e in broker.scandir(here)]
            except OSError:
                continue
            for name in names:
                full = os.path.join(here, name)
                try:
                    fd = broker.open_fd(full)
                except OSError:
                    continue
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        os.read(fd, 1)
                        primed += 1
                except OSError:
                    pass
                finally:
                    os.close(fd)
    return primed


def user_site(cfg):
    return os.path.join(cfg["home"], ".local")


def after_install(cfg, testbed):
    """Caches of the installed tree and the user's site folder, all the harness's."""
    roots = [r for r in (testbed, user_site(cfg)) if os.path.isdir(r)]
    removed = remove_users_caches(roots)
    ok, failed = compile_tree(roots)
    primed = prime_access_times([testbed, cfg["home"]])
    return {"caches_removed": removed, "caches_compiled": ok, "caches_failed": failed,
            "cache_tag": importlib.util.MAGIC_NUMBER.hex(), "atimes_primed": primed}
