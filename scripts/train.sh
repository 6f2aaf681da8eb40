#!/usr/bin/env bash
# Quick start, command 1: install (if needed) and run the main job. Extra arguments go to `robot-rl train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh main   # the sim training run's dependencies only; scripts/test.sh installs the rest
if [ $# -eq 0 ]; then set -- pickcube; fi
exec .venv/bin/robot-rl train "$@"
