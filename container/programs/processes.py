"""The sandbox user's processes, found through /proc and killed, every one, after each run
(guard.kill_user): nothing the code under test starts outlives the run that started it."""

import os
import time


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


def kill_as(uid, gid):
    """kill(-1, SIGKILL) from a child that has become uid: every process uid may signal,
    whatever its state, name or session, even one started between our look and our kill."""
    try:
        pid = os.fork()
    except OSError:
        return False  # the pids limit is reached: the kills by pid still happen
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, 9)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
    return True


def kill_user(uid, gid=None, deadline_s=5.0):
    """Stops every process of uid: SIGKILL by pid (a zombie leader's live threads die with
    their group) and by kill(-1) as uid, again until no thread of uid runs (a fork bomb
    refills; a dying thread takes a moment). Returns (processes killed, threads still
    running at the deadline). Zombies are left to their parent or the container's init."""
    gid = uid if gid is None else gid
    killed = set()
    end = time.monotonic() + deadline_s
    while True:
        live = {pid for pid, threads in user_processes(uid).items() if threads}
        if not live:
            return len(killed), 0
        if time.monotonic() > end:
            return len(killed), sum(user_processes(uid).values())
        for pid in live:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        killed |= live
        kill_as(uid, gid)
        time.sleep(0.002)
