"""The test phase's witness: what the test's Python processes report through a pipe
(container/programs/py/: its sitecustomize and pytest plugin), read by the timer."""
import json
import os
import zlib

# The longest line of the witness pipe kept, and the test outcomes kept per session: the pipe
# is written by the test's processes, which may write anything.
MAX_LINE = 4 << 20
MAX_OUTCOMES = 200000


class Witness:
    """Reads what the test's Python processes report (container/programs/py/): which interpreters
    started, which finished their shutdown, and pytest's outcomes."""

    def __init__(self, pipe):
        """`pipe`: (read end, write end), the write end where the test's processes find it."""
        self.r, self.w = pipe
        self.buf = b""
        self.started = {}
        self.ended = set()
        self.sessions = {}

    def close_writer(self):
        os.close(self.w)

    def read_some(self):
        try:
            chunk = os.read(self.r, 65536)
        except BlockingIOError:
            raise
        except OSError:
            return False
        if not chunk:
            return False
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        if len(self.buf) > MAX_LINE:
            self.buf = b""  # a line no witness writes: dropped, never held whole
        for line in lines:
            self.take(line.decode("utf-8", "replace"))
        return True

    def take(self, line):
        kind, _, rest = line.partition(" ")
        try:
            if kind == "S":
                pid, ppid, name = rest.split(" ", 2)
                self.started[int(pid)] = {"pid": int(pid), "ppid": int(ppid), "argv": name[:200]}
            elif kind == "E":
                self.ended.add(int(rest))
            elif kind == "T":
                pid, payload = rest.split(" ", 1)
                session = self.sessions.setdefault(int(pid), {"outcomes": {}, "exitstatus": None})
                if len(payload) > MAX_LINE:
                    return
                for nodeid, outcome in json.loads(payload):
                    if len(session["outcomes"]) < MAX_OUTCOMES:
                        session["outcomes"][str(nodeid)[:1000]] = str(outcome)[:20]
            elif kind == "R":
                pid, status = rest.split(" ", 1)
                session = self.sessions.setdefault(int(pid), {"outcomes": {}, "exitstatus": None})
                session["exitstatus"] = int(status)
        except (ValueError, TypeError, RecursionError, MemoryError, AttributeError):
            pass  # what the code under test wrote into the pipe: never the timer's failure

    def report(self):
        # Every writer is gone by now (the sandbox user's processes were killed): drain
        # what is left, never waiting.
        os.set_blocking(self.r, False)
        while True:
            try:
                if not self.read_some():
                    break
            except BlockingIOError:
                break
        os.close(self.r)
        interpreters = [dict(v, ended=pid in self.ended) for pid, v in sorted(self.started.items())]
        sessions = []
        for pid, s in sorted(self.sessions.items()):
            passed = sorted(n for n, o in s["outcomes"].items() if o == "passed")
            others = sorted("%s %s" % (o, n) for n, o in s["outcomes"].items() if o != "passed")
            packed = zlib.compress("\n".join(passed).encode("utf-8", "replace")).hex()
            sessions.append({"pid": pid, "exitstatus": s["exitstatus"], "passed_count": len(passed),
                             "passed_zlib": packed, "not_passed": others[:50],
                             "not_passed_count": len(others)})
        return {"interpreters": interpreters, "pytest": sessions}
