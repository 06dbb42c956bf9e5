#!/bin/sh
# A scripted stand-in agent for tests and demos: deterministic edits, no network, no model.
# It runs in a task container at /testbed as the sandbox user (see agents.toml), reads
# $HARNESS_TASK_FILE like a real agent would, and needs $ANTHROPIC_API_KEY set, as
# claude_code does (it only checks the key is there; it prints a line naming it, which the
# harness must redact from the saved log).
set -eu
: "${ANTHROPIC_API_KEY:?the stand-in agent needs ANTHROPIC_API_KEY, like claude_code}"
echo "stand-in agent on ${HARNESS_INSTANCE_ID:-?}: read $(wc -l < "$HARNESS_TASK_FILE") lines of task; key ${ANTHROPIC_API_KEY}"
cd /testbed
if [ -f dedupe.py ]; then
    # dedupe-list: membership in a set instead of a scan of the result.
    python3 - <<'PY'
src = open("dedupe.py").read()
src = src.replace("    result = []\n", "    result = []\n    seen = set()\n", 1)
src = src.replace("        if item not in result:\n", "        if item not in seen:\n            seen.add(item)\n", 1)
open("dedupe.py", "w").write(src)
PY
elif [ -f mod.py ]; then
    # The integration tests' task: the closed form of the sum of squares.
    printf 'def work(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n' > mod.py
else
    # Anything else: a comment at the end of the first Python file it may edit.
    for f in $(find . -name '*.py' -not -path './.git/*' | sort); do
        if [ -w "$f" ]; then
            printf '# touched by the stand-in agent\n' >> "$f"
            break
        fi
    done
fi
echo "stand-in agent: done"
