#!/usr/bin/env bash
# Regenerates docs/reference/ros2-parameters.md from the node config dataclasses (tests/test_docs_generated.py
# checks it is current).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m robot_rl.utils.field_docs --ros-reference > docs/reference/ros2-parameters.md
