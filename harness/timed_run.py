#!/usr/bin/env python3
"""Runs one command of the code under test inside a task container, as root, for the harness.

    HARNESS_NONCE=... python3 -I -S /opt/harness/timed_run.py plain -- 'python3 test.py'
    HARNESS_NONCE=... python3 -I -S /opt/harness/timed_run.py timed --out-dir /run/harness/bench \
        [--ignore REGEX]... [--ignore-json-key KEY] [--output-file PATH] -- 'python3 bench.py'

The command runs as the unprivileged sandbox user (see guard.py), in /testbed. This process
stays root, out of its reach: the code cannot signal it, read its environment or change its
files, so the figures and checks it prints are its own. Before the command: leftover
processes of the sandbox user are killed and bytecode planted beside protected modules is
removed. After it: every process of the sandbox user is killed (nothing lingers to slow the
next variant down), the kernel's OOM-kill counter is read, and the protected files are
compared with the manifest taken after the patch was applied. One line comes last:
"HARNESS_RESULT:<nonce> {json}", the nonce from this process's environment, which the code
under test cannot read.

plain (install, test): the command's stdout and stderr pass through, up to a limit; past it
the command is killed (an output flood).

timed (bench): the clock (CLOCK_MONOTONIC, perf_counter_ns) starts just before the bench
process is created and stops when it is reaped, so no `docker exec` latency is in the
figure; a command without shell syntax is exec'd directly (no /bin/sh in between). Also
reported: CPU time, context switches, the container's CPU-quota throttling during the run,
a CPU-speed probe just before and after it, and a digest of the bench's output (stdout, or
the file the task names) for the equivalence check, lines matching --ignore left out. The
bench's stdout and stderr go to files in OUT_DIR, which the harness puts on a tmpfs.
"""
import hashlib
import json
import os
import re
import select
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guard  # noqa: E402

TAIL_BYTES = 64 * 1024
PLAIN_OUTPUT_LIMIT = 64 * 1024 * 1024
SHELL_SYNTAX = set("|&;<>()$`\\\"'*?[]#~=%{}\n")
CPU_STAT_FILES = (
    "/sys/fs/cgroup/cpu.stat",  # cgroup v2
    "/sys/fs/cgroup/cpu/cpu.stat",  # cgroup v1
    "/sys/fs/cgroup/cpu,cpuacct/cpu.stat",
)
MEMORY_EVENTS = (
    ("/sys/fs/cgroup/memory.events", "oom_kill "),  # cgroup v2
    ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill "),  # cgroup v1
)


def throttled():
    """Times the container's CPU quota throttled it so far, or None when unknown."""
    for path in CPU_STAT_FILES:
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "nr_throttled":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def oom_kills():
    """Processes of this container killed by the kernel's OOM killer so far, or None."""
    for path, key in MEMORY_EVENTS:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return int(line[len(key):])
        except (OSError, ValueError):
            continue
    return None


def cpu_probe_ms():
    """Time of a fixed bit of CPU work (best of three): the harness compares it across runs
    to spot runs made while the CPU ran at another speed than usual."""
    best = None
    for _ in range(3):
        t = time.perf_counter_ns()
        x = 0
        for i in range(20000):
            x += i * i
        ms = (time.perf_counter_ns() - t) / 1e6
        best = ms if best is None else min(best, ms)
    return best


def argv_for(command):
    if any(c in SHELL_SYNTAX for c in command):
        return ["/bin/sh", "-c", command]
    try:
        argv = shlex.split(command)
    except ValueError:
        return ["/bin/sh", "-c", command]
    return argv or ["/bin/sh", "-c", command]


def child_env(cfg, extra):
    env = dict(os.environ)
    env.pop("HARNESS_NONCE", None)
    env.update({"HOME": cfg["home"], "USER": cfg["user"], "LOGNAME": cfg["user"]})
    env.update(extra)
    return env


# The launcher: a fresh, small interpreter that drops to the sandbox user, says it is ready,
# waits for the go and execs the command (so the timed process is the command itself, its
# exit its own). posix_spawn cannot change the user, and exec from a fork of this process
# costs about a millisecond more (the forked copy of this interpreter is torn down inside
# the timed interval): the launcher starts before the clock, only its exec is timed.
LAUNCHER = """
import os, sys
uid, gid = int(sys.argv[1]), int(sys.argv[2])
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
os.chdir(sys.argv[3])
null = os.open("/dev/null", os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
os.write(4, b"r")
os.close(4)
go = os.read(3, 1)
os.close(3)
if not go:
    os._exit(126)
try:
    os.execve(sys.argv[4], sys.argv[5:], os.environ)
except OSError as e:
    os.write(2, ("cannot start %r: %s\\n" % (sys.argv[5:], e)).encode())
    os._exit(127)
"""


