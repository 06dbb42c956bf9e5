#!/usr/bin/env python3
"""GSO instance images built here by GSO's own recipe, from real GSO repositories' code on PyPI.

    target/gso-venv/bin/python scripts/gso_images.py [--only ID_PART] [--rows-only] [--keep-from]

For each task below: a local git repository of the project (base = one PyPI release's source,
opt = the next release's, two commits on `main`), a dataset row with every field of GSO's
`GSOInstance` (written to tasks/_gso/rows.jsonl), and the instance image
`gso.eval.<arch>.<id lowercased>:latest` built from what gsobench itself generates:
`get_dockerfile_instance` (the Dockerfile), `GSOInstance.install_repo_script` (setup_repo.sh),
`get_eval_script` (eval.sh) and the row's tests as `gso_test_<i>.py`. Only what cannot be had
here is swapped, each swap named below and printed as it is made:

- `FROM ubuntu:22.04` -> the local Debian base (harness-base:bookworm; `--keep-from` keeps
  GSO's on a machine with a registry); Ubuntu's `libjpeg8-dev` is Debian's `libjpeg-dev`;
- Miniconda (repo.anaconda.com is not reachable; GSO's install commands use uv, not conda):
  not installed;
- uv 0.5.4 from PyPI into /root/.local (astral.sh is not reachable), with the `env` file its
  installer writes;
- the clone from GitHub -> from a bundle of the local repository, kept at
  /root/gso-origin.bundle so that GSO's eval.sh (`git remote add origin ...; git fetch`)
  finds its origin;
- BuildKit's `RUN --mount=type=secret` (this engine's classic builder has none) -> plain
  RUN with an empty HF token (these tests download nothing);
- the machine's own CA certificates (a TLS-inspecting egress here) added to the image's
  store, and `UV_NATIVE_TLS=1` so uv trusts it (only when the host has such certificates).

Everything else (the apt packages, /testbed, the venv, the install commands, `chmod -R 777`,
the refs stripped after base, the tests run at build to fill caches, `source .venv/bin/activate`
in .bashrc) is GSO's, byte for byte.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

os.environ.setdefault("HF_READ_TOKEN", "none")  # gsobench's generator insists on one

from gso.data.dataset import GSOInstance  # noqa: E402
from gso.harness.environment.dockerfile import get_dockerfile_instance  # noqa: E402
from gso.harness.environment.patches import apply_patches  # noqa: E402
from gso.harness.grading.evalscript import get_eval_script  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tasks" / "_gso"
BASE = os.environ.get("HARNESS_BASE_IMAGE", "harness-base:bookworm")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "gso-local", "GIT_AUTHOR_EMAIL": "gso@localhost",
    "GIT_COMMITTER_NAME": "gso-local", "GIT_COMMITTER_EMAIL": "gso@localhost",
}

# GSO-style install commands (uv venv on the image's Python, the package installed from the
# tree, as GSO's rows do).
def uv_install(package):
    return [
        "uv venv --python 3.11",
        "source .venv/bin/activate",
        "which python",
        "python --version",
        "uv pip install . --reinstall",
        # GSO's harness puts its requests shim at the top of every test (patches.py).
        "uv pip install requests",
        f"uv pip show {package}",
    ]


TASKS = [
    {
        "owner_repo": "tornadoweb/tornado",
        "package": "tornado",
        "base": "6.4.1",
        "opt": "6.4.2",
        "date": "2024-11-21T00:00:00+00:00",
        "api": "tornado.httputil.parse_cookie",
        "test": "tornado_parse_cookie.py",
        "message": "tornado 6.4.2: parse_cookie without the quadratic unquoting "
                   "(the release's changelog: cookie parsing could be quadratic, CVE-2024-52804)",
    },
    {
        "owner_repo": "tornadoweb/tornado",
        "package": "tornado",
        "base": "6.3.3",
        "opt": "6.4",
        "date": "2023-11-28T00:00:00+00:00",
        "api": "tornado.escape.xhtml_escape",
        "test": "tornado_xhtml_escape.py",
        "message": "tornado 6.4: xhtml_escape by the standard library's html.escape",
    },
    {
        "owner_repo": "pydantic/pydantic",
        "package": "pydantic",
        "base": "2.10.6",
        "opt": "2.11.0",
        "date": "2025-03-27T00:00:00+00:00",
        "api": "pydantic.create_model",
        "test": "pydantic_create_model.py",
        "message": "pydantic 2.11: faster schema building (the release's notes: "
                   "schema build times and memory down)",
    },
]


def sh(*args, cwd=None, env=None, quiet=False):
    full = dict(os.environ, **(env or {}))
    r = subprocess.run(args, cwd=cwd, env=full, text=True, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed:\n{r.stdout}{r.stderr}")
    if not quiet and r.stdout.strip():
        print(r.stdout.strip())
    return r.stdout


def sdist_tree(package, version, into):
    """The release's source distribution from PyPI, unpacked into `into`."""
    with tempfile.TemporaryDirectory() as tmp:
        sh("python3", "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
           f"{package}=={version}", "-d", tmp, quiet=True)
        archive = next(Path(tmp).glob("*.tar.gz"))
        with tarfile.open(archive) as t:
            t.extractall(tmp, filter="data")
        top = next(p for p in Path(tmp).iterdir() if p.is_dir())
        # What the sdist generated and the project's repository does not hold.
        for generated in [top / "PKG-INFO", *top.glob("*.egg-info")]:
            shutil.rmtree(generated) if generated.is_dir() else generated.unlink()
        for item in top.iterdir():
            shutil.move(str(item), into / item.name)


