#!/usr/bin/env python3
"""Runs one command of the code under test inside a task container, for the harness.

    HARNESS_NONCE=... harness-supervisor warden /opt/harness/timed_run.py plain [--witness] -- 'python3 test.py'
    HARNESS_NONCE=... harness-supervisor warden /opt/harness/timed_run.py timed --out-dir /run/harness/bench \
        [--output-limit BYTES] [--ignore REGEX]... [--metric-pattern REGEX | --metric-json-key KEY] \
        [--output-file PATH] -- 'python3 bench.py'

This program runs as the warden, an unprivileged user of the harness's own, under the
interpreter pinned at image build; root's supervisor beside it (harness-supervisor `warden`,
broker.py) starts the command as the unprivileged sandbox user (see guard.py), in /testbed,
with no core dumps, files no larger than the task's disk limit, and an OOM score that makes
the kernel kill it before this process. The code cannot signal this process, read its
environment or change its files, so the figures and checks it prints are its own.
Before the command: every process of the sandbox user is killed and bytecode planted beside
protected modules is removed. While it runs, a watchdog stops it when the tree and the
user's home grow past the task's disk limit, or (timed) its output past the output limit.
After it: every process of the sandbox user is killed, whatever its state (nothing lingers to
slow the next variant down, nothing writes into the next run's output), the kernel's OOM-kill
counter is read, and the protected files are compared with the manifest taken after the
patch was applied. One line comes last: "HARNESS_RESULT:<nonce> {json}", the nonce from this
process's environment, which the code under test cannot read (the prefix is the schema's).
In timed mode the JSON keeps a contract with the harness, timer_result.schema.json beside this
file: every result is checked against it before it is printed (timer_contract.py), and one
that breaks it is printed as a harness error naming the field.

plain (install, test): the command's stdout and stderr pass through, up to a limit; past it
the command is killed (an output flood). With --witness (the test), Python processes the
command starts report through a pipe whether they finished their shutdown and, under
pytest, each test's outcome (container/programs/py/): an exit status forced at exit does not pass for
a test run that passed.

timed (bench): the clock (CLOCK_MONOTONIC, perf_counter_ns) starts just before the bench
process is created and stops when it is reaped, so no `docker exec` latency is in the
figure; a command without shell syntax is exec'd directly (no /bin/sh in between). Also
reported: CPU time, context switches, the container's CPU-quota throttling during the run,
a CPU-speed probe just before and after it, an output metric with the number of times it
was printed, and a digest of the bench's output (stdout, or the file the task names) for
the equivalence check: lines matching --ignore left out, the figure of an output metric
masked. The bench's stdout and stderr go to fresh files in OUT_DIR (a tmpfs).
"""
import fcntl
import json
import os
import re
import select
import shlex
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
import guard  # noqa: E402
import output  # noqa: E402
import timer_contract  # noqa: E402
# caches (the install's), simulate and witness (the test's) are imported where they are
# used: every module imported here is paid at every timed exec.

# Descriptors of a sandboxed run (harness/supervisor): go, ready, result, copied output file.
GO_FD, READY_FD, RESULT_FD, COPY_FD = 3, 4, 6, 7
PLAIN_OUTPUT_LIMIT = 64 * 1024 * 1024
BENCH_OUTPUT_LIMIT = 64 * 1024 * 1024
SHELL_SYNTAX = set("|&;<>()$`\\\"'*?[]#~=%{}\n")
# The descriptor the witness pipe has in the test's processes (container/programs/py/sitecustomize.py).
WITNESS_FD = 5
HARNESS_PY = "/opt/harness/py"
WATCH_INTERVAL_S = 0.1
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


def image_env():
    """The image's environment, as the supervisor handed it over (this program itself runs
    in one of the harness's own)."""
    env = image_env_raw()
    for key in ("HARNESS_NONCE", "HARNESS_CHILD_ENV", "HARNESS_BROKER_FD", SEEDS_VAR):
        env.pop(key, None)
    return env


SEEDS_VAR = "HARNESS_BENCH_SEEDS"


