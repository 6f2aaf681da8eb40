#!/usr/bin/env bash
# Quick start, command 1: install (if needed) and run the main job. Extra arguments go to `robot-rl train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ $# -eq 0 ]; then set -- pickcube; fi
exec .venv/bin/robot-rl train "$@"
