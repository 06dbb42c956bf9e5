"""The simulated criterion's side of the in-container timer (see timed_run.py): every
process the bench starts runs under cachegrind, which writes each one's counts to a log
descriptor when it ends; the counts are summed into estimated cycles, and every process of
the sandbox user seen while the bench ran must have reported. Standard library only."""
import os
import re
import threading

import guard


def command(log_fd, valgrind="valgrind"):
    """Valgrind's command line, before the bench's. The caches are fixed (not read off this
    machine's CPU), so a count is the same anywhere; `log_fd` is where the bench's processes
    find the log. `valgrind` is the image's, pinned at build (never one on the user's PATH),
    and it reads no option file (a `.valgrindrc` in the tree would be the code's)."""
    return [valgrind, "--command-line-only=yes", "--tool=cachegrind", "--cache-sim=yes",
            "--trace-children=yes", "--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64",
            "--cachegrind-out-file=/dev/null", "--log-fd=%d" % log_fd]


SIM_LOG_LIMIT = 4 * 1024 * 1024
SIM_FIELDS = {"I   refs": "ir", "I1  misses": "i1", "LLi misses": "lli",
              "D   refs": "dr", "D1  misses": "d1", "LLd misses": "lld"}
SIM_LINE = re.compile(r"^==(\d+)== (I   refs|I1  misses|LLi misses|D   refs|D1  misses|LLd misses):\s+([\d,]+)")
SIM_COMMAND = re.compile(r"^==(\d+)== Command: ")


class PipeReader:
    """Reads a pipe to its end in a thread, keeping at most `limit` bytes."""

    def __init__(self, fd, limit):
        self.fd, self.limit, self.chunks, self.size = fd, limit, [], 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                block = os.read(self.fd, 65536)
            except OSError:
                break
            if not block:
                break
            if self.size < self.limit:
                self.chunks.append(block[: self.limit - self.size])
                self.size += len(self.chunks[-1])
        os.close(self.fd)

    def text(self):
        self.thread.join(timeout=5)
        return b"".join(self.chunks).decode("utf-8", "replace")


def inner_pid(pid):
    """A process's pid in its own (innermost) PID namespace, where the bench's sandbox puts
    it and the simulator's log names it (the last field of NSpid); None when the process
    is gone before its status could be read (its outer number would name no process of the
    log)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return line.split()[-1]
    except OSError:
        return None
    return str(pid)


class PidWatch:
    """Every process of the sandbox user seen while the bench runs (every 20 ms): each must
    report counts. A process can keep its counts out of the log (close the descriptor before
    it starts, its counts then go to its stderr); it cannot keep out of /proc."""

    def __init__(self, uid):
        self.uid, self.seen = uid, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self):
        while True:
            try:
                inner = (inner_pid(pid) for pid in guard.user_processes(self.uid))
                self.seen.update(p for p in inner if p is not None)
            except OSError:
                pass
            if self._stop.wait(0.02):
                return

    def stop(self, own=()):
        """The bench's processes seen: every one but `own`, the pids the run's supervisor
        reports as its own helpers (the warm-up, and those that stop every process of the
        sandbox user after the bench, which are that user too and were once seen under
        load). The supervisor names them; a bench process cannot be among them."""
        self._stop.set()
        self._thread.join()
        return self.seen - {str(p) for p in own}


def simulated_cost(log, seen=()):
    """Cachegrind's counts over every process of the log, and the estimated cycles
    (iai-callgrind's model: L1 hit 1, last-level hit 5, memory 35). A process that started
    (its Command line) or was seen running but reported no counts ran outside the count: an
    error."""
    per_pid, started = {}, set(seen)
    for line in log.splitlines():
        m = SIM_COMMAND.match(line)
        if m:
            started.add(m.group(1))
            continue
        m = SIM_LINE.match(line)
        if m:
            per_pid.setdefault(m.group(1), {})[SIM_FIELDS[m.group(2)]] = int(m.group(3).replace(",", ""))
    complete = {pid: c for pid, c in per_pid.items() if len(c) == len(SIM_FIELDS)}
    if not complete:
        return {"error": "the simulator reported no counts"}
    missing = sorted(started - set(complete))
    if missing:
        return {"error": "%d process(es) of the bench ran outside the simulator's count (pid %s): "
                "a process must not close the harness's descriptors before it starts"
                % (len(missing), ", ".join(missing[:5]))}
    total = {k: sum(c[k] for c in complete.values()) for k in SIM_FIELDS.values()}
    accesses = total["ir"] + total["dr"]
    l1_miss = total["i1"] + total["d1"]
    ll_miss = total["lli"] + total["lld"]
    total["cycles"] = (accesses - l1_miss) + 5 * (l1_miss - ll_miss) + 35 * ll_miss
    total["processes"] = len(complete)
    return total
