#!/bin/sh
# Issue 41 before/after: human's code in another tree on tasks/_real, 37adbf2's binary and this
# tree's, alternating task by task in one hour.
cd /work/main
export HARNESS_DISK_CHECK=off
for t in tasks/_real/*/; do
  t=${t%/}; n=$(basename $t)
  for which in old new; do
    if [ $which = old ]; then bin=/tmp/old37/target/release/harness; else bin=/work/main/target/release/harness; fi
    echo "=== $n $which $(date +%T)"
    HARNESS_BIN=$bin python3 scripts/validate_measurement.py --only human --human-trials 2 --human-tasks $t \
      --out /tmp/val/$which-$n.json 2>&1 | tail -4
  done
done
echo "=== end $(date +%T)"
