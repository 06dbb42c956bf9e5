"""Every timed run starts from the files the install left.

Containers live for a whole measurement, so without this a run could leave something for
the next one: a table built once (in the untimed test, or a warm-up round, whose time is
thrown away) and read by every timed run after it, which then looks many times faster than
a fresh run of the same code ever is. So:

- record: after the install (or, with no install, before the first test or bench), every
  entry the sandbox user can write is listed: the tree, its home, the memory file systems,
  POSIX message queues.
- reset, before every timed run (every process of the user is already gone): what the user
  made since is removed, System V IPC objects of the user included. Python's own bytecode
  caches of unchanged sources stay, once checked to be exactly what `import` writes (see
  repeat.py); they hold nothing a run could have chosen. What the user changed of the
  listed entries cannot be put back, so it is reported (`carried_over`) and the harness
  fails the run: a bench may add files, never change what the install left.

Removal runs in a child that has dropped to the sandbox user, so it can take away nothing
the user could not.
"""
import ctypes
import ctypes.util
import json
import os
import stat

import guard
import repeat

BASELINE = "/opt/harness/baseline.json"
# Reported names of changed entries, at most.
REPORTED = 10


def entries(cfg, skip=()):
    """path -> [inode, size, mtime_ns, ctime_ns, uid, is_dir, mode, xattrs] of everything
    under the roots (symlinks not followed), but the paths in `skip` (the bench's own output
    files). A folder's size and times are left at 0 (adding to it changes them); its
    extended attributes are digested where the user may set them without owning it."""
    found = {}
    for path, st in guard.writable_entries(cfg, skip):
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            open_dir = mode & 0o002 and not mode & stat.S_ISVTX
            found[path] = [st.st_ino, 0, 0, 0, st.st_uid, True, stat.S_IMODE(mode),
                           xattrs(path) if open_dir or st.st_uid == cfg["uid"] else ""]
        else:
            found[path] = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_uid,
                           False, stat.S_IMODE(mode), ""]
    return found


def xattrs(path):
    try:
        names = sorted(os.listxattr(path, follow_symlinks=False))
        return repr([(n, os.getxattr(path, n, follow_symlinks=False)) for n in names])
    except OSError:
        return ""


def has_baseline():
    return os.path.exists(BASELINE)


def record(cfg):
    """Lists what every timed run starts from. The user's own folders become root's, open
    to all with the sticky bit, like the tree's: it may still add and remove its files in
    them, but no longer set their times, mode or attributes, which a folder's changing times
    would hide."""
    for path, e in entries(cfg).items():
        if e[5] and e[4] == cfg["uid"]:
            try:
                os.chown(path, 0, 0)
                os.chmod(path, 0o1777)
            except OSError:
                pass
    guard.write_json_atomic(BASELINE, {"entries": entries(cfg), "kept_caches": {}})


def load():
    with open(BASELINE) as f:
        return json.load(f)


def is_cache_path(path):
    return os.path.basename(os.path.dirname(path)) == "__pycache__" and path.endswith(".pyc")


def source_of(pyc):
    folder = os.path.dirname(os.path.dirname(pyc))
    return os.path.join(folder, os.path.basename(pyc).split(".")[0] + ".py")


def changed(before, now, uid):
    """Listed entries that are gone or replaced now, or changed where the user could change
    them (its own files, files and folders open to all). Bytecode caches are not counted:
    they are checked or removed (caches_to_keep)."""
    out = []
    for path, was in before.items():
        if is_cache_path(path) and not was[5]:
            continue
        cur = now.get(path)
        if cur is None or cur[0] != was[0] or cur[5] != was[5] or cur[6:] != was[6:]:
            out.append(path)
        elif not was[5] and (was[4] == uid or was[6] & 0o002) and cur[1:4] != was[1:4]:
            out.append(path)
    return sorted(out)


