#!/usr/bin/env python3
"""Keeps the code under test away from the files that judge it.

Inside a task container the code under test (install, test and bench commands, and the
patch's own code) runs as an unprivileged user, RUN_UID. This module, run as root, sets that
up and checks it held:

- lock: every directory of /testbed is root-owned and world-writable with the sticky bit
  (like /tmp: anyone may add files, nobody may remove or rename what is not theirs), every
  protected file is root-owned and read-only, every other file belongs to RUN_UID. So the
  code may build, write caches and edit its own files, but cannot change, replace, rename or
  delete a protected file.
- snapshot / verify: content digests of the protected files (and of the harness's own files
  and the interpreter), taken after the patch is applied and compared after every install,
  test and bench run. Also watched: files matching a protected pattern that appear later
  (a conftest.py written at run time), and Python start-up hooks in the user's site folder.
- kill_user: every process of RUN_UID is killed after each run, so nothing the code left
  running disturbs the next measurement (of another variant: they share cores).

Protected patterns arrive as regular expressions over '/'-separated repository paths, in a
syntax common to Python's re and Rust's regex (the harness translates the task's globs).
Used at image build time (lock-image) and at run time (after-apply), by timed_run.py, and
only with the standard library, under `python3 -I -S`.
"""
import errno
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import time

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from processes import kill_as, kill_user, live_threads, uids_of, user_processes  # noqa: E402,F401
from timer_contract import prefix as result_prefix  # noqa: E402

TESTBED = "/testbed"
CONFIG = "/opt/harness/config.json"
MANIFEST = "/opt/harness/manifest.json"
# Folders whose contents are caches, never sources: not protected, not walked.
SKIP_DIRS = {".git", "__pycache__"}
# Python start-up hooks: a file of one of these names in a site folder runs in every
# interpreter that starts, the timer's excepted (it runs with -I -S).
STARTUP_HOOK = re.compile(r"(^|.*/)(sitecustomize\.py|usercustomize\.py|[^/]*\.pth)$")


def load_config(path=CONFIG):
    with open(path) as f:
        cfg = json.load(f)
    cfg["_protected"] = [re.compile(p) for p in cfg.get("protected", [])]
    state = load_state()
    installed = state.get("installed_modules")
    if installed is not None:
        cfg["_installed"] = set(installed)
    # Read by root's git right after the patch, before any code under test ran: later, the
    # repository is the sandbox user's to change (its refs, a `commondir`), and root's git
    # must not read it.
    base_paths = state.get("base_paths")
    if base_paths is not None:
        cfg["_base_paths"] = set(base_paths)
    return cfg


def is_protected(rel, cfg):
    return any(r.match(rel) for r in cfg["_protected"])


# Folders a walk could not read (a path past the system's limit, say) or did not enter (too
# deep): a tree the guard cannot check is refused, never taken as checked.
UNWALKABLE = []
# No source tree nests folders this deep (node_modules reaches a few dozen). A walk by path
# costs the square of the depth: below this cap every walk of the tree stays cheap, so a
# patch cannot spend the install's or the run's time limit on the harness's own checks.
MAX_DEPTH = 256


def iwalk(top):
    """os.walk(top) (top-down, `dirs` prunable, symlinks to folders listed in `dirs` and not
    followed) without recursion. Folders it cannot read, and folders more than MAX_DEPTH
    below top (not entered), go to UNWALKABLE."""
    stack = [(top, 0)]
    while stack:
        here, depth = stack.pop()
        if depth > MAX_DEPTH:
            UNWALKABLE.append("%s (more than %d folders deep)" % (here[:200], MAX_DEPTH))
            continue
        dirs, files = [], []
        try:
            with os.scandir(here) as it:
                for e in it:
                    try:
                        (dirs if e.is_dir() else files).append(e.name)
                    except OSError:
                        files.append(e.name)
        except FileNotFoundError:
            continue
        except OSError as e:
            if here != top or e.errno != errno.ENOTDIR:
                UNWALKABLE.append("%s (%s)" % (here[:200], e.strerror))
            continue
        yield here, dirs, files
        for d in reversed(dirs):
            full = os.path.join(here, d)
            if not os.path.islink(full):
                stack.append((full, depth + 1))


