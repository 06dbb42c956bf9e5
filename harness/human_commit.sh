#!/bin/sh
# The human reference of a prebuilt-image task from its commit (GSO's `opt_commit`), as root
# before anything of a sample runs. GSO checks the commit out; here it becomes the diff from
# the image's base (harness-base^, the image's own HEAD) to the commit, applied by the same
# cascade as every patch, so the tree is opt_commit's wherever the cascade applies it and
# the guard locks it as for any variant. Submodules the commit moves are then checked out at
# the commit's gitlinks from the objects the image holds (a container has no network).
# Where the image lacks the commit object, the row's patch (GSO's gt_diff) is applied.
#
#   sh /opt/harness/human_commit.sh COMMIT /opt/harness/patch.diff
COMMIT="$1"
PATCH="$2"
HERE="$(dirname "$0")"
cd /testbed || exit 2
G="git -c safe.directory=* -c core.hooksPath=/dev/null"

if $G cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    SHA="$($G rev-parse "$COMMIT^{commit}")"
    echo "human: opt_commit $SHA is in the image: applying git diff harness-base^ $SHA"
    $G diff --binary --no-color --no-ext-diff --no-textconv --end-of-options \
        harness-base^ "$SHA" >"$PATCH.commit" || exit 1
    mv "$PATCH.commit" "$PATCH"
else
    if [ ! -s "$PATCH" ]; then
        echo "human: the image does not hold opt_commit $COMMIT, and the task gives no human.patch"
        echo "HARNESS_APPLY_FAILED"
        exit 1
    fi
    SHA=""
    echo "human: the image does not hold opt_commit $COMMIT: applying the task's human.patch (GSO's gt_diff)"
fi

if [ -s "$PATCH" ]; then
    sh "$HERE/apply_patch.sh" "$PATCH" || exit 1
else
    # The commit changes no file's content (only submodules, or nothing): nothing to apply.
    echo "HARNESS_APPLY_OK no file changes"
fi
[ -n "$SHA" ] || exit 0

# Gitlinks the commit changes: ":<old mode> <new mode> <old> <new> <status>\t<path>".
$G diff --raw --no-abbrev --no-renames harness-base^ "$SHA" | while IFS="$(printf '\t')" read -r meta path; do
    set -- $meta
    old_mode="$1" new_mode="$2" new="$4"
    [ "$old_mode" = ":160000" ] || [ "$new_mode" = "160000" ] || continue
    if [ "$new_mode" != "160000" ]; then
        echo "human: submodule $path removed by opt_commit"
        $G rm -q -r --cached --ignore-unmatch -- "$path" >/dev/null && rm -rf -- "$path" || exit 1
        continue
    fi
    echo "human: submodule $path -> $new"
    $G update-index --add --cacheinfo "160000,$new,$path" || exit 1
    # --force: the image's own changes in the submodule (modes, build outputs of tracked
    # files) give way, as GSO cleans submodules before its checkout.
    if ! $G -c protocol.file.allow=always submodule update --init --recursive --force -- "$path" 2>&1; then
        echo "human: submodule $path: cannot check out $new (its objects must be in the image: a container has no network)"
        exit 1
    fi
done || { echo "HARNESS_APPLY_FAILED"; exit 1; }
echo "HARNESS_APPLY_OK opt_commit $SHA"
