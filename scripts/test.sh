#!/usr/bin/env bash
# Quick start, command 2: install (if needed) and run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL="${MUJOCO_GL:-egl}"
.venv/bin/ruff check robot_rl sim controllers tests benchmarks
exec .venv/bin/python -m pytest -q "$@"
