#!/usr/bin/env bash
# Makes the default base image (Debian bookworm with python3, pytest, git and patch) without
# a registry: debootstrap into a folder, then `docker import`. Does nothing when the image
# already exists at this script's version (label org.harness.base-version), so it is safe to
# call before every run; an image of an older version is made again.
#
#   scripts/make-base-image.sh            # makes harness-base:bookworm if missing
#   HARNESS_BASE_IMAGE=name:tag DEBIAN_MIRROR=http://... scripts/make-base-image.sh
set -euo pipefail

IMAGE="${HARNESS_BASE_IMAGE:-harness-base:bookworm}"
SUITE="${DEBIAN_SUITE:-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# valgrind: the simulated criterion's CPU simulator (cachegrind).
PACKAGES="python3,python3-pytest,git,patch,ca-certificates,valgrind"
# Raise with PACKAGES (and BASE_IMAGE_VERSION in crates/sandbox/src/docker/image.rs).
VERSION=3

current() {
    docker image inspect --format '{{ index .Config.Labels "org.harness.base-version" }}' "$IMAGE" 2>/dev/null
}

if [ "$(current)" = "$VERSION" ]; then
    echo "base image $IMAGE already exists; nothing to do"
    exit 0
fi

# Two runs starting at once (parallel tests, CI jobs) make the image once.
LOCK="${TMPDIR:-/tmp}/harness-base-image.lock"
exec 9>"$LOCK"
if command -v flock >/dev/null 2>&1; then
    flock 9
    if [ "$(current)" = "$VERSION" ]; then
        echo "base image $IMAGE was made by another run meanwhile; nothing to do"
        exit 0
    fi
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: making $IMAGE needs root (debootstrap) and sudo is not installed" >&2
        exit 1
    fi
fi

if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
    echo "installing debootstrap (one time)..."
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
DEBOOTSTRAP="$(command -v debootstrap || echo /usr/sbin/debootstrap)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/harness-base.XXXXXX")"
cleanup() { $SUDO rm -rf "$WORK"; }
trap cleanup EXIT

echo "making base image $IMAGE: debootstrap $SUITE ($PACKAGES) from $MIRROR (about a minute, one time)..."
start=$(date +%s)
$SUDO "$DEBOOTSTRAP" --variant=minbase --include="$PACKAGES" "$SUITE" "$WORK/rootfs" "$MIRROR" \
    >"$WORK/debootstrap.log" 2>&1 || {
    echo "error: debootstrap failed; last lines of its log:" >&2
    tail -n 30 "$WORK/debootstrap.log" >&2
    exit 1
}
# Package caches and lists are not needed at run time and make the image larger.
$SUDO rm -rf "$WORK/rootfs/var/cache/apt/archives/"*.deb "$WORK/rootfs/var/lib/apt/lists/"*

echo "importing $IMAGE..."
$SUDO tar -C "$WORK/rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'LABEL org.harness.role=base-image' \
    --change "LABEL org.harness.base-version=$VERSION" \
    --change 'CMD ["/bin/bash"]' \
    - "$IMAGE" >/dev/null
echo "base image $IMAGE ready ($(( $(date +%s) - start )) s)"
