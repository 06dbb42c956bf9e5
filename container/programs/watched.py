"""What the guard watches besides the protected files: Python start-up hooks in the sandbox
user's home, the pytest configuration anywhere in the tree, pytest plugins registered by
distributions the user installed, and modules the user can write that shadow installed ones;
the snapshot of all of it, and what a sandboxed run (the test) wrote of it."""
import hashlib
import json
import os
import re
import subprocess
import sys

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from treewalk import GIT_ENV, GIT_SAFE, TESTBED, UNWALKABLE, digest, is_protected, read_regular, walk  # noqa: E402

# Python start-up hooks: a file of one of these names in a site folder runs in every
# interpreter that starts, the timer's excepted (it runs with -I -S).
STARTUP_HOOK = re.compile(r"(^|.*/)(sitecustomize\.py|usercustomize\.py|[^/]*\.pth)$")


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
        entries = broker.scandir(folder)
    except OSError:
        return names
    for entry in entries:
        e = entry.name
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if e.endswith(".py") and not is_dir:
            names.setdefault(e[:-3], e)
        elif e.endswith(".so") and not is_dir:
            names.setdefault(e.split(".", 1)[0], e)
        elif is_dir and any(i.name == "__init__.py" for i in _entries(os.path.join(folder, e))):
            names.setdefault(e, e + "/__init__.py")
    names.pop("__init__", None)
    return names


def _entries(folder):
    try:
        return broker.scandir(folder)
    except OSError:
        return []


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


HARNESS_PY = "/opt/harness/py"


def written_changes(cfg, written):
    """What a sandboxed run (the test) wrote that the guard watches, from the supervisor's
    list of its layers' entries: the run's writes are gone with it, but while it ran they
    could change what it did (a conftest.py pytest then loaded, a start-up hook, a module
    shadowing an installed one). path -> "written by the run" ("deleted by the run")."""
    found = {}
    if written.get("truncated"):
        found["<the run's writes>"] = "more than the supervisor lists"
    installed = cfg.get("_installed")
    if installed is None:
        installed = cfg["_installed"] = installed_modules()
    script_dirs = {d.strip("/") for d in cfg.get("script_dirs", [""])}
    site = os.path.relpath(user_site(cfg), cfg["home"])
    for point, paths in written.items():
        if not isinstance(paths, list):
            continue
        for entry in paths:
            deleted = entry.startswith("-")
            rel = entry.lstrip("-").rstrip("/")
            if entry.endswith("/") or not rel:
                continue
            what = "deleted by the run" if deleted else "written by the run"
            folder, name = os.path.split(rel)
            module = name[:-3] if name.endswith(".py") else name.split(".", 1)[0] if name.endswith(".so") else None
            if point == TESTBED:
                watched = (is_protected(rel, cfg) or name in PYTEST_INI or name == "pyproject.toml"
                           or (rel.endswith("/entry_points.txt") and (".dist-info/" in rel or ".egg-info/" in rel))
                           or (module in installed and folder in script_dirs))
                if watched:
                    found[rel] = what
            elif point == cfg["home"]:
                watched = (STARTUP_HOOK.match(rel) or (rel.endswith("/entry_points.txt") and ".dist-info/" in rel)
                           or (module in installed and folder == site))
                if watched:
                    found["~/" + rel] = what
    return found
