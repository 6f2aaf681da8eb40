#!/usr/bin/env bash
# The runtime tests N times in a row (default 5) with two CPU-hog processes spinning beside them; stops at the first
# failing round. Usage: bash scripts/stress_runtime.sh [ROUNDS] [extra pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
shift || true
export MUJOCO_GL="${MUJOCO_GL:-egl}"
for i in $(seq 1 "$rounds"); do
  start=$(date +%s)
  # the failing tests' names and the summary line
  .venv/bin/python -m pytest -q -rfE tests/runtime --cpu-hogs 2 -p no:randomly "$@" | grep -E "^(FAILED|ERROR) |passed|failed"
  echo "round $i/$rounds passed in $(( $(date +%s) - start )) s"
done
