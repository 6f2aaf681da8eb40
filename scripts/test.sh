#!/usr/bin/env bash
# Quick start, command 2: install (if needed) and run the test suite. Extra arguments go to pytest.
# The suite runs on ROBOT_RL_TEST_WORKERS pytest-xdist workers (default 2, the CI machine's cores; 1: one plain
# pytest run, e.g. for --pdb), each with one torch thread, since two workers with two threads each run slower than
# one. Then the tests marked serial (timing-sensitive: an arm's motion in real time, their own CPU hogs, a fixed
# wall-clock run) run alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL="${MUJOCO_GL:-egl}"
.venv/bin/ruff check robot_rl sim controllers tests benchmarks
workers="${ROBOT_RL_TEST_WORKERS:-2}"
if [ "$workers" -le 1 ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
status=0
ROBOT_RL_TEST_PHASE=parallel OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
  .venv/bin/python -m pytest -q -n "$workers" --dist worksteal "$@" || status=$?
echo "[test] the tests marked serial, alone"
serial=0
ROBOT_RL_TEST_PHASE=serial .venv/bin/python -m pytest -q "$@" || serial=$?
# 5: the arguments selected no test in that phase
if [ "$status" -eq 5 ]; then status=$serial; elif [ "$status" -eq 0 ] && [ "$serial" -ne 5 ]; then status=$serial; fi
exit "$status"
