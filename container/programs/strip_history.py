"""Run at the build of a prebuilt-image task's evaluation image (the image of base's and
every sample's containers), as root under Docker's default build settings: the git
repository of /testbed, and that of every submodule in it, keeps base's history alone. A
prebuilt image (GSO's) holds the upstream history past base, the human's fix among it; the
human's own variant runs on the task image, which keeps it.

    python3 -I -S strip_history.py UID GID

- every ref that does not point into base's history goes (branches and tags past base, the
  stash, notes, remotes), reflogs and the *_HEAD files with them; everything then
  unreachable leaves the object store (repack -a -d, then prune), alternates included;
- a submodule's repository keeps the history of the commit base's tree records for it, and
  so on down; a submodule repository base records no commit for (one the fix adds) goes;
- .git is then owned as the guard locks it: folders root's and sticky, files the sandbox
  user's (UID:GID), objects root's and read-only, the config root's;
- it fails when a commit base does not reach can still be read.
Standard library only.
"""
import os
import shutil
import subprocess
import sys

TREE = "/testbed"
TOP = os.path.join(TREE, ".git")
ENV = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", HOME="/nonexistent")
HEADS = ("FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD",
         "REBASE_HEAD", "AUTO_MERGE")


class Fail(Exception):
    pass


def git(git_dir, *args, ok=False):
    out = subprocess.run(["git", "-c", "safe.directory=*", "--git-dir=" + git_dir] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, check=False)
    if out.returncode != 0 and not ok:
        raise Fail("git %s in %s: %s" % (" ".join(args), git_dir,
                                         out.stderr.decode("utf-8", "replace").strip()))
    return out.stdout.decode("utf-8", "surrogateescape") if out.returncode == 0 else None


def remove(*paths):
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def prune(git_dir, keep):
    """Only `keep`'s history stays in `git_dir`; the commits that went must be unreadable."""
    keep = git(git_dir, "rev-parse", "-q", "--verify", keep + "^{commit}").strip()
    later = (git(git_dir, "rev-list", "--all", "--not", keep, ok=True) or "").split()
    for ref in git(git_dir, "for-each-ref", "--format=%(refname)").splitlines():
        at = (git(git_dir, "rev-parse", "-q", "--verify", ref + "^{commit}", ok=True) or "").strip()
        if not at or git(git_dir, "merge-base", "--is-ancestor", at, keep, ok=True) is None:
            git(git_dir, "update-ref", "-d", ref)
    if git(git_dir, "symbolic-ref", "-q", "HEAD", ok=True) is None:
        git(git_dir, "update-ref", "--no-deref", "HEAD", keep)
    for name in ("logs", os.path.join("refs", "original")):
        shutil.rmtree(os.path.join(git_dir, name), ignore_errors=True)
    remove(*(os.path.join(git_dir, name) for name in HEADS))
    git(git_dir, "repack", "-a", "-d", "-q")  # borrowed objects too: alternates can go
    remove(os.path.join(git_dir, "objects", "info", "alternates"))
    git(git_dir, "prune", "--expire=now")
    if later:
        probe = subprocess.run(["git", "-c", "safe.directory=*", "--git-dir=" + git_dir, "cat-file",
                                "--batch-check"], input="\n".join(later).encode(),
                               stdout=subprocess.PIPE, env=ENV, check=False).stdout.decode()
        left = [line.split()[0] for line in probe.splitlines() if not line.endswith(" missing")]
        if left:
            raise Fail("%s still holds commits later than base: %s" % (git_dir, " ".join(left[:5])))
    return keep


def submodules(work_tree, git_dir, commit, kept):
    """Prunes the repository of every submodule `commit` records, then theirs."""
    listing = git(git_dir, "ls-tree", "-r", "-z", commit)
    for entry in listing.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) != 3 or parts[0] != "160000":
            continue
        sub_tree = os.path.join(work_tree, path)
        out = subprocess.run(["git", "-c", "safe.directory=*", "-C", sub_tree, "rev-parse",
                              "--absolute-git-dir"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=ENV, check=False)
        sub_dir = out.stdout.decode("utf-8", "surrogateescape").strip()
        if out.returncode != 0 or not sub_dir.startswith(os.path.join(TOP, "modules") + "/"):
            continue  # not checked out, or its repository is not the image's to prune
        if git(sub_dir, "cat-file", "-e", parts[2] + "^{commit}", ok=True) is None:
            shutil.rmtree(sub_dir)
            continue
        kept.add(sub_dir)
        submodules(sub_tree, sub_dir, prune(sub_dir, parts[2]), kept)


def drop_unkept_modules(kept):
    """Every repository under .git/modules that base records no commit for."""
    root = os.path.join(TOP, "modules")
    for here, dirs, files in os.walk(root, topdown=True):
        if "HEAD" in files and "objects" in dirs and here != root:
            if here not in kept:
                shutil.rmtree(here)
                dirs[:] = []
            else:
                dirs[:] = [d for d in dirs if d == "modules"]


def own(uid, gid, repositories):
    """As the guard's lock_tree leaves .git: folders root's and sticky, files the sandbox
    user's and readable by others, but objects (root's, read-only) and the config."""
    objects = tuple(os.path.join(r, "objects") for r in repositories)
    for here, dirs, files in os.walk(TOP):
        os.lchown(here, 0, 0)
        os.chmod(here, 0o1777)
        if any(here == o or here.startswith(o + "/") for o in objects):
            continue
        for name in files:
            full = os.path.join(here, name)
            if not os.path.islink(full):
                os.lchown(full, uid, gid)
                os.chmod(full, os.stat(full).st_mode & 0o777 | 0o004)
    config = os.path.join(TOP, "config")
    os.chown(config, 0, 0)
    os.chmod(config, 0o444)


def main(argv):
    try:
        uid, gid = int(argv[1]), int(argv[2])
        if not os.path.isdir(TOP):
            raise Fail("%s is not a folder" % TOP)
        base = prune(TOP, "harness-base")
        kept = set()
        submodules(TREE, TOP, base, kept)
        drop_unkept_modules(kept)
        own(uid, gid, kept | {TOP})
    except (Fail, OSError, ValueError, IndexError) as e:
        sys.stderr.write("harness: strip_history: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