def walk(root, skip=SKIP_DIRS):
    """Root-relative paths of every file and symlink under root (symlinks not followed)."""
    out = []
    for here, dirs, files in iwalk(root):
        links = [d for d in dirs if os.path.islink(os.path.join(here, d))]
        dirs[:] = sorted(d for d in dirs if d not in skip and d not in links)
        rel_here = os.path.relpath(here, root)
        for name in sorted(files + links):
            out.append(name if rel_here == "." else rel_here + "/" + name)
    return out


def ensure_user(cfg):
    """Adds RUN_UID's user and group without useradd (not every base image has it)."""
    uid, gid, name, home = cfg["uid"], cfg["gid"], cfg["user"], cfg["home"]
    with open("/etc/passwd") as f:
        have_user = any(line.split(":")[2:3] == [str(uid)] for line in f if line.count(":") >= 2)
    if not have_user:
        with open("/etc/passwd", "a") as f:
            f.write("%s:x:%d:%d:harness sandbox user:%s:/bin/sh\n" % (name, uid, gid, home))
    with open("/etc/group") as f:
        have_group = any(line.split(":")[2:3] == [str(gid)] for line in f if line.count(":") >= 2)
    if not have_group:
        with open("/etc/group", "a") as f:
            f.write("%s:x:%d:\n" % (name, gid))
    os.makedirs(home, exist_ok=True)
    os.chown(home, uid, gid)
    os.chmod(home, 0o755)
    # git refuses a repository owned by another user unless told it is safe.
    with open("/etc/gitconfig", "a") as f:
        f.write("[safe]\n\tdirectory = *\n")


def lock_path(full, rel, cfg):
    st = os.lstat(full)
    if stat.S_ISDIR(st.st_mode):
        os.chown(full, 0, 0)
        os.chmod(full, 0o1777)
    elif rel is not None and is_protected(rel, cfg):
        os.lchown(full, 0, 0)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(full, stat.S_IMODE(st.st_mode) & 0o555)
    else:
        os.lchown(full, cfg["uid"], cfg["gid"])
        if not stat.S_ISLNK(st.st_mode):
            # Never a set-id bit on anything the sandbox user owns.
            os.chmod(full, stat.S_IMODE(st.st_mode) & 0o777)


def image_environment():
    """In a prebuilt image (no fixed source mtime): the paths git ignores at base, which are
    the image's own environment (a virtualenv, build outputs), as prefixes ("x/" a folder)."""
    out = subprocess.run(
        GIT_SAFE + ["status", "--porcelain=v1", "-z", "--ignored=matching", "--untracked-files=normal"],
        cwd=TESTBED, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False, env=GIT_ENV,
    ).stdout.decode("utf-8", "surrogateescape")
    return tuple(e[3:] for e in out.split("\0") if e.startswith("!! "))


def in_environment(rel, env):
    return any(rel == p.rstrip("/") or (p.endswith("/") and rel.startswith(p)) for p in env)


def open_environment_path(full, rel, cfg):
    """A path of a prebuilt image's environment: left as the image has it where the sandbox
    user can already use it, so locking does not copy it into a new layer. Folders are made
    writable for all without the sticky bit (the user may replace what install replaces);
    a file is the user's only when it is not writable for all already; protected files are
    locked as anywhere."""
    st = os.lstat(full)
    if stat.S_ISDIR(st.st_mode):
        if stat.S_IMODE(st.st_mode) != 0o777:
            os.chmod(full, 0o777)
        # The user's at the tree's top (sticky): an install may make it anew (`uv venv`).
        if "/" not in rel and (st.st_uid, st.st_gid) != (cfg["uid"], cfg["gid"]):
            os.lchown(full, cfg["uid"], cfg["gid"])
    elif stat.S_ISLNK(st.st_mode):
        return
    elif is_protected(rel, cfg) or stat.S_IMODE(st.st_mode) & 0o006 != 0o006 or st.st_mode & 0o6000:
        lock_path(full, rel, cfg)


