#!/usr/bin/env bash
# Regenerates the docs site's generated pages: the configuration, CLI and ROS 2 parameter references (from the
# dataclasses and the commands' --help), the benchmark pages (from benchmarks/results/*.json) and the pictures
# (scripts/doc_pictures.py: task frames, expert GIFs, the ROS 2 graphs, the operator view, the learning curves from
# the result files; re-rendered only when their inputs changed, `--force` to redo them). The tests check that they
# are current.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m robot_rl.reference_docs
.venv/bin/python benchmarks/render.py
.venv/bin/python scripts/doc_pictures.py