def resolve(program, env):
    if "/" in program:
        return program if program.startswith("/") else os.path.join(guard.TESTBED, program)
    for d in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":"):
        full = os.path.join(d or ".", program)
        if os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    return program


def high_fd(fd):
    """A descriptor above 4, so posix_spawn's dup2 onto 3 and 4 always takes effect."""
    if fd > 4:
        return fd
    moved = os.dup(fd)
    while moved <= 4:
        moved = os.dup(moved)
    os.close(fd)
    return moved


class Launched:
    """A command ready to start: its process is waiting for the go."""

    def __init__(self, argv, env, cfg, stdout_fd, stderr_fd):
        go_r, self.go_w = os.pipe()
        ready_r, ready_w = os.pipe()
        go_r, ready_w = high_fd(go_r), high_fd(ready_w)
        largv = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(cfg["uid"]), str(cfg["gid"]),
                 guard.TESTBED, resolve(argv[0], env)] + argv
        actions = [
            (os.POSIX_SPAWN_DUP2, stdout_fd, 1),
            (os.POSIX_SPAWN_DUP2, stderr_fd, 2),
            (os.POSIX_SPAWN_DUP2, go_r, 3),
            (os.POSIX_SPAWN_DUP2, ready_w, 4),
        ]
        self.pid = os.posix_spawn(sys.executable, largv, env, file_actions=actions)
        os.close(go_r)
        os.close(ready_w)
        self.ready = os.read(ready_r, 1) == b"r"
        os.close(ready_r)

    def go(self):
        try:
            os.write(self.go_w, b"g")
        except OSError:
            pass
        os.close(self.go_w)


def spawn(argv, env, cfg, stdout_fd, stderr_fd):
    launched = Launched(argv, env, cfg, stdout_fd, stderr_fd)
    launched.go()
    return launched.pid


