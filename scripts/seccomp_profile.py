#!/usr/bin/env python3
"""Writes the seccomp profile of every container the harness makes: Docker's own default
profile (as the engine builds it, from the engine's Go source: Debian's
golang-github-docker-docker-dev ships it) plus exactly what the harness's static supervisor
needs to make each run's sandbox without any capability on the host:

  clone    with exactly CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC (and CLONE_NEWNET): the
           run's namespaces, entered in one call (Docker's default allows clone only
           without namespace flags, unless the container has SYS_ADMIN)
  mount, umount2
           the run's mounts, made in the mount namespace its user namespace owns (the kernel
           refuses there whatever would reach the host: a cgroup, sysfs or proc mount)

Nothing else of Docker's default changes, and the supervisor takes the additions away again
(a filter of its own) from every program it starts, so the code under test, the image's
programs and the harness's own Python run under Docker's default.

    python3 scripts/seccomp_profile.py [--docker-source PATH] [--out container/seccomp.json]
    python3 scripts/seccomp_profile.py --check container/seccomp.json   # CI: up to date

PATH defaults to the Debian package's default_linux.go.
"""
import argparse
import json
import re
import sys

DEBIAN_SOURCE = ("/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/"
                 "default_linux.go")
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
CLONE_NEWCGROUP = 0x2000000
NAMESPACE_FLAGS = (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
                   | CLONE_NEWNET | CLONE_NEWCGROUP)
SANDBOX = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC
UNIX = {"unix.CLONE_" + n[len("CLONE_"):]: v for n, v in globals().items() if n.startswith("CLONE_")}
ARCHES = {"X86_64": "SCMP_ARCH_X86_64", "X86": "SCMP_ARCH_X86", "X32": "SCMP_ARCH_X32",
          "AARCH64": "SCMP_ARCH_AARCH64", "ARM": "SCMP_ARCH_ARM", "MIPS64": "SCMP_ARCH_MIPS64",
          "MIPS": "SCMP_ARCH_MIPS", "MIPS64N32": "SCMP_ARCH_MIPS64N32",
          "MIPSEL64": "SCMP_ARCH_MIPSEL64", "MIPSEL": "SCMP_ARCH_MIPSEL",
          "MIPSEL64N32": "SCMP_ARCH_MIPSEL64N32", "S390X": "SCMP_ARCH_S390X",
          "S390": "SCMP_ARCH_S390"}
ACTIONS = {"ActAllow": "SCMP_ACT_ALLOW", "ActErrno": "SCMP_ACT_ERRNO"}
OPS = {"OpMaskedEqual": "SCMP_CMP_MASKED_EQ", "OpEqualTo": "SCMP_CMP_EQ"}
ERRNO = {"nosys": 38, "nosysMIPS": 89}


def blocks(text):
    """The top-level `{...}` literals of a Go list body."""
    depth, start, out = 0, None, []
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                out.append(text[start + 1:i])
    return out


def strings(text):
    return re.findall(r'"([^"]*)"', text)


def field(text, name):
    """The text of `name: {...}` or `name: value,` at the top of a literal."""
    m = re.search(r"\b%s:\s*" % name, text)
    if not m:
        return None
    rest = text[m.end():]
    if rest.startswith("[]") or rest.startswith("Filter{") or rest.startswith("&KernelVersion{"):
        brace = rest.index("{")
        return rest[:brace] + "{" + blocks(rest[brace:])[0] + "}"
    return rest.split(",", 1)[0].split("\n", 1)[0].strip()


def value(expr):
    total = 0
    for part in expr.split("|"):
        part = part.strip()
        total |= UNIX[part] if part in UNIX else int(part, 0)
    return total


def a_filter(text):
    if text is None:
        return {}
    out = {}
    caps = field(text, "Caps")
    if caps:
        out["caps"] = strings(caps)
    arches = field(text, "Arches")
    if arches:
        out["arches"] = strings(arches)
    kernel = field(text, "MinKernel")
    if kernel:
        major, minor = re.findall(r"\d+", kernel)[:2]
        out["minKernel"] = "%s.%s" % (major, minor)
    return out


def a_rule(text):
    rule = {"names": strings(field(text, "Names")),
            "action": ACTIONS[field(text, "Action").split(".")[-1]]}
    errno = field(text, "ErrnoRet")
    if errno:
        rule["errnoRet"] = ERRNO[errno.lstrip("&")]
    args = field(text, "Args") or ""
    rule["args"] = []
    inner = blocks(args[args.index("{"):])[0] if "{" in args else ""
    for a in blocks(inner):
        arg = {"index": int(field(a, "Index")), "value": value(field(a, "Value")),
               "op": OPS[field(a, "Op").split(".")[-1]]}
        two = field(a, "ValueTwo")
        arg["valueTwo"] = value(two) if two else 0
        rule["args"].append(arg)
    comment = re.search(r'Comment:\s*"([^"]*)"', text)
    rule["comment"] = comment.group(1) if comment else ""
    rule["includes"] = a_filter(field(text, "Includes"))
    rule["excludes"] = a_filter(field(text, "Excludes"))
    return rule


def docker_default(source):
    text = open(source).read()
    arch_body = text[text.index("func arches()"):text.index("const (")]
    arch_map = []
    for b in blocks(arch_body[arch_body.index("return []Architecture{") + len("return []Architecture"):])[:1]:
        for a in blocks(b):
            names = re.findall(r"specs\.Arch(\w+)", a)
            arch_map.append({"architecture": ARCHES[names[0]],
                             "subArchitectures": [ARCHES[n] for n in names[1:]]})
    body = text[text.index("syscalls := []*Syscall{") + len("syscalls := []*Syscall"):]
    rules = [a_rule(b) for b in blocks(blocks(body)[0])]
    return {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1, "archMap": arch_map,
            "syscalls": rules}


def additions():
    clone = [{"names": ["clone"], "action": "SCMP_ACT_ALLOW",
              "args": [{"index": 0, "value": NAMESPACE_FLAGS, "valueTwo": flags,
                        "op": "SCMP_CMP_MASKED_EQ"}],
              "comment": "harness: the supervisor's run sandbox, %s" % what,
              "includes": {}, "excludes": {"arches": ["s390", "s390x"]}}
             for flags, what in ((SANDBOX, "its user, mount and IPC namespaces"),
                                 (SANDBOX | CLONE_NEWNET, "and a network namespace"))]
    mounts = {"names": ["mount", "umount2"], "action": "SCMP_ACT_ALLOW", "args": [],
              "comment": "harness: the run's mounts, in the mount namespace its user "
                         "namespace owns", "includes": {}, "excludes": {}}
    return clone + [mounts]


def profile(source):
    p = docker_default(source)
    p["syscalls"] += additions()
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docker-source", default=DEBIAN_SOURCE)
    ap.add_argument("--out")
    ap.add_argument("--check")
    args = ap.parse_args()
    text = json.dumps(profile(args.docker_source), indent=1) + "\n"
    if args.check:
        if open(args.check).read() != text:
            sys.exit("%s is not Docker's default profile (%s) plus the harness's additions: "
                     "run scripts/seccomp_profile.py --out %s" % (args.check, args.docker_source, args.check))
        print("%s: Docker's default plus the harness's additions" % args.check)
        return
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