def repetition_seeds(count):
    """The seed of each timed repetition, in order: HARNESS_BENCH_SEEDS (drawn by the harness
    for this round, in this process's environment, which the code under test cannot read),
    each revealed to the bench as HARNESS_BENCH_SEED only when its repetition starts. Without
    it, HARNESS_BENCH_SEED for every repetition."""
    env = image_env_raw()
    listed = [s for s in (env.get(SEEDS_VAR) or os.environ.get(SEEDS_VAR) or "").split(",") if s.strip()]
    if listed:
        return [listed[i % len(listed)].strip() for i in range(count)]
    one = env.get("HARNESS_BENCH_SEED") or os.environ.get("HARNESS_BENCH_SEED") or "0"
    return [one] * count


def image_env_raw():
    text = os.environ.get("HARNESS_CHILD_ENV")
    return json.loads(text) if text else dict(os.environ)


def child_env(cfg, extra):
    env = image_env()
    env.update({"HOME": cfg["home"], "USER": cfg["user"], "LOGNAME": cfg["user"]})
    env.update(extra)
    return env


def witness_env(cfg):
    """The test's environment additions: the harness's sitecustomize and pytest plugin
    (root-owned, first on the path) and where they report."""
    env = child_env(cfg, {})
    path = env.get("PYTHONPATH")
    plugins = env.get("PYTEST_PLUGINS")
    return {
        "PYTHONPATH": HARNESS_PY + (":" + path if path else ""),
        "PYTEST_PLUGINS": "harness_pytest" + ("," + plugins if plugins else ""),
        "HARNESS_WITNESS_FD": str(WITNESS_FD),
    }


def high_fd(fd):
    """The descriptor moved above every number a run's descriptors go to (3 to 7), so that
    none of ours is closed or shadowed while they are put in place."""
    if fd > COPY_FD:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, COPY_FD + 1)
    os.close(fd)
    return moved


def witness_pipe():
    r, w = os.pipe()
    return r, high_fd(w)


def run_options(cfg, persist, report_writes=False):
    """harness-supervisor run's options for a command of the code under test: as the
    sandbox user, in the tree, files no larger than the disk limit; in a sandbox of its own
    (layers over what it may write) unless `persist` (the install, whose writes stay)."""
    options = ["--uid", str(cfg["uid"]), "--gid", str(cfg["gid"]), "--cwd", guard.TESTBED,
               "--fsize", str(int(cfg.get("disk_limit") or 0)), "--result-fd", str(RESULT_FD)]
    if persist:
        options.append("--persist")
    else:
        options += ["--layer-size", str(layer_size(cfg))] + layers(cfg)
    if report_writes:
        options.append("--report-writes")
    return options


def start_plain(cfg, argv, env, out_fd, witness_fd, persist, report_writes):
    """Starts `argv` as the sandbox user through root's supervisor (the warden cannot change
    its user). Returns the read end of the run's result: the supervisor's report, then its
    end of file when the run is over."""
    result_r, result_w = os.pipe()
    fds = {1: out_fd, 2: out_fd, RESULT_FD: result_w}
    options = run_options(cfg, persist, report_writes)
    if witness_fd is not None:
        fds[WITNESS_FD] = witness_fd
        options += ["--keep-fd", str(WITNESS_FD)]
    try:
        broker.run(options, argv, env, fds)
    finally:
        os.close(result_w)
    return result_r