def make_repo(spec, repo):
    """base and opt as two commits on main; returns their hashes."""
    repo.mkdir(parents=True)
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    hashes = []
    for version in (spec["base"], spec["opt"]):
        for item in repo.iterdir():
            if item.name != ".git":
                shutil.rmtree(item) if item.is_dir() else item.unlink()
        sdist_tree(spec["package"], version, repo)
        sh("git", "add", "-A", cwd=repo)
        env = dict(GIT_ENV, GIT_AUTHOR_DATE=spec["date"], GIT_COMMITTER_DATE=spec["date"])
        message = spec["message"] if version == spec["opt"] else f"{spec['package']} {version}"
        sh("git", "commit", "-q", "-m", message, cwd=repo, env=env)
        hashes.append(sh("git", "rev-parse", "HEAD", cwd=repo, quiet=True).strip())
    return hashes


def row_for(spec, repo, base, opt):
    test = (OUT / "tests" / spec["test"]).read_text()
    owner, name = spec["owner_repo"].split("/")
    return {
        "instance_id": f"{owner}__{name}-{opt[:7]}",
        "repo": spec["owner_repo"],
        "base_commit": base,
        "opt_commit": opt,
        "api": spec["api"],
        "prob_script": test,
        "tests": [test],
        "hints_text": "",
        "setup_commands": [],
        "install_commands": uv_install(spec["package"]),
        "created_at": spec["date"],
        "gt_commit_message": spec["message"],
        "gt_diff": sh("git", "diff", base, opt, cwd=repo, quiet=True),
        "arch": "x86_64",
        "instance_image_tag": "latest",
    }


def swap(text, old, new, why):
    if old not in text:
        sys.exit(f"gsobench's recipe changed: {old[:60]!r} not found ({why})")
    print(f"  swap: {why}")
    return text.replace(old, new)


def host_cas():
    d = Path("/usr/local/share/ca-certificates")
    return sorted(d.glob("*.crt")) if d.is_dir() else []


