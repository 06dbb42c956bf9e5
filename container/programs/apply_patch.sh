#!/bin/sh
# Applies a patch to /testbed inside a task container, trying strategies in order and
# resetting the tree to the base commit between attempts. Prints the strategy that worked
# as the last line: "HARNESS_APPLY_OK <strategy>", or "HARNESS_APPLY_FAILED" (exit 1).
#
#   sh /opt/harness/apply_patch.sh /opt/harness/patch.diff
PATCH="$1"
cd /testbed || exit 2

reset_tree() {
    git reset --hard -q harness-base && git clean -fdq
}

attempt() {
    name="$1"
    shift
    echo ">>> $name"
    if "$@" </dev/null 2>&1; then
        echo "HARNESS_APPLY_OK $name"
        exit 0
    fi
    reset_tree
}

attempt "git apply" git apply --verbose "$PATCH"
attempt "git apply --ignore-space-change" git apply --verbose --ignore-space-change "$PATCH"
attempt "git apply --reject" git apply --verbose --reject "$PATCH"
attempt "patch --fuzz=5" patch --batch --forward --fuzz=5 -p1 --no-backup-if-mismatch -i "$PATCH"
echo "HARNESS_APPLY_FAILED"
exit 1
