"""Runs an agent's command for the harness, as root, in the agent's container: uploaded to
/opt/agent-harness/runner.py (a folder only root can read) and started by the pinned
interpreter (`-I -S`) before anything of the agent has run.

    runner.py RESULT_FILE DISK_LIMIT COMMAND

COMMAND runs by /bin/sh -c as the sandbox user, in /testbed, with this process's
environment, no core dumps and no file larger than DISK_LIMIT bytes. A watchdog (a thread of
this root process, out of the agent's reach) stops every process of the user once the tree
(with .git) and the user's home have grown by more than DISK_LIMIT since the start: the
limit the evaluation holds the code under test to (container/programs/timed_run.py), with the same
counting (guard.disk_usage), made when free space has dropped by more than what may still
be written, and every WALK_EVERY_S seconds whatever free space says. When the command ends,
every process of the user it left is killed (nothing holds the exec's output open, nothing
changes the tree while root diffs it). RESULT_FILE gets what happened as JSON; the exit
status is the command's (128 + the signal that killed it).
"""
import json
import os
import resource
import sys
import threading
import time

sys.path.insert(0, "/opt/harness-build")
import guard  # noqa: E402

CHECK_S = 0.25
WALK_EVERY_S = 10.0


class Watchdog:
    def __init__(self, cfg, limit):
        self.cfg, self.limit = cfg, limit
        self.base = guard.disk_usage(cfg)
        self.used = 0
        self.exceeded = False
        self.killed = 0
        self._free = guard.free_bytes()
        self._walked = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def count(self):
        self.used = guard.disk_usage(self.cfg) - self.base
        self._free = guard.free_bytes()
        self._walked = time.monotonic()
        return self.used

    def _loop(self):
        while not self._stop.wait(CHECK_S):
            free = guard.free_bytes()
            dropped = free is not None and self._free is not None \
                and self._free - free > self.limit - self.used
            if not dropped and time.monotonic() - self._walked < WALK_EVERY_S:
                continue
            if self.count() > self.limit:
                self.exceeded = True
                self.killed += guard.kill_user(self.cfg["uid"], self.cfg["gid"])[0]
                return

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def spawn(cfg, limit, command):
    """The command as the sandbox user, in a child of this process."""
    pid = os.fork()
    if pid:
        return pid
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limit > 0:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        os.setgroups([])
        os.setresgid(cfg["gid"], cfg["gid"], cfg["gid"])
        os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
        os.chdir(guard.TESTBED)
        os.execve("/bin/sh", ["/bin/sh", "-c", command], dict(os.environ))
    except BaseException as e:  # noqa: B036 -- the child must never return into the parent's code
        os.write(2, ("harness: cannot start the agent: %s\n" % e).encode())
    os._exit(127)


def main(argv):
    result_path, limit, command = argv[1], int(argv[2]), argv[3]
    cfg = guard.load_config("/opt/harness-build/config.json")
    # Counted before the agent starts; the thread starts after the fork.
    watchdog = Watchdog(cfg, limit) if limit > 0 else None
    pid = spawn(cfg, limit, command)
    if watchdog:
        watchdog.start()
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if watchdog:
        watchdog.stop()
    lingering, survivors = guard.kill_user(cfg["uid"], cfg["gid"])
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    result = {"exit_code": code, "lingering_killed": lingering, "survivors": survivors}
    if watchdog:
        used = watchdog.count()
        result.update(disk_limit=limit, disk_used=used,
                      disk_exceeded=watchdog.exceeded or used > limit)
    guard.write_json_atomic(result_path, result)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
