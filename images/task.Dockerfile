# The image of one task, made by `harness build` from this template.
#   {{BASE_IMAGE}}  the task's image.base (default harness-base:bookworm, made by scripts/make-base-image.sh)
#   {{SETUP}}       the task's image.setup commands, one RUN each, run in /testbed
# The source at base goes to /testbed and becomes a one-commit git repository *after* setup,
# so resetting the tree between patch attempts restores exactly what setup left.
FROM {{BASE_IMAGE}}
COPY source/ /testbed/
WORKDIR /testbed
{{SETUP}}
RUN command -v git >/dev/null && command -v patch >/dev/null && command -v python3 >/dev/null \
    || { echo "harness: the base image needs git, patch and python3" >&2; exit 1; }
RUN git init -q . \
    && git add -A \
    && git -c user.name=harness -c user.email=harness@localhost commit -q --allow-empty --no-verify -m base \
    && git tag harness-base
