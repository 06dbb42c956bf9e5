# The image of one task, made by `harness build` from this template. The harness fills in
# the task's image.base (default harness-base:bookworm, made by scripts/make-base-image.sh),
# its image.setup commands (one RUN each, run in /testbed) and the image's labels.
# The source at base goes to /testbed (with the guard to /opt/harness-build, in the same
# COPY) and becomes a one-commit git repository *after* setup, so resetting the tree between
# patch attempts restores exactly what setup left. Last, the guard locks the tree for the
# sandbox user the code under test runs as: folders root-owned and sticky (like /tmp),
# protected files root-owned and read-only, the rest the sandbox user's (container/programs/guard.py).
# Steps are few on purpose: with the classic builder every step is a container.
# Every file of the tree then gets the same fixed, non-zero mtime (setup's outputs too, so
# `make` finds them up to date and rebuilds only what a patch touches); why: SOURCE_MTIME in
# src/docker/image.rs. It is done here, not only in the build context, because the builder's
# cache ignores mtimes: a COPY layer from an older context would come back unchanged.
# (No WORKDIR: each setup command starts with its own `cd /testbed`, and the harness sets
# the working directory of every container it makes.)
FROM {{BASE_IMAGE}}
COPY root/ /
{{SETUP}}
RUN cd /testbed \
    && { command -v git >/dev/null && command -v patch >/dev/null && command -v python3 >/dev/null \
      || { echo "harness: the base image needs git, patch and python3" >&2; exit 1; }; } \
    && find . -exec touch -h -d @{{SOURCE_MTIME}} {} + \
    && git init -q . \
    && git add -A \
    && git -c user.name=harness -c user.email=harness@localhost commit -q --allow-empty --no-verify -m base \
    && git tag harness-base \
    && python3 -I -S /opt/harness-build/guard.py lock-image /opt/harness-build/config.json
LABEL {{LABELS}}