def caches_to_keep(base, now, kept, run_as_user):
    """New or rewritten .pyc files of the user whose source was listed and is unchanged,
    when every one of them is a true cache of its source; checked once per version."""
    sources = base["entries"]
    wanted = {}
    for path, cur in now.items():
        if not is_cache_path(path) or cur[5] or cur[4] == 0:
            continue
        src = source_of(path)
        if src not in sources or now.get(src) != sources[src]:
            continue
        if base["entries"].get(path) == cur:
            continue
        wanted[path] = cur
    unchecked = sorted(p for p, cur in wanted.items() if kept.get(p) != cur)
    if unchecked and not repeat.are_caches(unchecked, run_as_user):
        return {}
    return wanted


def remove_as_user(cfg, paths):
    """Removes paths (deepest first) and the user's System V IPC objects, in a child running
    as the sandbox user (the owner may remove them; root in a container may not, without
    CAP_IPC_OWNER). (files removed, IPC objects removed, IPC objects left)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(cfg["gid"])
            os.setuid(cfg["uid"])
            gone = remove_paths(paths)
            ipc = remove_ipc(cfg["uid"])
            os.write(w, ("%d %d %d" % ((gone,) + ipc)).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read().split()
    os.waitpid(pid, 0)
    if len(text) != 3 or not all(t.isdigit() for t in text):
        return 0, 0, 1
    return tuple(int(t) for t in text)


def remove_paths(paths):
    for path in sorted(paths, key=lambda p: p.count("/")):
        if os.path.isdir(path) and not os.path.islink(path):
            try:
                os.chmod(path, 0o700)  # a folder it made read-only is still its own
            except OSError:
                pass
    gone = 0
    for path in sorted(paths, key=lambda p: p.count("/"), reverse=True):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
            gone += 1
        except OSError:
            pass
    return gone


def remove_ipc(uid):
    """System V shared memory, queues and semaphores owned by the user: they outlive every
    process. (count removed, count that could not be)."""
    libc = None
    removed = failed = 0
    for call, ident in guard.user_ipc(uid):
        if libc is None:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if call == "semctl":
            rc = libc.semctl(ident, 0, guard.IPC_RMID)
        else:
            rc = getattr(libc, call)(ident, guard.IPC_RMID, None)
        if rc == 0:
            removed += 1
        else:
            failed += 1
    return removed, failed


def reset(cfg, skip, run_as_user):
    """Back to the recorded entries before a timed run: {"leftovers_removed": n,
    "ipc_removed": n, "carried_over": [changed entries]}; records them first when nothing
    was recorded (a task without an install or a test in this container)."""
    if not has_baseline():
        record(cfg)
        return {"leftovers_removed": 0, "ipc_removed": 0, "carried_over": []}
    base = load()
    listed = base["entries"]
    now = entries(cfg, skip)
    uid = cfg["uid"]
    keep = caches_to_keep(base, now, base.get("kept_caches", {}), run_as_user)
    holding = {os.path.dirname(p) for p in keep}
    new = [p for p, cur in now.items()
           if cur[4] == uid and p not in keep and p not in holding
           and (p not in listed or listed[p][0] != cur[0] or listed[p][5] != cur[5]
                or (is_cache_path(p) and not cur[5] and listed[p] != cur))]
    removed, ipc_removed, ipc_failed = 0, 0, 0
    if new or guard.user_ipc(uid):
        removed, ipc_removed, ipc_failed = remove_as_user(cfg, new)
    carried = changed({p: e for p, e in listed.items() if p not in skip}, now, uid)
    if keep != base.get("kept_caches", {}):
        base["kept_caches"] = keep
        guard.write_json_atomic(BASELINE, base)
    result = {"leftovers_removed": removed, "ipc_removed": ipc_removed,
              "carried_over": carried[:REPORTED]}
    if ipc_failed:
        result["carried_over"].append("%d System V IPC object(s) of the sandbox user" % ipc_failed)
    if len(new) > removed:
        result["carried_over"].append("%d new file(s) that could not be removed" % (len(new) - removed))
    return result
