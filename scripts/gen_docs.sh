#!/usr/bin/env bash
# Regenerates the docs site's generated pages: the configuration, CLI and ROS 2 parameter references (from the
# dataclasses and the commands' --help) and the benchmark pages (from benchmarks/results/*.json). The tests check
# that they are current.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m robot_rl.reference_docs
.venv/bin/python benchmarks/render.py
