"""What the harness's programs ask of root. They run as the warden, an unprivileged user of
the harness's own (harness-supervisor's `warden`): nothing of the image runs as root. The
supervisor, the harness's static program, stays root beside them and does, on request,
what needs root (container/supervisor/src/broker.rs): start a command as the sandbox user in
a sandbox of its own, stop every process of that user, give a file of the tree or home to
an owner, remove one, open one the warden may not read.

One request per message on a SOCK_SEQPACKET socket (JSON, descriptors beside it), one reply
each; a lock makes the calls of several threads (the timer's watchdog) take turns.
"""
import _socket  # the C module alone: `socket` costs a timed exec milliseconds to import
import array
import errno
import json
import os
import threading

_LOCK = threading.Lock()
_SOCK = None


class BrokerError(OSError):
    """Root refused or failed (a path outside the tree, a symlink on the way...)."""


def _sock():
    global _SOCK
    if _SOCK is None:
        fd = int(os.environ["HARNESS_BROKER_FD"])
        os.set_inheritable(fd, False)  # nothing the warden starts holds root's socket
        _SOCK = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, fd)
    return _SOCK


def available():
    return "HARNESS_BROKER_FD" in os.environ


def call(request, fds=()):
    """The reply to `request` (a dict), and the descriptor sent with it (or None)."""
    data = json.dumps(request).encode()
    anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", list(fds)))] if fds else []
    with _LOCK:
        sock = _sock()
        sock.sendmsg([data], anc)
        msg, ancdata, _, _ = sock.recvmsg(1 << 20, _socket.CMSG_SPACE(4))
    got = None
    for level, kind, payload in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(payload[:len(payload) - len(payload) % 4])
            if received:
                got = received[0]
    reply = json.loads(msg.decode()) if msg else {"error": "the supervisor is gone"}
    if "error" in reply:
        if got is not None:
            os.close(got)
        raise BrokerError(errno.EPERM, reply["error"])
    return reply, got


def run(options, argv, env, fds):
    """Starts `argv` as the sandbox user: `options` are harness-supervisor run's, `fds` maps
    a number in the command to a descriptor of ours. Its end: the result descriptor's EOF."""
    numbers = sorted(fds)
    reply, _ = call({"op": "run", "options": list(options), "argv": list(argv), "env": dict(env),
                     "fds": numbers}, [fds[n] for n in numbers])
    return reply["pid"]


def kill_user():
    """(processes killed, still running after five seconds)."""
    reply, _ = call({"op": "kill-user"})
    return reply["killed"], reply["survivors"]


def chown(path, uid, gid, mode=None):
    call({"op": "chown", "path": path, "uid": uid, "gid": gid, "mode": mode})


def remove(path):
    """Whether it was there."""
    return call({"op": "remove", "path": path})[0].get("removed", False)


def open_read(path):
    """A descriptor of `path` for reading (listing, for a folder), opened by root."""
    _, fd = call({"op": "open", "path": path})
    if fd is None:
        raise BrokerError(errno.EIO, "%s: no descriptor came back" % path)
    return fd


def du(path):
    """Bytes `path` and everything under it take on disk (st_blocks), counted by root: a
    folder the sandbox user closed to others is counted too."""
    return call({"op": "du", "path": path})[0]["bytes"]


def held():
    """Bytes of files deleted but still held open by the container's processes, on the
    tree's and the home's file systems (a walk cannot see them)."""
    return call({"op": "held"})[0]["bytes"]


def scandir(path):
    """The entries of os.scandir(path), as a list, through a descriptor root opened when the
    warden may not list the folder. Entries give their names and types (from the listing
    itself); a stat through them may still be refused."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except PermissionError:
        if not available():
            raise
        fd = open_read(path)
        try:
            return list(os.scandir(fd))
        finally:
            os.close(fd)


def open_fd(path):
    """os.open(path) for reading, never through a symlink and never waiting; by root when
    the warden may not read it."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
    try:
        return os.open(path, flags)
    except PermissionError:
        if not available():
            raise
        return open_read(path)