def exit_code(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Watchdog:
    """Watches a running command from a thread of this (root) process.

    Disk: the tree and the user's home may grow by at most the task's limit. Counting them
    is a walk of the tree, so it is done only when the file system's free space has dropped
    by more than what the command may still write (free space counts every writer on the
    host: a drop is a reason to count, never a verdict). Output (timed runs): the bench's
    stdout and stderr files may hold at most `out_limit` bytes together."""

    def __init__(self, cfg, state, out_fds=(), out_limit=0):
        self.cfg = cfg
        self.limit = int(cfg.get("disk_limit") or 0)
        self.base = state.get("disk_base")
        self.used = state.get("disk_used", 0)
        self.out_fds = out_fds
        self.out_limit = out_limit
        self.disk_exceeded = False
        self.flood = False
        self.checks = 0
        self.killed = 0
        self._stop = threading.Event()
        self._free = guard.free_bytes()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _stop_user(self):
        killed, _ = guard.kill_user(self.cfg["uid"], self.cfg["gid"])
        self.killed += killed

    def _loop(self):
        while not self._stop.wait(WATCH_INTERVAL_S):
            if self.out_fds and not self.flood:
                try:
                    size = sum(os.fstat(fd).st_size for fd in self.out_fds)
                except OSError:
                    size = 0
                if size > self.out_limit:
                    self.flood = True
                    self._stop_user()
            if self.limit and self.base is not None and not self.disk_exceeded:
                free = guard.free_bytes()
                if free is None or self._free is None or self._free - free <= self.limit - self.used:
                    continue
                self.checks += 1
                self.used = guard.disk_usage(self.cfg) - self.base
                self._free = free
                if self.used > self.limit:
                    self.disk_exceeded = True
                    self._stop_user()

    def stop(self):
        self._stop.set()
        self._thread.join()


def before_run(cfg, manifest):
    leftovers, survivors = guard.kill_user(cfg["uid"], cfg["gid"])
    planted = guard.clear_planted_bytecode(cfg, manifest)
    return {"leftovers_killed": leftovers, "leftover_survivors": survivors,
            "planted_bytecode_removed": planted}, oom_kills()


def after_run(cfg, manifest, state, oom_before, watchdog):
    """Stops what the command left, then the checks every run ends with."""
    lingering, survivors = guard.kill_user(cfg["uid"], cfg["gid"])
    oom_after = oom_kills()
    result = {
        "lingering_killed": lingering + watchdog.killed,
        "survivors": survivors,
        "oom_kills": (oom_after - oom_before) if oom_before is not None and oom_after is not None else None,
        "changes": guard.changes(cfg, manifest),
        "disk_limit": watchdog.limit,
        "disk_checks": watchdog.checks,
    }
    if watchdog.base is not None:
        used = guard.disk_usage(cfg) - watchdog.base
        result["disk_used"] = used
        state["disk_used"] = max(used, 0)
        guard.write_json_atomic(guard.STATE, state)
        result["disk_exceeded"] = watchdog.disk_exceeded or bool(watchdog.limit and used > watchdog.limit)
    return result


def environment_roots(cfg):
    """A prebuilt image's environment folders (what git ignores at base: a virtualenv)."""
    if cfg.get("source_mtime") is not None:
        return []
    return [os.path.join(guard.TESTBED, p.rstrip("/")) for p in guard.image_environment() if p.endswith("/")]


def run_plain(cfg, manifest, command, limit, with_witness):
    """The install (its writes stay) or, `with_witness`, the test (in a sandbox of its own,
    like every timed run: nothing it leaves is seen by the runs after it; what it wrote is
    listed and checked)."""
    import caches
    import witness as witness_mod
    state = guard.load_state()
    if not with_witness:
        # The install may make a prebuilt image's environment anew (GSO's `uv venv`
        # removes .venv first): the harness's caches there, which the user may not remove,
        # go first; after the install the warden compiles them again (caches.after_install).
        caches.remove_root_caches(environment_roots(cfg))
    before, oom_before = before_run(cfg, manifest)
    argv = argv_for(command)
    r, w = os.pipe()
    w = high_fd(w)
    witness = witness_mod.Witness(witness_pipe()) if with_witness else None
    extra = witness_env(cfg) if witness else {}
    watchdog = Watchdog(cfg, state)
    try:
        result_r = start_plain(cfg, argv, child_env(cfg, extra), w, witness.w if witness else None,
                               persist=not with_witness, report_writes=with_witness)
    finally:
        os.close(w)
        if witness:
            witness.close_writer()
    forwarded, flood, lingering = 0, False, 0
    report = []
    readers = [r, result_r] + ([witness.r] if witness else [])
    while readers:
        ready, _, _ = select.select(readers, [], [], 0.2)
        if witness and witness.r in ready and not witness.read_some():
            readers.remove(witness.r)
        if result_r in ready:
            block = os.read(result_r, 65536)
            if block:
                report.append(block)
            else:
                readers.remove(result_r)
        if r in ready:
            chunk = os.read(r, 65536)
            if not chunk:
                readers.remove(r)
            elif not flood:
                room = limit - forwarded
                os.write(1, chunk[:room])
                forwarded += min(len(chunk), room)
                if len(chunk) > room:
                    flood = True
                    lingering += guard.kill_user(cfg["uid"], cfg["gid"])[0]
    os.close(r)
    os.close(result_r)
    watchdog.stop()
    run = parse_report(report)
    result = {
        "exit_code": run.get("exit_code", -9),
        "output_bytes": forwarded,
        "output_flood": flood,
        "output_limit": limit,
    }
    result.update(before)
    result.update(after_run(cfg, manifest, state, oom_before, watchdog))
    result["lingering_killed"] += lingering + run.get("lingering_killed", 0)
    if with_witness:
        fresh = run.get("fresh", {})
        result["changes"].update(guard.written_changes(cfg, fresh.get("written", {})))
        if fresh.get("layer_full"):
            result["disk_exceeded"] = True
            result["disk_used"] = fresh.get("layer_bytes")
            result["disk_limit"] = layer_size(cfg)
    if witness:
        result["witness"] = witness.report()
    elif result["exit_code"] == 0 and not result["changes"] and not result.get("survivors"):
        # The install: what every timed run starts from, with the harness's caches of its code.
        result.update(caches.after_install(cfg, guard.TESTBED))
    return result


def parse_report(blocks):
    """The supervisor's report of a run (its last line); a sandbox that could not be made is
    the harness's failure."""
    text = b"".join(blocks).decode("utf-8", "replace").strip()
    try:
        report = json.loads(text.splitlines()[-1]) if text else {}
    except ValueError:
        report = {}
    if "error" in report:
        raise HarnessError("the run's sandbox failed: %s" % report["error"])
    return report


def run_timed(cfg, manifest, command, opts):
    """The bench `opts["repetitions"]` times in a row, each in a sandbox made for it alone
    (the supervisor's: fresh copy-on-write layers over the tree and home, fresh empty
    places where the container has a tmpfs, fresh mount, IPC and PID namespaces), each with
    a seed of its own (repetition_seeds): no repetition can see anything an earlier one
    left, and what an earlier one computed answers a question no longer asked. The result's
    top-level figures are the fastest repetition's, with every repetition's wall time, CPU
    time, figure and output digest beside it (the harness chooses the exec's figure from
    them); the output digest is the digest of every repetition's digest in order, so it
    equals base's only when every repetition printed base's answer for its seed."""
    before, oom_before = before_run(cfg, manifest)
    os.makedirs(opts["out_dir"], mode=0o755, exist_ok=True)
    if opts["keep"] and opts["output_file"]:
        opts["keep_dir"] = output.kept_dir(opts["out_dir"], opts["keep"])
        output.reset_kept(opts["keep_dir"])
    reps, sim_reader, seen = [], None, set()
    count = max(1, opts["repetitions"])
    for seed in repetition_seeds(count):
        rep, sim_reader, seen = one_repetition(cfg, command, opts, seed)
        reps.append(rep)
        if "early" in rep or rep["exit_code"] != 0 or rep["output_flood"] or rep.get("layer_full"):
            break
    if "early" in reps[-1]:
        return reps[-1]["early"]
    result = dict(min(reps, key=lambda r: r["wall_ns"]) if all(r["exit_code"] == 0 for r in reps) else reps[-1])
    result["reps"] = [{"wall_ns": r["wall_ns"], "user_s": r["user_s"], "sys_s": r["sys_s"],
                       "metric": r.get("metric"), "output_digest": r["output_digest"]} for r in reps]
    result["reps_digests_differ"] = len({r["output_digest"] for r in reps}) > 1
    if len(reps) > 1:
        result["output_digest"] = output.digest_of_digests([r["output_digest"] for r in reps])
    result.update(before)
    # Nothing a run did is left to check or remove: its sandbox is gone. What is reported is
    # what it wrote while it ran (a full layer stops it, like the disk limit before).
    oom_after = oom_kills()
    result["oom_kills"] = (oom_after - oom_before) if None not in (oom_before, oom_after) else None
    result["lingering_killed"] = sum(r["lingering_killed"] for r in reps)
    result["survivors"] = 0
    result["changes"] = {}
    result["disk_limit"] = layer_size(cfg)
    result["disk_used"] = max(r.get("layer_bytes", 0) for r in reps)
    result["disk_exceeded"] = any(r.get("layer_full") for r in reps)
    # Every process of the run is gone: the simulator's log's writers are closed.
    if sim_reader is not None:
        import simulate
        result["simulated"] = simulate.simulated_cost(sim_reader.text(), seen)
    else:
        result["simulated"] = None
    result["harness_error"] = None
    return result


PINNED = "/opt/harness-build/interpreter.json"


def pinned_program(name):
    """A program the image's build pinned for the harness (root's, outside the tree), or None."""
    try:
        with open(PINNED) as f:
            path = json.load(f).get(name)
    except (OSError, ValueError):
        return None
    return path if isinstance(path, str) and path.startswith("/") else None


def layer_size(cfg):
    return guard.layer_size(cfg)


def layers(cfg):
    """The supervisor's --layer options: the folders of the container's own file system the
    sandbox user may write (the tree and its home), each a copy-on-write layer of its own in
    a run; the rest of that file system is read-only there."""
    return ["--layer", guard.TESTBED, "--layer", cfg["home"]]


class HarnessError(Exception):
    """A failure of the harness's own, not of the code under test (reported as such)."""


class Sandboxed:
    """A bench ready to start in a fresh sandbox (the supervisor's `run`, started by root's
    supervisor for the warden): the sandbox is made and the launcher in it has dropped to the
    sandbox user and waits for the go. The supervisor's init times the bench from the go to
    its end and reports."""

    def __init__(self, cfg, argv, env, stdout_fd, stderr_fd, extra_fd=None, copy=None):
        go_r, self.go_w = os.pipe()
        ready_r, ready_w = os.pipe()
        self.result_r, result_w = os.pipe()
        options = run_options(cfg, persist=False) + ["--go-fd", str(GO_FD), "--ready-fd",
                                                     str(READY_FD), "--warm"]
        fds = {1: stdout_fd, 2: stderr_fd, GO_FD: go_r, READY_FD: ready_w, RESULT_FD: result_w}
        if extra_fd is not None:
            fds[WITNESS_FD] = extra_fd
            options += ["--keep-fd", str(WITNESS_FD)]
        if copy is not None:
            # The output file is the bench's own: one the install left does not count.
            path, fd, limit = copy
            fds[COPY_FD] = fd
            options += ["--remove", path, "--copy-out", "%s=%d" % (path, COPY_FD),
                        "--copy-limit", str(limit)]
        try:
            broker.run(options, argv, env, fds)
        finally:
            for fd in (go_r, ready_w, result_w):
                os.close(fd)
        self.ready = os.read(ready_r, 1) == b"r"
        os.close(ready_r)

    def go(self):
        try:
            os.write(self.go_w, b"g")
        except OSError:
            pass
        os.close(self.go_w)

    def finish(self):
        """The supervisor's report of the run (its figures, or {"error": why})."""
        chunks = []
        while True:
            block = os.read(self.result_r, 65536)
            if not block:
                break
            chunks.append(block)
        os.close(self.result_r)
        try:
            return json.loads(b"".join(chunks).decode("utf-8", "replace"))
        except ValueError:
            return {"error": "the supervisor gave no report"}


def one_repetition(cfg, command, opts, seed):
    """One timed run of the bench in its own sandbox, with its seed: (its figures, the
    simulator's log reader, the pids the simulator saw)."""
    if opts["simulate"]:
        import simulate
    out_dir = opts["out_dir"]
    argv = argv_for(command)
    throttled_before = throttled()
    probe_before = cpu_probe_ms()
    out_fd = high_fd(output.fresh_file(os.path.join(out_dir, "stdout")))
    err_fd = high_fd(output.fresh_file(os.path.join(out_dir, "stderr")))
    copy_fd = high_fd(output.fresh_file(os.path.join(out_dir, "output_file"))) if opts["output_file"] else None
    sim_reader, sim_w = None, None
    if opts["simulate"]:
        # A fixed hash seed: the same code does the same work on every run.
        env = child_env(cfg, {"PYTHONHASHSEED": "0", "HARNESS_BENCH_SEED": seed})
        valgrind = pinned_program("valgrind")
        if valgrind is None:
            # No run is made: no field has a value but the simulator's.
            early = timer_contract.blank()
            early["simulated"] = {
                "unavailable": True,
                "error": "the simulated criterion needs valgrind in the task image "
                         "(the default base image has it; install it in image.setup)"}
            return {"early": early, "exit_code": 0}, None, set()
        argv = simulate.command(WITNESS_FD, valgrind) + argv
        sim_r, sim_w = os.pipe()
        sim_w = high_fd(sim_w)
        sim_reader = simulate.PipeReader(sim_r, simulate.SIM_LOG_LIMIT)
    else:
        env = child_env(cfg, {"HARNESS_BENCH_SEED": seed})
    copy = (opts["output_file"], copy_fd, opts["output_limit"]) if copy_fd is not None else None
    run = Sandboxed(cfg, argv, env, out_fd, err_fd, sim_w, copy)
    pid_watch = None
    if sim_w is not None:
        os.close(sim_w)
        pid_watch = simulate.PidWatch(cfg["uid"])
    watchdog = Watchdog(cfg, {}, (out_fd, err_fd), opts["output_limit"])
    run.go()
    report = run.finish()
    watchdog.stop()
    seen = pid_watch.stop(report.get("helpers", [])) if pid_watch is not None else set()
    if "error" in report:
        raise HarnessError("the run's sandbox failed: %s" % report["error"])
    probe_after = cpu_probe_ms()
    throttled_after = throttled()
    stdout_tail, stdout_bytes = output.tail(out_fd)
    stderr_tail, stderr_bytes = output.tail(err_fd)
    flood = watchdog.flood or stdout_bytes + stderr_bytes > opts["output_limit"]
    stdout_text = "" if flood else output.read_all(out_fd)
    stderr_text = "" if flood else output.read_all(err_fd)
    value, printed, masked = output.find_metric([stdout_text, stderr_text], opts["metric_pattern"], opts["metric_json_key"])
    digest, lines = output.output_digest(masked, opts["ignore"])
    os.close(out_fd)
    os.close(err_fd)
    if copy_fd is not None:
        copied = report.get("copied", {}).get(opts["output_file"], {})
        digest = output.copied_digest(copy_fd, copied, opts.get("keep_dir"))
    fresh = report.get("fresh", {})
    result = {
        "start_ns": report["start_ns"],
        "end_ns": report["end_ns"],
        "wall_ns": report["wall_ns"],
        "exit_code": report["exit_code"],
        "direct_exec": argv[0] != "/bin/sh",
        "user_s": report["user_s"],
        "sys_s": report["sys_s"],
        "max_rss_kb": report["max_rss_kb"],
        "voluntary_switches": report["voluntary_switches"],
        "involuntary_switches": report["involuntary_switches"],
        "throttled": (throttled_after - throttled_before)
        if throttled_before is not None and throttled_after is not None else None,
        "cpu_probe_ms": [probe_before, probe_after],
        "stdout_bytes": stdout_bytes,
        "stderr_bytes": stderr_bytes,
        "stdout_tail": stdout_tail,
        "stderr_tail": stderr_tail,
        "output_flood": flood,
        "output_limit": opts["output_limit"],
        "output_digest": digest,
        "output_lines": lines,
        "lingering_killed": report["lingering_killed"] + watchdog.killed,
        "layer_bytes": fresh.get("layer_bytes", 0),
        "layer_full": bool(fresh.get("layer_full")),
        "sandbox_setup_ns": fresh.get("setup_ns"),
    }
    measured = opts["metric_pattern"] is not None or opts["metric_json_key"] is not None
    result["metric"] = {"value": value, "printed": printed} if measured else None
    return result, sim_reader, seen


def parse_args(args):
    """(mode, options, command) from `MODE [--key value | --flag]... -- COMMAND...`."""
    split = args.index("--")
    opts, rest = args[:split], args[split + 1:]
    command = " ".join(rest) if len(rest) > 1 else (rest[0] if rest else "")
    mode = opts[0] if opts else ""
    named = {"--ignore": [], "--witness": False}
    i = 1
    while i < len(opts):
        key = opts[i]
        if key == "--witness":
            named[key] = True
            i += 1
            continue
        value = opts[i + 1] if i + 1 < len(opts) else ""
        if key == "--ignore":
            named[key].append(value)
        else:
            named[key] = value
        i += 2
    return mode, named, command


def compile_patterns(named):
    """The --ignore and --metric-pattern regexes, and the ones that do not compile."""
    bad = []

    def compiled(p):
        try:
            return re.compile(p)
        except re.error as e:
            bad.append("%s: %s" % (p, e))
            return None

    ignore = [c for c in (compiled(p) for p in named["--ignore"]) if c is not None]
    metric = compiled(named["--metric-pattern"]) if "--metric-pattern" in named else None
    return ignore, metric, bad


def main(argv):
    args = argv[1:]
    if "--" not in args or not args:
        sys.stderr.write(__doc__)
        return 2
    mode, named, command = parse_args(args)
    timer_contract.schema()  # read before anything runs: the result line needs it
    cfg = guard.load_config()
    manifest = guard.load_manifest()
    if mode == "plain":
        limit = int(named.get("--output-limit", PLAIN_OUTPUT_LIMIT))
        try:
            result = run_plain(cfg, manifest, command, limit, named["--witness"])
        except (HarnessError, broker.BrokerError) as e:
            result = {"harness_error": str(e)}
    elif mode == "timed":
        ignore, metric, bad = compile_patterns(named)
        opts = {
            "out_dir": named.get("--out-dir", "/run/harness/bench"),
            "output_limit": int(named.get("--output-limit", BENCH_OUTPUT_LIMIT)),
            "output_file": named.get("--output-file"),
            "ignore": ignore,
            "metric_pattern": metric,
            "metric_json_key": named.get("--metric-json-key"),
            "simulate": named.get("--simulate") == "yes",
            "repetitions": int(named.get("--repetitions", "1")),
            "keep": named.get("--keep-output"),
        }
        try:
            result = run_timed(cfg, manifest, command, opts)
        except HarnessError as e:
            result = timer_contract.error_result(str(e))
        result["ignore_errors"] = bad
        # A result that breaks the contract is the harness's failure, said as such.
        result = timer_contract.checked(result)
    elif mode == "kept":
        import equivalence
        return equivalence.print_kept(named.get("--out-dir", "/run/harness/bench"), named.get("--keep-output", ""), command)
    elif mode == "equivalence":
        import equivalence
        limit = int(named.get("--output-limit", PLAIN_OUTPUT_LIMIT))
        try:
            deadline = float(named.get("--deadline", "300"))
            result = equivalence.run(sys.modules[__name__], cfg, manifest, command, limit, deadline)
        except (HarnessError, broker.BrokerError) as e:
            result = {"exit_code": -1, "output_flood": False, "timed_out": False, "output_tail": "",
                      "harness_error": str(e)}
    else:
        sys.stderr.write("timed_run.py: unknown mode %r\n" % mode)
        return 2
    timer_contract.emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
