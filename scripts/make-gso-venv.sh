#!/usr/bin/env bash
# target/gso-venv: GSO's own package (gsobench on PyPI) and what its grading, merging,
# plotting-reader and hack-detector modules and run_evaluation's process pool import,
# nothing else (gsobench's full list pulls in skypilot, GitHub clients...).
# tests/gso_judge.py, scripts/gso_images.py and scripts/gso_side_by_side.py run in it.
# gsobench needs Python >= 3.12: the first of python3.13, python3.12 or pyenv's 3.12/3.13
# is used; with none, python3 and --ignore-requires-python (said when it happens).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="target/gso-venv"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import gso.harness.opt_at_k, pebble' 2>/dev/null; then
  exit 0
fi
py=""
for c in python3.13 python3.12 "$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    py="$c"; break
  fi
done
ignore=""
if [ -z "$py" ]; then
  py="python3"; ignore="--ignore-requires-python"
  echo "no Python >= 3.12 here: gsobench goes into $($py --version) with --ignore-requires-python"
  echo "(its grading and reading modules work there; run_evaluation.py, which scripts/gso_side_by_side.py runs, needs 3.12)"
fi
echo "making $venv with gsobench 0.1.9 ($($py --version)), one time, about a minute..."
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install -q $ignore --no-deps gsobench==0.1.9
"$venv/bin/pip" install -q numpy==2.5.5 PyYAML==6.0.4 pydantic==2.14.4 docker==7.2.0 \
  datasets==5.2.0 matplotlib==3.11.2 seaborn==0.13.2 pandas==3.1.1 tqdm==4.70.1 openai==3.57.0 \
  attrs==26.1.0 pebble==5.2.3
"$venv/bin/python" -c 'import gso.harness.opt_at_k, gso.harness.grading.report, gso.analysis.qualitative.run_detector'
echo "$venv ready"
