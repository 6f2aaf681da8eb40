#!/usr/bin/env bash
# The runtime tests N times in a row (default 5) with two CPU-hog processes spinning beside them; stops at the first
# failing round and names the log with the failure's details. Usage: bash scripts/stress_runtime.sh [ROUNDS]
# [extra pytest arguments]. Logs: $STRESS_LOG_DIR (default /tmp/robot_rl_stress), one file per round.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
shift || true
export MUJOCO_GL="${MUJOCO_GL:-egl}"
logs="${STRESS_LOG_DIR:-/tmp/robot_rl_stress}"
mkdir -p "$logs"
for i in $(seq 1 "$rounds"); do
  start=$(date +%s)
  log="$logs/round_$i.log"
  if ! .venv/bin/python -m pytest -q -rfE tests/runtime --cpu-hogs 2 -p no:randomly "$@" > "$log" 2>&1; then
    grep -E "^(FAILED|ERROR) |passed|failed" "$log" || true
    echo "round $i/$rounds FAILED after $(( $(date +%s) - start )) s; details: $log"
    exit 1
  fi
  grep -E "passed|failed" "$log" | tail -1
  echo "round $i/$rounds passed in $(( $(date +%s) - start )) s"
done