def lock_tree(cfg):
    """The whole tree, .git included (the sandbox user resets it between patch attempts),
    but .git/config, which only root's git reads from then on, and must not be able to make
    it run a command. In a prebuilt image, its environment (ignored paths) and git's object
    store are left where the user can already use them (see open_environment_path)."""
    prebuilt = cfg.get("source_mtime") is None
    env = image_environment() if prebuilt else ()
    for here, dirs, files in iwalk(TESTBED):
        rel_here = os.path.relpath(here, TESTBED)
        if env and rel_here != "." and in_environment(rel_here, env):
            open_environment_path(here, rel_here, cfg)
        else:
            lock_path(here, None, cfg)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            rel = name if rel_here == "." else rel_here + "/" + name
            full = os.path.join(here, name)
            if prebuilt and rel.startswith(".git/objects/") and not os.path.islink(full):
                continue  # read-only objects: git never rewrites them
            if env and in_environment(rel, env):
                open_environment_path(full, rel, cfg)
            else:
                lock_path(full, None if rel.startswith(".git/") else rel, cfg)
    config = os.path.join(TESTBED, ".git", "config")
    if os.path.isfile(config) and not os.path.islink(config):
        os.chown(config, 0, 0)
        os.chmod(config, 0o444)


# Where the sandbox user may write at run time besides the tree and its home: size-limited
# memory file systems the harness mounts over these paths (and /dev/shm, Docker's own).
TMPFS_PATHS = ("/tmp", "/var/tmp", "/run/harness", "/dev/shm")
NOT_WALKED = ("/proc", "/sys", "/dev")


def lock_root_fs(cfg):
    """Takes write permission for others off every folder and file of the image outside the
    tree, the sandbox user's home and the tmpfs paths (e.g. /run/lock, a world-writable
    /var/mail): the only disk the code under test can fill is what the harness measures."""
    keep = (TESTBED, cfg["home"]) + TMPFS_PATHS
    fixed = []
    for here, dirs, files in iwalk("/"):
        if here in NOT_WALKED or here in keep or any(here.startswith(k + "/") for k in keep + NOT_WALKED):
            dirs[:] = []
            continue
        for name in [here] + [os.path.join(here, n) for n in files + dirs]:
            try:
                st = os.lstat(name)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o002 or name in keep:
                continue
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                continue
            os.chmod(name, stat.S_IMODE(st.st_mode) & ~0o002)
            fixed.append(name)
    return fixed


# Git run by root on a tree the sandbox user writes: no configuration but ours, no hook, no
# file-system monitor, no external diff or filter (each would run a command as root).
GIT_SAFE = ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
            "-c", "core.untrackedCache=false", "-c", "diff.external=", "-c", "protocol.allow=never",
            "--no-pager"]
GIT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent",
           "GIT_NO_LAZY_FETCH": "1",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C"}


def status_entries(ignored=False):
    """(XY code, path) of what differs from the base commit, untracked files included."""
    args = GIT_SAFE + ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
    if ignored:
        args.append("--ignored=matching")
    out = subprocess.run(
        args, cwd=TESTBED, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False, env=GIT_ENV,
    ).stdout.decode("utf-8", "surrogateescape")
    return [(entry[:2], entry[3:]) for entry in out.split("\0") if len(entry) > 3]


def changed_paths():
    return [path for _, path in status_entries()]


