#!/bin/sh
# Run at the agent image's build, as root under Docker's default build settings, before the
# agent's own set-up: what the agent must not see taken out of its image.
#
#   sh agent_hide.sh HIDDEN_PATH...
#
# - the hidden paths (the task's [image] files, GSO's reference results) are removed;
# - /testbed/.git becomes a clone of base's history alone (the commits up to harness-base,
#   which stays a tag, and the branch HEAD names, if any), its index and info/ (the image's
#   ignored environment) kept: a prebuilt image's .git may hold the upstream history past
#   base, the human's fix among it;
# - /opt/agent-base.git, a copy of that repository of base alone, the warden's and closed to
#   everyone else: the agent's diff is made with it (by the warden, after the agent), so
#   nothing the agent writes into /testbed/.git decides what its patch is.
# It fails when a commit base does not reach is still in the agent's repository.
set -e
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/nonexistent
G0="git -c safe.directory=* --git-dir=/testbed/.git"
rm -rf -- "$@"
V=/opt/agent-view
rm -rf "$V"
git -c safe.directory='*' clone -q --no-local --no-checkout --single-branch --no-tags \
    --branch harness-base /testbed/.git "$V"
G="git --git-dir=$V/.git"
$G remote remove origin
$G tag -f harness-base HEAD >/dev/null
if B=$($G0 symbolic-ref -q HEAD); then $G update-ref "$B" HEAD; $G symbolic-ref HEAD "$B"; fi
if [ -f /testbed/.git/index ]; then cp /testbed/.git/index "$V/.git/index"; fi
if [ -d /testbed/.git/info ]; then mkdir -p "$V/.git/info"; cp -a /testbed/.git/info/. "$V/.git/info/"; fi
LATER=$($G0 rev-list --all --not harness-base)
rm -rf /testbed/.git
mv "$V/.git" /testbed/.git
rm -rf "$V"
LEFT=$(printf '%s\n' "$LATER" | git --git-dir=/testbed/.git cat-file --batch-check | { grep -v ' missing$' || true; })
if [ -n "$LATER" ] && [ -n "$LEFT" ]; then
    echo "harness: the agent's repository still holds commits later than base: $LEFT" >&2
    exit 1
fi
BASE=/opt/agent-base.git
rm -rf "$BASE"
cp -a /testbed/.git "$BASE"
chown -R 10002:10002 "$BASE"
chmod 700 "$BASE"
chown -R 10001:10001 /testbed/.git
find /testbed/.git -type d -exec chown 0:0 {} + -exec chmod 1777 {} +
chown 0:0 /testbed/.git/config
chmod 444 /testbed/.git/config