def recipe(inst, keep_from):
    """gsobench's Dockerfile and setup_repo.sh for `inst`, with the swaps."""
    df = get_dockerfile_instance(inst.platform, inst.arch)
    if not keep_from:
        df = swap(df, f"FROM --platform={inst.platform} ubuntu:22.04", f"FROM {BASE}",
                  "FROM ubuntu:22.04 -> the local Debian base")
        df = swap(df, "libjpeg8-dev", "libjpeg-dev", "Ubuntu's libjpeg8-dev is Debian's libjpeg-dev")
    cas = host_cas()
    if cas:
        df = swap(df, "\nARG DEBIAN_FRONTEND=noninteractive",
                  "\nCOPY ./host-ca/ /usr/local/share/ca-certificates/\n"
                  "RUN update-ca-certificates >/dev/null\nENV UV_NATIVE_TLS=1\n"
                  "ARG DEBIAN_FRONTEND=noninteractive",
                  "this machine's CA certificates into the image (its egress inspects TLS)")
    start = df.index("# Download and install conda")
    end = df.index("# Download and instal uv")
    df = df[:start] + "# Miniconda: not installed (repo.anaconda.com is not reachable here)\n\n" + df[end:]
    print("  swap: Miniconda not installed (repo.anaconda.com unreachable)")
    df = swap(df, "RUN curl -LsSf https://astral.sh/uv/0.5.4/install.sh | sh",
              "RUN python3 -m pip install -q --user --break-system-packages uv==0.5.4 \\\n"
              "    && printf 'export PATH=\"$HOME/.local/bin:$PATH\"\\n' > $HOME/.local/bin/env",
              "uv 0.5.4 from PyPI into /root/.local (astral.sh unreachable)")
    df = swap(df, "COPY ./setup_repo.sh /root/",
              "COPY ./gso-origin.bundle /root/\nCOPY ./setup_repo.sh /root/",
              "the repository from a local bundle (GitHub unreachable)")
    secret = "RUN --mount=type=secret,id=hf_read_token bash -lc 'set -euo pipefail; HF_TOKEN=\"$(cat /run/secrets/hf_read_token)\";"
    df = swap(df, secret, "RUN bash -lc 'set -euo pipefail; HF_TOKEN=\"\";",
              "BuildKit secret mounts -> plain RUN (classic builder; no token needed)")
    setup = swap(inst.install_repo_script,
                 f"git clone -o origin {inst.repo_url} /testbed",
                 "git clone -o origin /root/gso-origin.bundle /testbed"
                 " && chmod 600 /root/gso-origin.bundle",
                 "clone from the bundle (root's only: it holds the opt commit)")
    return df, setup


def build(spec, keep_from, rows_only):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        repo = tmp / "repo"
        base, opt = make_repo(spec, repo)
        row = row_for(spec, repo, base, opt)
        inst = GSOInstance(**row)
        print(f"{inst.instance_id}: base {base[:7]} ({spec['base']}), opt {opt[:7]} ({spec['opt']})")
        if rows_only:
            return row
        ctx = tmp / "ctx"
        ctx.mkdir()
        sh("git", "bundle", "create", str(ctx / "gso-origin.bundle"), "main", cwd=repo, quiet=True)
        df, setup = recipe(inst, keep_from)
        (ctx / "Dockerfile").write_text(df)
        (ctx / "setup_repo.sh").write_text(setup)
        (ctx / "eval.sh").write_text(get_eval_script(GSOInstance(**row)))
        for i, t in enumerate(apply_patches(inst.instance_id, list(inst.tests))):
            (ctx / f"gso_test_{i}.py").write_text(t)
        if host_cas() and not keep_from:
            (ctx / "host-ca").mkdir()
            for c in host_cas():
                shutil.copy(c, ctx / "host-ca" / c.name)
        image = inst.instance_image_key
        print(f"  building {image} (GSO's apt packages and the project's install: minutes)")
        r = subprocess.run(["docker", "build", "-t", image, str(ctx)], text=True,
                           capture_output=True, env=dict(os.environ, DOCKER_BUILDKIT="0"))
        if r.returncode != 0:
            sys.exit(f"docker build {image} failed:\n{r.stdout[-6000:]}{r.stderr[-3000:]}")
        print(f"  built {image}")
        return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="only the tasks whose test file name holds this")
    p.add_argument("--rows-only", action="store_true", help="write the rows, build nothing")
    p.add_argument("--keep-from", action="store_true", help="keep GSO's FROM ubuntu:22.04")
    p.add_argument("--rows-out", type=Path, help="write the rows here (default: tasks/_gso/rows.jsonl, when all are made)")
    a = p.parse_args()
    rows = []
    for spec in TASKS:
        if a.only and a.only not in spec["test"]:
            continue
        rows.append(build(spec, a.keep_from, a.rows_only))
    out = a.rows_out or (None if a.only else OUT / "rows.jsonl")
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"wrote {out} ({len(rows)} rows)")


if __name__ == "__main__":
    main()
