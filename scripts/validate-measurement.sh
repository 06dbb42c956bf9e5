#!/usr/bin/env bash
# Validates measurement on this machine (A/A, known speedups, timer bias, stability).
# Needs Docker, python3, gcc (static libc) on the host. See scripts/validate_measurement.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/make-base-image.sh
cargo build --release --quiet
exec python3 scripts/validate_measurement.py "$@"
