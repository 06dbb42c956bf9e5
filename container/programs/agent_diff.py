"""The diff of an agent's tree, as the warden, in the agent's sandbox once the agent is done
and every process of its user is gone (harness-supervisor run --after): git with the
warden's repository of base (/opt/agent-base.git, made at the agent image's build), never
the agent's /testbed/.git; no configuration but its own, no hook, file-system monitor,
external diff or text conversion; its index and new objects in a folder of its own (the
repository is read-only in the sandbox). Without `--binary`: a binary file is named
("Binary files ... differ"), its content left out (the harness refuses such a patch).
The diff goes to stdout."""
import os
import subprocess
import sys
import tempfile

BASE = "/opt/agent-base.git"
GIT = ["git", "--git-dir=" + BASE, "--work-tree=/testbed", "-c", "core.fsmonitor=false",
       "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false", "-c", "safe.directory=*",
       "-c", "diff.external=", "-c", "protocol.allow=never", "--no-pager"]


def main():
    work = tempfile.mkdtemp(prefix="harness-diff-")
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_OPTIONAL_LOCKS": "0",
           "GIT_INDEX_FILE": os.path.join(work, "index"),
           "GIT_OBJECT_DIRECTORY": os.path.join(work, "objects"),
           "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(BASE, "objects"), "LC_ALL": "C"}
    os.makedirs(env["GIT_OBJECT_DIRECTORY"])
    for step in (["read-tree", "harness-base"], ["add", "-A"]):
        done = subprocess.run(GIT + step, cwd="/testbed", env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, check=False)
        if done.returncode != 0:
            sys.stderr.write("harness: git %s: %s" % (step[0], done.stderr.decode("utf-8", "replace")))
            return 2
    return subprocess.run(GIT + ["diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv",
                                 "harness-base"], cwd="/testbed", env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
