#!/bin/sh
# The human reference of a prebuilt-image task from its commit (GSO's `opt_commit`), as the
# sandbox user, before anything of a sample runs (the guard has handed what the commit
# touches to that user: guard.py unlock-human). GSO checks the commit out; here it becomes the diff from
# the image's base (harness-base^, the image's own HEAD) to the commit, applied by the same
# cascade as every patch, so the tree is opt_commit's wherever the cascade applies it and
# the guard locks it as for any variant. Submodules the commit moves are then checked out at
# the commit's gitlinks from the objects the image holds (a container has no network).
# Where the image lacks the commit object, the row's patch (GSO's gt_diff) is applied.
#
#   sh /opt/harness/human_commit.sh COMMIT /opt/harness/patch.diff
#
# Paths come from `git diff --raw -z` through `xargs -0`, never parsed by the shell, so a
# submodule path with spaces, tabs, quotes or non-ASCII letters is passed as it is; each
# changed path is handled by this script again: `--gone META PATH` (a submodule the commit
# removes or replaces by files, taken out before the diff is applied) and `--moved META
# PATH` (a submodule the commit adds or moves, checked out after).
G="git -c safe.directory=* -c core.hooksPath=/dev/null"
cd /testbed || exit 2

gitlink_modes() {  # META = ":<old mode> <new mode> <old> <new> <status>"
    set -- $1
    old_mode="${1#:}" new_mode="$2" new="$4"
}

case "$1" in
--gone)
    gitlink_modes "$2"
    [ "$old_mode" = 160000 ] && [ "$new_mode" != 160000 ] || exit 0
    # Its checkout goes; the empty folder stays, as a submodule git apply removes.
    echo "human: submodule $3 removed by opt_commit"
    rm -rf -- "$3" && mkdir -p -- "$3"
    exit
    ;;
--moved)
    gitlink_modes "$2"
    [ "$new_mode" = 160000 ] || exit 0
    echo "human: submodule $3 -> $new"
    $G update-index --add --cacheinfo "160000,$new,$3" || exit 1
    # --force: the image's own changes in the submodule (modes, build outputs of tracked
    # files) give way, as GSO cleans submodules before its checkout.
    if ! $G -c protocol.file.allow=always submodule update --init --recursive --force -- "$3" 2>&1; then
        echo "human: submodule $3: cannot check out $new (its objects must be in the image: a container has no network)"
        exit 1
    fi
    exit 0
    ;;
esac

COMMIT="$1"
PATCH="$2"
HERE="$(dirname "$0")"
SELF="$HERE/human_commit.sh"

if $G cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    SHA="$($G rev-parse "$COMMIT^{commit}")"
    echo "human: opt_commit $SHA is in the image: applying git diff harness-base^ $SHA"
    # The diff goes where the sandbox user may write (/opt/harness is root's).
    COMMIT_PATCH="$(mktemp "${TMPDIR:-/tmp}/harness-human.XXXXXX")" || exit 1
    $G diff --binary --no-color --no-ext-diff --no-textconv --end-of-options \
        harness-base^ "$SHA" >"$COMMIT_PATCH" || exit 1
    PATCH="$COMMIT_PATCH"
else
    if [ ! -s "$PATCH" ]; then
        echo "human: the image does not hold opt_commit $COMMIT, and the task gives no human.patch"
        echo "HARNESS_APPLY_FAILED"
        exit 1
    fi
    SHA=""
    echo "human: the image does not hold opt_commit $COMMIT: applying the task's human.patch (GSO's gt_diff)"
fi

changes() {
    $G diff --raw -z --no-abbrev --no-renames harness-base^ "$SHA" | xargs -0 -r -n 2 sh "$SELF" "$1"
}

if [ -n "$SHA" ]; then
    changes --gone || { echo "HARNESS_APPLY_FAILED"; exit 1; }
fi
if [ -s "$PATCH" ]; then
    sh "$HERE/apply_patch.sh" "$PATCH" || exit 1
else
    # The commit changes no file's content (only submodules, or nothing): nothing to apply.
    echo "HARNESS_APPLY_OK no file changes"
fi
[ -n "$SHA" ] || exit 0
changes --moved || { echo "HARNESS_APPLY_FAILED"; exit 1; }
echo "HARNESS_APPLY_OK opt_commit $SHA"
