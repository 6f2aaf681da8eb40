#!/usr/bin/env bash
# CI leg 2 (.ci/run calls it after scripts/test.sh): robot_rl with the lowest torch it declares, installed beside
# LeRobot (the newest release that installs on this Python), in .venv-lowest/ (git-ignored). Runs the LeRobot
# interop tests (LeRobot's own dataset reader and writer) and the agent and learner tests. Extra arguments go to
# pytest. The same leg on Python 3.12 with LeRobot 0.6 (not on CI machines, which have Python 3.11 only):
#   PYTHON=python3.12 TORCH_LOWEST= TORCHCODEC= LEROBOT="lerobot[dataset,diffusion]==0.6.1" VENV=.venv-py312 \
#   bash scripts/test_lowest.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_LOWEST="${TORCH_LOWEST-2.7.1}"     # pyproject.toml: torch>=2.7 (empty: the torch lerobot resolves)
LEROBOT="${LEROBOT:-lerobot==0.4.4}"     # the newest lerobot for Python 3.11 (0.5+ needs Python >= 3.12)
# LeRobot's default video decoder: a torchcodec built for this torch (its table: 0.3-0.5 for torch 2.7; LeRobot's
# range would let pip take 0.10, built for torch 2.10, which fails to load) and FFmpeg's shared libraries
TORCHCODEC="${TORCHCODEC-torchcodec>=0.3,<0.6}"
FFMPEG_LIBS=(libavutil57 libavcodec59 libavformat59 libavdevice59 libavfilter8 libswscale6 libswresample4)
VENV="${VENV:-.venv-lowest}"
PYTHON="${PYTHON:-python3}"
APT_EXTRA="${FFMPEG_LIBS[*]}" bash scripts/setup.sh >/dev/null  # the apt packages (EGL, FFmpeg, ...) the tests need
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
stamp="$VENV/.robot_rl-installed"
want="$(cat pyproject.toml scripts/test_lowest.sh | sha256sum | cut -d' ' -f1) $TORCH_LOWEST $LEROBOT $TORCHCODEC"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[test_lowest] installing torch ${TORCH_LOWEST:-as lerobot resolves}, $LEROBOT and robot_rl into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # one pip call, so the resolver has to find one environment for all of them (stable-baselines3, a dev extra
  # for benchmarks, needs torch >= 2.8: not installed here)
  "$VENV/bin/python" -m pip install -q ${TORCH_LOWEST:+"torch==$TORCH_LOWEST"} ${TORCHCODEC:+"$TORCHCODEC"} "$LEROBOT" \
    -e ".[data,export,robots,cameras,view]" "pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.5" "hypothesis>=6" "pandas>=2"
  echo "$want" > "$stamp"
fi
"$VENV/bin/python" -c 'import torch, lerobot; print("[test_lowest] torch", torch.__version__, "lerobot", lerobot.__version__)'
export MUJOCO_GL="${MUJOCO_GL:-egl}"
# the SAC/RLPD agent (its fast path's private-op probes included), the agent contract, training runs as processes,
# every dataset test (LeRobot's reader and writer among them), LeRobot's ACT and Diffusion classes as base policies,
# the operator view on the rerun-sdk LeRobot installs (0.24 to 0.26: recordings read back through rerun.dataframe)
# on pytest-xdist workers, one torch thread each, as scripts/test.sh runs the suite (none of these is marked serial)
workers="${ROBOT_RL_TEST_WORKERS:-2}"
xdist=()
[ "$workers" -le 1 ] || { xdist=(-n "$workers" --dist worksteal); export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1; }
exec "$VENV/bin/python" -m pytest -q "${xdist[@]}" tests/agents/test_sac_agent.py tests/agents/test_torch_compat.py \
  tests/agents/test_contract.py tests/runtime/test_train.py tests/datasets tests/policies/test_lerobot.py \
  tests/policies/test_lerobot_classes.py tests/view "$@"