def tree_digests(cfg):
    """Two digests of the tree as the patch left it, from one pass over every path that
    differs from base (with its executable bit, or "missing"); ignored files count when their
    mtime is not the image's fixed one (a patch wrote them).
    - tree: by content. Equal digests = byte-identical trees.
    - code: the same, but a Python file counts by its syntax tree (ast.dump, without
      positions) rather than its bytes. Equal digests = trees that differ at most in the
      comments and layout of Python files, so they run the same instructions (only line
      numbers differ). Docstrings are code (they are in the tree); a file that does not
      parse counts by its bytes."""
    source_mtime = cfg.get("source_mtime")
    tree, code = hashlib.sha256(), hashlib.sha256()
    for status, rel in sorted(status_entries(ignored=True), key=lambda e: e[1]):
        full = os.path.join(TESTBED, rel)
        if status == "!!":
            try:
                if source_mtime is None or int(os.lstat(full).st_mtime) == source_mtime:
                    continue
            except OSError:
                continue
        is_folder = os.path.isdir(full) and not os.path.islink(full)
        by_content = digest_folder(full) if is_folder else digest(full)
        by_code = (python_code(full) if rel.endswith(".py") else None) or by_content
        mode = ""
        try:
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
                mode = ":x"
        except OSError:
            pass
        name = rel.encode("utf-8", "surrogateescape") + b"\0"
        tree.update(name + (by_content + mode).encode() + b"\0")
        code.update(name + (by_code + mode).encode() + b"\0")
    return "sha256:" + tree.hexdigest(), "sha256:" + code.hexdigest()


def digest_folder(top):
    """A folder that git status names as one path (a submodule, a nested repository, an
    ignored folder): by every entry under it, folders (empty ones too) and executable bits
    included, but its own .git, so that trees which differ inside it never count as
    identical."""
    entries = []
    for here, dirs, files in iwalk(top):
        if here == top:
            dirs[:] = [d for d in dirs if d != ".git"]
            files = [f for f in files if f != ".git"]
        for name in files + dirs:
            entries.append(os.path.relpath(os.path.join(here, name), top))
    h = hashlib.sha256()
    for rel in sorted(entries):
        full = os.path.join(top, rel)
        try:
            st = os.lstat(full)
            kind = "d" if stat.S_ISDIR(st.st_mode) else "x" if st.st_mode & 0o111 else "f"
        except OSError:
            kind = "?"
        what = kind if kind == "d" else kind + digest(full)
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + what.encode() + b"\0")
    return "folder:" + h.hexdigest()


def python_code(full):
    """The digest of a Python file's syntax tree, or None when it is not a regular file or
    does not parse."""
    import ast
    try:
        st = os.lstat(full)
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(full, "rb") as f:
            source = f.read()
        dumped = ast.dump(ast.parse(source, filename=full), include_attributes=False)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return "ast:" + hashlib.sha256(dumped.encode("utf-8", "surrogateescape")).hexdigest()


def lock_changed(cfg):
    """After a patch: the files it changed or made, and the folders it made."""
    for rel in changed_paths():
        full = os.path.join(TESTBED, rel)
        if not os.path.lexists(full):
            continue
        lock_path(full, rel, cfg)
        parent = os.path.dirname(rel)
        while parent:
            lock_path(os.path.join(TESTBED, parent), None, cfg)
            parent = os.path.dirname(parent)


