"""A pytest plugin the harness loads in the test phase (PYTEST_PLUGINS): each test's outcome
and the session's exit status go through the witness pipe (see sitecustomize.py), so the
harness can tell a session whose tests failed from its process's exit status, and compare
the tests that passed with those that passed on base (a test deselected, skipped or
collected no more does not count as passed)."""
import json
import os

_PID = os.getpid()
_BATCH_BYTES = 3500  # one write per line, under PIPE_BUF (4096): lines never interleave
_outcomes = {}
_pending = []


def _fd():
    try:
        fd = int(os.environ.get("HARNESS_WITNESS_FD", ""))
        os.fstat(fd)
        return fd
    except (ValueError, OSError):
        return None


def _write(line):
    fd = _fd()
    if fd is None:
        return
    try:
        os.write(fd, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _flush():
    while _pending:
        batch, size = [], 0
        while _pending and (not batch or size + len(_pending[0][0]) + 16 < _BATCH_BYTES):
            item = _pending.pop(0)
            batch.append(item)
            size += len(item[0]) + 16
        _write("T %d %s" % (_PID, json.dumps(batch)))


_RANK = {"passed": 0, "xfailed": 1, "skipped": 2, "failed": 3}


def pytest_runtest_logreport(report):
    if report.when != "call" and report.passed:
        return
    if report.failed:
        outcome = "failed"
    elif report.skipped:
        outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
    else:
        outcome = "passed"
    before = _outcomes.get(report.nodeid)
    if before is None or _RANK[outcome] > _RANK[before]:
        _outcomes[report.nodeid] = outcome


def pytest_sessionfinish(session, exitstatus):
    _pending.extend(sorted(_outcomes.items()))
    _flush()
    _write("R %d %d" % (_PID, int(exitstatus)))
