"""The equivalence check of a bench's output file (a task's `equivalence` command, as GSO's
tests compare their result with base's), run outside the process of the code under test.

The timer keeps each timed repetition's output file under its digest (output.kept_dir, the
warden's). After a round, the harness carries the two files whose digests differ (the
reference's and the variant's, `kept` mode: base64 on stdout) into base's container, where
`equivalence` mode runs the task's command on base's code with both files open.
"""
import os
import threading

import broker
import guard
import output


def print_kept(out_dir, bench, digest):
    """The kept output file of `digest`, base64 in the result line (null when none was
    kept), for the harness to carry to base's container."""
    import base64
    import timer_contract
    path = output.kept_file(out_dir, bench, digest)
    if path is None:
        timer_contract.emit(None)
        return 0
    with open(path, "rb") as f:
        timer_contract.emit(base64.b64encode(f.read()).decode())
    return 0


# Where the harness puts the two files its equivalence command compares (the warden's
# folder: the sandbox user reaches them only through the descriptors below).
EQUIVALENCE_INBOX = "/opt/harness-equivalence"
REFERENCE_FD, CANDIDATE_FD = 8, 9


def run(t, cfg, manifest, command, limit, deadline):
    """The task's equivalence command, on this container's code (base's), as the sandbox
    user in a sandbox of its own, like the test: the reference's file and the variant's
    are open on descriptors 8 and 9, named by HARNESS_REFERENCE_OUTPUT and HARNESS_OUTPUT
    (/dev/fd/N), and removed from the inbox before it starts. Exit 0: equivalent. `t` is
    the timer (timed_run), whose run helpers this uses."""
    paths = [os.path.join(EQUIVALENCE_INBOX, n) for n in ("reference", "output")]
    fds = []
    try:
        for p in paths:
            fds.append(os.open(p, os.O_RDONLY))
    except OSError as e:
        for fd in fds:
            os.close(fd)
        raise t.HarnessError("the files to compare are not in %s: %s" % (EQUIVALENCE_INBOX, e))
    finally:
        for p in paths:
            try:
                os.unlink(p)
            except OSError:
                pass
    t.before_run(cfg, manifest)
    out_fd = t.high_fd(output.fresh_file(os.path.join("/run/harness", "equivalence-output")))
    env = t.child_env(cfg, {"HARNESS_REFERENCE_OUTPUT": "/dev/fd/%d" % REFERENCE_FD,
                          "HARNESS_OUTPUT": "/dev/fd/%d" % CANDIDATE_FD})
    result_r, result_w = os.pipe()
    options = t.run_options(cfg, persist=False) + ["--keep-fd", str(REFERENCE_FD), "--keep-fd", str(CANDIDATE_FD)]
    watchdog = t.Watchdog(cfg, {}, (out_fd,), limit)
    # Its own deadline, kept here: a file that makes the check hang is the variant's doing
    # (not equivalent), never a reason to kill base's container.
    timed_out = threading.Event()

    def stop():
        timed_out.set()
        guard.kill_user(cfg["uid"], cfg["gid"])
    timer = threading.Timer(deadline, stop)
    timer.start()
    try:
        broker.run(options, t.argv_for(command), env,
                   {1: out_fd, 2: out_fd, t.RESULT_FD: result_w, REFERENCE_FD: fds[0], CANDIDATE_FD: fds[1]})
    finally:
        for fd in [result_w] + fds:
            os.close(fd)
    blocks = []
    while True:
        block = os.read(result_r, 65536)
        if not block:
            break
        blocks.append(block)
    os.close(result_r)
    timer.cancel()
    watchdog.stop()
    guard.kill_user(cfg["uid"], cfg["gid"])
    report = t.parse_report(blocks)
    tail, _ = output.tail(out_fd)
    os.close(out_fd)
    return {"exit_code": report.get("exit_code", -9), "output_flood": watchdog.flood,
            "timed_out": timed_out.is_set(), "output_tail": tail, "harness_error": None}
