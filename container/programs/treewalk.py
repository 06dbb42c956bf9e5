"""The tree as the guard sees it: where it is, who the harness's users are, how it is walked
(never through a symlink, never deeper than MAX_DEPTH), how a file is read (never through a
symlink, never waiting on a FIFO; by root's supervisor where the warden may not read it) and
digested, and the git the guard runs on it (no configuration, hook, monitor or external
program of the tree's). Used by guard.py and watched.py; imports neither."""
import errno
import hashlib
import os
import stat
import sys

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

TESTBED = "/testbed"

# The warden: the harness's programs run as this user at run time (never root).
WARDEN_UID = WARDEN_GID = 10002
WARDEN_USER = "harnessguard"


# Owners whose files the sandbox user cannot have written: root (the image) and the warden.
TRUSTED = (0, WARDEN_UID)


# Folders whose contents are caches, never sources: not protected, not walked.
SKIP_DIRS = {".git", "__pycache__"}


def is_protected(rel, cfg):
    return any(r.match(rel) for r in cfg["_protected"])


# Folders a walk could not read (a path past the system's limit, say) or did not enter (too
# deep): a tree the guard cannot check is refused, never taken as checked.
UNWALKABLE = []


# No source tree nests folders this deep (node_modules reaches a few dozen). A walk by path
# costs the square of the depth: below this cap every walk of the tree stays cheap, so a
# patch cannot spend the install's or the run's time limit on the harness's own checks.
MAX_DEPTH = 256


def iwalk(top):
    """os.walk(top) (top-down, `dirs` prunable, symlinks to folders listed in `dirs` and not
    followed) without recursion. Folders it cannot read, and folders more than MAX_DEPTH
    below top (not entered), go to UNWALKABLE."""
    stack = [(top, 0)]
    while stack:
        here, depth = stack.pop()
        if depth > MAX_DEPTH:
            UNWALKABLE.append("%s (more than %d folders deep)" % (here[:200], MAX_DEPTH))
            continue
        dirs, files = [], []
        try:
            for e in broker.scandir(here):
                try:
                    (dirs if e.is_dir() else files).append(e.name)
                except OSError:
                    files.append(e.name)
        except FileNotFoundError:
            continue
        except OSError as e:
            if here != top or e.errno != errno.ENOTDIR:
                UNWALKABLE.append("%s (%s)" % (here[:200], e.strerror))
            continue
        yield here, dirs, files
        for d in reversed(dirs):
            full = os.path.join(here, d)
            if not os.path.islink(full):
                stack.append((full, depth + 1))


def walk(root, skip=SKIP_DIRS):
    """Root-relative paths of every file and symlink under root (symlinks not followed)."""
    out = []
    for here, dirs, files in iwalk(root):
        links = [d for d in dirs if os.path.islink(os.path.join(here, d))]
        dirs[:] = sorted(d for d in dirs if d not in skip and d not in links)
        rel_here = os.path.relpath(here, root)
        for name in sorted(files + links):
            out.append(name if rel_here == "." else rel_here + "/" + name)
    return out


# Git run by root on a tree the sandbox user writes: no configuration but ours, no hook, no
# file-system monitor, no external diff or filter (each would run a command as root).
GIT_SAFE = ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
            "-c", "core.untrackedCache=false", "-c", "diff.external=", "-c", "protocol.allow=never",
            "--no-pager"]


GIT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent",
           "GIT_NO_LAZY_FETCH": "1", "GIT_OPTIONAL_LOCKS": "0",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C"}


def read_regular(full, limit=64 << 20):
    """The bytes of a regular file (at most `limit`), never through a symlink and never
    waiting: a FIFO the code left under a watched name would block root's read forever."""
    fd = broker.open_fd(full)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, size = [], 0
        while size < limit:
            block = os.read(fd, min(1 << 20, limit - size))
            if not block:
                break
            chunks.append(block)
            size += len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


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
    try:
        fd = broker.open_fd(full)
    except OSError as e:
        return "unreadable:%s" % e.strerror
    with os.fdopen(fd, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            h.update(block)
    return "sha256:" + h.hexdigest()
