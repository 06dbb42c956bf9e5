"""The harness's witness in the test's Python processes.

Only in the test phase: container/programs/timed_run.py puts this folder first on PYTHONPATH and the
write end of a pipe at descriptor HARNESS_WITNESS_FD. Each interpreter started with that
descriptor says so ("S pid ppid argv") and, from its last exit handler (registered first, so
run after every other one), "E pid". An interpreter that said "S" but never "E" ended without
finishing its shutdown (os._exit, a crash, a signal): the exit status its process gave is not
the one its code reached normally, e.g. a test that failed and then forced exit 0 from an
exit handler. The distribution's own sitecustomize, if there is one, runs after this.

Code running in the same interpreter can tamper with this, as with anything in-process; the
harness says so (README, "What a patch cannot do").
"""
import atexit
import os
import sys


def _descriptor():
    try:
        fd = int(os.environ.get("HARNESS_WITNESS_FD", ""))
        os.fstat(fd)
        return fd
    except (ValueError, OSError):
        return None


_FD = _descriptor()
_PID = os.getpid()


def _say(line):
    if _FD is None:
        return
    try:
        os.write(_FD, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _command_line():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]
    except OSError:
        return ""


def _ended():
    if os.getpid() == _PID:
        _say("E %d" % _PID)


if _FD is not None:
    _say("S %d %d %s" % (_PID, os.getppid(), _command_line()))
    atexit.register(_ended)


def _run_the_next_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if p and os.path.abspath(p) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin is None:
        return
    if os.path.dirname(os.path.abspath(spec.origin)) == here:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - as site.py does: a broken hook does not stop Python
        pass


_run_the_next_sitecustomize()