def exit_code(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def before_run(cfg, manifest):
    leftovers = guard.kill_user(cfg["uid"])
    planted = guard.clear_planted_bytecode(cfg, manifest)
    return leftovers, planted, oom_kills()


def after_run(cfg, manifest, oom_before):
    lingering = guard.kill_user(cfg["uid"])
    oom_after = oom_kills()
    return {
        "lingering_killed": lingering,
        "oom_kills": (oom_after - oom_before) if oom_before is not None and oom_after is not None else None,
        "changes": guard.changes(cfg, manifest),
    }


def run_plain(cfg, manifest, command, limit):
    leftovers, planted, oom_before = before_run(cfg, manifest)
    argv = argv_for(command)
    r, w = os.pipe()
    pid = spawn(argv, child_env(cfg, {}), cfg, w, w)
    os.close(w)
    forwarded = 0
    lingering = 0
    flood = False
    status = None
    while True:
        ready, _, _ = select.select([r], [], [], 0.2)
        if ready:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            if not flood:
                room = limit - forwarded
                os.write(1, chunk[:room])
                forwarded += min(len(chunk), room)
                if len(chunk) > room:
                    flood = True
                    guard.kill_user(cfg["uid"])
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                # Whatever it left behind holds the pipe open: kill it so the pipe ends.
                lingering += guard.kill_user(cfg["uid"])
    os.close(r)
    if status is None:
        _, status = os.waitpid(pid, 0)
    result = {
        "exit_code": exit_code(status),
        "output_bytes": forwarded,
        "output_flood": flood,
        "output_limit": limit,
        "leftovers_killed": leftovers,
        "planted_bytecode_removed": planted,
    }
    result.update(after_run(cfg, manifest, oom_before))
    result["lingering_killed"] += lingering
    return result


def tail(fd):
    size = os.fstat(fd).st_size
    os.lseek(fd, max(0, size - TAIL_BYTES), os.SEEK_SET)
    data = b""
    while True:
        block = os.read(fd, TAIL_BYTES)
        if not block:
            break
        data += block
    return data.decode("utf-8", "replace"), size


def output_digest(fd, ignore, json_key):
    """sha256 of the output's lines, those matching an ignore pattern (or holding json_key
    in a JSON object) left out: the figure a bench prints is not part of its answer."""

    h = hashlib.sha256()
    kept = 0
    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(os.dup(fd), "rb") as f:
        for raw in f:
            line = raw.rstrip(b"\n").decode("utf-8", "surrogateescape")
            if any(p.search(line) for p in ignore):
                continue
            if json_key is not None and json_key in line:
                try:
                    if json_key in json.loads(line):
                        continue
                except (ValueError, TypeError):
                    pass
            h.update(raw.rstrip(b"\n") + b"\n")
            kept += 1
    return "sha256:" + h.hexdigest(), kept


def file_digest(path):
    full = os.path.join(guard.TESTBED, path)
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        return "unreadable:%s" % e.strerror

    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            h.update(block)
    return "sha256:" + h.hexdigest()


def run_timed(cfg, manifest, command, out_dir, ignore, json_key, output_file):
    leftovers, planted, oom_before = before_run(cfg, manifest)
    os.makedirs(out_dir, mode=0o755, exist_ok=True)
    argv = argv_for(command)
    if output_file:
        try:
            os.unlink(os.path.join(guard.TESTBED, output_file))
        except OSError:
            pass
    throttled_before = throttled()
    probe_before = cpu_probe_ms()
    out_fd = os.open(os.path.join(out_dir, "stdout"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    err_fd = os.open(os.path.join(out_dir, "stderr"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open("/dev/null", os.O_WRONLY)
    env = child_env(cfg, {})
    # One untimed start first: the first spawn of a fresh interpreter costs more than later
    # ones (first-call set-up in the interpreter and libc), which would otherwise be in
    # every figure.
    os.waitpid(spawn(["true"], env, cfg, null, null), 0)
    os.close(null)
    launched = Launched(argv, env, cfg, out_fd, err_fd)
    start = time.perf_counter_ns()
    launched.go()
    _, status, usage = os.wait4(launched.pid, 0)
    end = time.perf_counter_ns()
    # Whatever the bench left running is stopped now, before its output is read: work
    # moved to a background process is neither timed nor allowed to finish the answer.
    lingering = guard.kill_user(cfg["uid"])
    probe_after = cpu_probe_ms()
    throttled_after = throttled()
    code = exit_code(status)
    stdout_tail, stdout_bytes = tail(out_fd)
    stderr_tail, stderr_bytes = tail(err_fd)
    digest, lines = output_digest(out_fd, ignore, json_key)
    os.close(out_fd)
    os.close(err_fd)
    result = {
        "start_ns": start,
        "end_ns": end,
        "wall_ns": end - start,
        "exit_code": code,
        "direct_exec": argv[0] != "/bin/sh",
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "max_rss_kb": usage.ru_maxrss,
        "voluntary_switches": usage.ru_nvcsw,
        "involuntary_switches": usage.ru_nivcsw,
        "throttled": (throttled_after - throttled_before)
        if throttled_before is not None and throttled_after is not None else None,
        "cpu_probe_ms": [probe_before, probe_after],
        "stdout_bytes": stdout_bytes,
        "stderr_bytes": stderr_bytes,
        "stdout_tail": stdout_tail,
        "stderr_tail": stderr_tail,
        "output_digest": file_digest(output_file) if output_file else digest,
        "output_lines": lines,
        "leftovers_killed": leftovers,
        "planted_bytecode_removed": planted,
    }
    result.update(after_run(cfg, manifest, oom_before))
    result["lingering_killed"] += lingering
    return result


def main(argv):
    args = argv[1:]
    if "--" not in args or not args:
        sys.stderr.write(__doc__)
        return 2
    split = args.index("--")
    opts, rest = args[:split], args[split + 1:]
    command = " ".join(rest) if len(rest) > 1 else (rest[0] if rest else "")
    mode = opts[0] if opts else ""
    named = {}
    ignore = []
    i = 1
    while i < len(opts):
        key = opts[i]
        value = opts[i + 1] if i + 1 < len(opts) else ""
        if key == "--ignore":
            ignore.append(value)
        else:
            named[key] = value
        i += 2
    cfg = guard.load_config()
    manifest = guard.load_manifest()
    if mode == "plain":
        result = run_plain(cfg, manifest, command, int(named.get("--output-limit", PLAIN_OUTPUT_LIMIT)))
    elif mode == "timed":
        patterns = []
        bad = []
        for p in ignore:
            try:
                patterns.append(re.compile(p))
            except re.error as e:
                bad.append("%s: %s" % (p, e))
        result = run_timed(
            cfg, manifest, command, named.get("--out-dir", "/run/harness/bench"), patterns,
            named.get("--ignore-json-key"), named.get("--output-file"),
        )
        if bad:
            result["ignore_errors"] = bad
    else:
        sys.stderr.write("timed_run.py: unknown mode %r\n" % mode)
        return 2
    guard.emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