def read_regular(full, limit=64 << 20):
    """The bytes of a regular file (at most `limit`), never through a symlink and never
    waiting: a FIFO the code left under a watched name would block root's read forever."""
    fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, size = [], 0
        while size < limit:
            block = os.read(fd, min(1 << 20, limit - size))
            if not block:
                break
            chunks.append(block)
            size += len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def digest(full):
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return "symlink:" + os.readlink(full)
    if not stat.S_ISREG(st.st_mode):
        return "type:%o" % stat.S_IFMT(st.st_mode)
    h = hashlib.sha256()
    with open(full, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            h.update(block)
    return "sha256:" + h.hexdigest()


def user_site_hooks(cfg, home_files):
    """Start-up hooks in the sandbox user's home (pip --user and site put them there)."""
    home = cfg["home"]
    return {"~/" + rel: digest(os.path.join(home, rel)) for rel in home_files if STARTUP_HOOK.match(rel)}


# Files whose pytest section changes what a test run collects, selects or reports (addopts
# with --deselect or -k, testpaths, python_files, plugins...), as pytest finds them: in the
# folder of the tests or any folder above it, so anywhere in the tree.
PYTEST_INI = {"pytest.ini": None, ".pytest.ini": None, "tox.ini": ("pytest", "tool:pytest"),
              "setup.cfg": ("tool:pytest", "pytest")}
SECTION = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*$")


def ini_sections(text, names):
    """The lines of every [name] section of an INI file, in order."""
    out, inside = [], False
    for line in text.splitlines():
        m = SECTION.match(line)
        if m:
            inside = m.group(1) in names
            if inside:
                out.append("[%s]" % m.group(1))
            continue
        if inside:
            out.append(line)
    return "\n".join(out)


def pyproject_pytest(text):
    """The [tool.pytest...] tables of a pyproject.toml, as sorted JSON; the whole file when
    it does not parse or tomllib is missing (any change then counts)."""
    try:
        import tomllib
        data = tomllib.loads(text)
    except Exception:  # noqa: BLE001 - no tomllib (Python < 3.11) or not TOML
        return text
    tool = data.get("tool") if isinstance(data, dict) else None
    pytest_cfg = tool.get("pytest") if isinstance(tool, dict) else None
    return "" if pytest_cfg is None else json.dumps(pytest_cfg, sort_keys=True, default=str)


def test_configuration(tree_files):
    """"<file> [pytest configuration]" -> digest of its pytest part, for each such file."""
    found = {}
    for rel in tree_files:
        name = rel.rsplit("/", 1)[-1]
        if name not in PYTEST_INI and name != "pyproject.toml":
            continue
        full = os.path.join(TESTBED, rel)
        try:
            text = read_regular(full).decode("utf-8", "surrogateescape")
        except OSError:
            continue
        if name == "pyproject.toml":
            part = pyproject_pytest(text)
        elif PYTEST_INI[name] is None:
            part = text  # pytest.ini is pytest's whatever it holds
        else:
            part = ini_sections(text, PYTEST_INI[name])
        if part:
            found["%s [pytest configuration]" % rel] = "sha256:" + hashlib.sha256(
                part.encode("utf-8", "surrogateescape")).hexdigest()
    return found


def pytest_plugins(files, prefix, root):
    """"<entry_points.txt> [pytest11 plugins]" -> digest, for each installed distribution
    (a .dist-info or .egg-info folder) that registers pytest plugins: pytest loads those
    in every run without being asked."""
    found = {}
    for rel in files:
        if not rel.endswith("/entry_points.txt") or not (".dist-info/" in rel or ".egg-info/" in rel):
            continue
        try:
            text = read_regular(os.path.join(root, rel)).decode("utf-8", "surrogateescape")
        except OSError:
            continue
        part = ini_sections(text, ("pytest11",))
        if part.strip() != "[pytest11]" and part:
            found["%s%s [pytest11 plugins]" % (prefix, rel)] = "sha256:" + hashlib.sha256(
                part.encode("utf-8", "surrogateescape")).hexdigest()
    return found


def module_names(folder):
    """Top-level module names a folder on sys.path offers: X.py, X.*.so, X/__init__.py."""
    names = {}
    try:
        entries = os.listdir(folder)
    except OSError:
        return names
    for e in entries:
        full = os.path.join(folder, e)
        if e.endswith(".py") and os.path.isfile(full):
            names.setdefault(e[:-3], e)
        elif e.endswith(".so") and os.path.isfile(full):
            names.setdefault(e.split(".", 1)[0], e)
        elif os.path.isfile(os.path.join(full, "__init__.py")):
            names.setdefault(e, e + "/__init__.py")
    names.pop("__init__", None)
    return names


def installed_modules():
    """Modules of the interpreter's own, root-owned folders: the standard library and the
    site folders (pip and the distribution install there)."""
    import site
    import sysconfig
    roots = set(site.getsitepackages())
    paths = sysconfig.get_paths()
    roots |= {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    roots |= {os.path.join(r, "lib-dynload") for r in list(roots)}
    roots.add(HARNESS_PY)  # the harness's own sitecustomize and pytest plugin
    names = set()
    for r in roots:
        if os.path.isdir(r) and os.stat(r).st_uid == 0:
            names |= set(module_names(r))
    return names


def user_site(cfg):
    v = sys.version_info
    return os.path.join(cfg["home"], ".local/lib/python%d.%d/site-packages" % (v.major, v.minor))


def base_tree_paths():
    """Every file of the tree at base and every folder above one ("a/b.py", "a")."""
    out = subprocess.run(
        GIT_SAFE + ["ls-tree", "-r", "-z", "--name-only", "harness-base"],
        cwd=TESTBED, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False, env=GIT_ENV,
    ).stdout.decode("utf-8", "surrogateescape")
    paths = set()
    for path in out.split("\0"):
        while path:
            paths.add(path)
            path = os.path.dirname(path)
    return paths


def shadowing_modules(cfg):
    """"<file> (shadows the installed module `X`)" -> digest, for every module in a folder
    the sandbox user can write that Python searches before the installed one: the tree's
    root and the folders its test and bench scripts run from (first on sys.path), and the
    user's site folder (before the system's). A module of the tree at base is the task's
    own code, not a shadow (a task that optimises more_itertools ships it at the root, and
    pytest's own dependencies install another): only one the patch or the code adds is."""
    installed = cfg.get("_installed")
    if installed is None:
        installed = cfg["_installed"] = installed_modules()
    base = cfg.get("_base_paths")
    if base is None:
        base = cfg["_base_paths"] = base_tree_paths()
    found = {}
    folders = [("", os.path.join(TESTBED, d) if d else TESTBED) for d in cfg.get("script_dirs", [""])]
    for prefix, folder in folders:
        rel_dir = os.path.relpath(folder, TESTBED)
        for name, entry in module_names(folder).items():
            rel = entry if rel_dir == "." else rel_dir + "/" + entry
            if name in installed and rel not in base:
                found["%s (shadows the installed module `%s`)" % (rel, name)] = digest(os.path.join(folder, entry))
    site_dir = user_site(cfg)
    for name, entry in module_names(site_dir).items():
        if name in installed:
            rel = "~/" + os.path.relpath(os.path.join(site_dir, entry), cfg["home"])
            found["%s (shadows the installed module `%s`)" % (rel, name)] = digest(os.path.join(site_dir, entry))
    return found


def snapshot(cfg):
    """path -> digest of everything watched: protected files of the tree, the harness's own
    files and interpreter (absolute paths), start-up hooks in the user's home (~/...), the
    pytest configuration anywhere in the tree, pytest plugins registered by distributions
    the sandbox user installed, and modules it can write that shadow installed ones."""
    snap = {}
    tree_files = walk(TESTBED)
    for rel in tree_files:
        if is_protected(rel, cfg):
            snap[rel] = digest(os.path.join(TESTBED, rel))
    for path in cfg.get("extras", []) + [os.path.realpath(sys.executable)]:
        snap[path] = digest(path)
    home_files = walk(cfg["home"], skip={"__pycache__"})
    snap.update(user_site_hooks(cfg, home_files))
    snap.update(test_configuration(tree_files))
    snap.update(pytest_plugins(tree_files, "", TESTBED))
    snap.update(pytest_plugins(home_files, "~/", cfg["home"]))
    snap.update(shadowing_modules(cfg))
    for path in UNWALKABLE[:5]:
        # Not in any manifest: a change, naming the folder the guard could not check.
        snap["<unwalkable> " + path] = "unwalkable"
    return snap


def free_bytes():
    """Free space of the tree's file system (None when it cannot be read): a drop is a
    reason for the disk watchdogs to count, never a verdict."""
    try:
        st = os.statvfs(TESTBED)
        return st.f_bavail * st.f_frsize
    except OSError:
        return None


def disk_usage(cfg):
    """Bytes the tree (with .git) and the sandbox user's home take on disk: the only places
    on the container's own, disk-backed file system it can write (see lock_root_fs)."""
    total = 0
    for root in (TESTBED, cfg["home"]):
        for here, dirs, files in iwalk(root):
            for name in files + dirs:
                try:
                    total += os.lstat(os.path.join(here, name)).st_blocks * 512
                except OSError:
                    pass
    return total


STATE = "/opt/harness/state.json"
HARNESS_PY = "/opt/harness/py"


def load_state():
    try:
        with open(STATE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)


def changes(cfg, manifest=None):
    """What differs from the manifest: path -> new digest ("missing" when gone)."""
    if manifest is None:
        manifest = load_manifest()
    now = snapshot(cfg)
    diff = {}
    for path in sorted(set(manifest) | set(now)):
        before, after = manifest.get(path, "missing"), now.get(path, "missing")
        if before != after:
            diff[path] = after
    return diff


def clear_planted_bytecode(cfg, manifest=None):
    """A .pyc the sandbox user put beside a protected module would be imported instead of
    it (same recorded mtime and size): such files are removed before every run."""
    if manifest is None:
        manifest = load_manifest()
    removed = []
    for rel in manifest:
        if rel.startswith("/") or rel.startswith("~/") or not rel.endswith(".py"):
            continue
        cache = os.path.join(TESTBED, os.path.dirname(rel), "__pycache__")
        stem = os.path.basename(rel)[:-3] + "."
        try:
            names = os.listdir(cache)
        except OSError:
            continue
        for name in names:
            full = os.path.join(cache, name)
            if name.startswith(stem) and name.endswith(".pyc"):
                try:
                    if os.lstat(full).st_uid != 0:
                        os.unlink(full)
                        removed.append(os.path.relpath(full, TESTBED))
                except OSError:
                    pass
    return removed


def write_json_atomic(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def emit(result):
    nonce = os.environ.get("HARNESS_NONCE", "")
    sys.stdout.write("\n%s%s %s\n" % (result_prefix(), ":" + nonce if nonce else "", json.dumps(result)))
    sys.stdout.flush()


def after_apply(cfg):
    """Locks what the patch changed and takes the manifest every later run is checked
    against: {"snapshot", "tree", "code"}, or {"tree_error"} when the tree holds a folder
    the guard could not read."""
    # Nothing of the sandbox user's may outlive the patch's application.
    kill_user(cfg["uid"], cfg["gid"])
    tree, code = tree_digests(cfg)
    lock_changed(cfg)
    installed = sorted(installed_modules())
    cfg["_installed"] = set(installed)
    snap = snapshot(cfg)
    if UNWALKABLE:
        return {"tree_error": "the guard cannot read %s%s" % (
            UNWALKABLE[0], " and %d more" % (len(UNWALKABLE) - 1) if len(UNWALKABLE) > 1 else "")}
    write_json_atomic(MANIFEST, snap)
    write_json_atomic(STATE, {"disk_base": disk_usage(cfg), "installed_modules": installed,
                              "base_paths": sorted(cfg.get("_base_paths") or base_tree_paths())})
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import caches
    caches.prime_access_times([TESTBED, cfg["home"]])
    return {"snapshot": snap, "tree": tree, "code": code}


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: guard.py lock-image CONFIG | after-apply | snapshot\n")
        return 2
    cmd = argv[1]
    if cmd == "lock-image":
        cfg = load_config(argv[2])
        ensure_user(cfg)
        lock_tree(cfg)
        lock_root_fs(cfg)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import image_lock  # beside this file in the build context
        image_lock.run(cfg)
        return 0
    cfg = load_config()
    if cmd == "after-apply":
        try:
            emit(after_apply(cfg))
        except (OSError, RecursionError, MemoryError, UnicodeError) as e:
            # What the patch made cannot be checked: the patch's fault, never the harness's.
            emit({"tree_error": "the guard cannot check the tree the patch made: %s: %s"
                                % (type(e).__name__, e)})
        return 0
    if cmd == "snapshot":
        emit({"snapshot": snapshot(cfg), "changes": changes(cfg)})
        return 0
    sys.stderr.write("guard.py: unknown command %r\n" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
