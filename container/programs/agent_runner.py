"""Runs an agent's command for the harness, as the warden, in the agent's container, before
anything of the agent has run:

    harness-supervisor warden /opt/harness/agent_runner.py DISK_LIMIT COMMAND

COMMAND runs by /bin/sh -c as the sandbox user, in /testbed, in a sandbox of its own (root's
supervisor makes it, broker.py): its writes go to layers on a tmpfs of DISK_LIMIT bytes (at
most half the container's memory), so the disk limit holds at the limit, by construction;
no core dumps, no file larger than the limit; once its layers are full it is stopped. When
it ends every process of its user is killed and, in the same sandbox, the warden diffs the tree against base (agent_diff.py); the
sandbox then goes. One line comes last: "HARNESS_RESULT:<nonce> {json}" with the exit
status (128 + the signal that killed it), whether the layers filled, and the patch.

Its environment: the image's and what the harness passed for the agent (HARNESS_TASK_FILE,
HARNESS_INSTANCE_ID, HARNESS_SAMPLE and the agent's variables).
"""
import json
import os
import select
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
import guard  # noqa: E402

RESULT_FD, PATCH_FD = 6, 7
SUPERVISOR = "/opt/harness/bin/harness-supervisor"
# The model gateway's unix socket, bind-mounted read-only from the host (the harness's
# gateway holds the provider's key; the agent holds a token of this run's).
GATEWAY_SOCKET = "/run/harness-gateway/socket"
PATCH_LIMIT = 4 << 20
AGENT_VARS = ("HARNESS_TASK_FILE", "HARNESS_INSTANCE_ID", "HARNESS_SAMPLE")


def agent_env(cfg):
    env = json.loads(os.environ.get("HARNESS_CHILD_ENV") or "{}")
    for key in ("HARNESS_NONCE", "HARNESS_CHILD_ENV", "HARNESS_BROKER_FD"):
        env.pop(key, None)
    env.update({k: os.environ[k] for k in AGENT_VARS if k in os.environ})
    env.update({"HOME": cfg["home"], "USER": cfg["user"], "LOGNAME": cfg["user"]})
    return env


def agent_argv(command):
    """The agent's command; with a gateway, behind the supervisor's relay, started in the
    agent's own sandbox (its network namespace: the agent reaches 127.0.0.1:PORT there and
    nothing else) and listening before the command starts."""
    port = os.environ.get("HARNESS_GATEWAY_PORT")
    if not port:
        return ["/bin/sh", "-c", command]
    relay = "%s relay %s %s" % (SUPERVISOR, int(port), GATEWAY_SOCKET)
    return ["/bin/sh", "-c", relay + ' && exec /bin/sh -c "$1"', "sh", command]


def main(argv):
    limit, command = int(argv[1]), argv[2]
    cfg = guard.load_config("/opt/harness-build/config.json")
    result_r, result_w = os.pipe()
    patch_r, patch_w = os.pipe()
    layer = guard.layer_size({"disk_limit": limit})
    after = [guard.WARDEN_UID, guard.WARDEN_GID, PATCH_FD, sys.executable, "-I", "-S",
             os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_diff.py")]
    options = ["--uid", str(cfg["uid"]), "--gid", str(cfg["gid"]), "--cwd", guard.TESTBED,
               "--fsize", str(layer), "--result-fd", str(RESULT_FD), "--layer-size", str(layer),
               "--layer", guard.TESTBED, "--layer", cfg["home"], "--stop-when-full",
               "--after", json.dumps(after)]
    try:
        broker.run(options, agent_argv(command), agent_env(cfg),
                   {1: 1, 2: 2, RESULT_FD: result_w, PATCH_FD: patch_w})
    finally:
        os.close(result_w)
        os.close(patch_w)
    report, patch, size = [], [], 0
    readers = [result_r, patch_r]
    while readers:
        ready, _, _ = select.select(readers, [], [])
        for fd in ready:
            block = os.read(fd, 65536)
            if not block:
                readers.remove(fd)
            elif fd == result_r:
                report.append(block)
            elif size <= PATCH_LIMIT:
                patch.append(block)
                size += len(block)
    text = b"".join(report).decode("utf-8", "replace").strip()
    run = json.loads(text.splitlines()[-1]) if text else {"error": "the supervisor gave no report"}
    code = run.get("exit_code", -9)
    fresh = run.get("fresh", {})
    guard.emit({
        "harness_error": run.get("error"),
        "exit_code": code if code >= 0 else 128 - code,
        "disk_limit": layer,
        "disk_used": fresh.get("layer_bytes", 0),
        "disk_exceeded": bool(fresh.get("layer_full")),
        "lingering_killed": run.get("lingering_killed", 0),
        "diff_exit": run.get("after_exit"),
        "patch": b"".join(patch).decode("utf-8", "surrogateescape"),
        "patch_over_limit": size > PATCH_LIMIT,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
