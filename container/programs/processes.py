"""The sandbox user's processes, found through /proc, and killed, every one, after each run
(guard.kill_user, by root for the warden): nothing the code under test starts outlives the
run that started it."""

import os


def uids_of(pid):
    """The real, effective, saved and file-system uids of a process (empty when gone). The
    owner of /proc/PID is not enough: a process that made itself non-dumpable shows root."""
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return {int(u) for u in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return set()


def live_threads(pid):
    """Threads of a process that still run (any state but zombie or dead). A zombie
    thread-group leader whose other threads still run shows `Z` itself: its threads say."""
    live = 0
    try:
        tids = os.listdir("/proc/%s/task" % pid)
    except OSError:
        return 0
    for tid in tids:
        try:
            with open("/proc/%s/task/%s/stat" % (pid, tid)) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            live += 1
    return live


def user_processes(uid):
    """pid -> live threads, of every process with uid among its uids (zombies included)."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and uid in uids_of(name):
            procs[int(name)] = live_threads(name)
    return procs


def kill_user(uid=None, gid=None):
    """Stops every process of the sandbox user (root does it, for the warden: see broker.py).
    Returns (processes killed, threads still running after five seconds of trying)."""
    import broker
    return broker.kill_user()
