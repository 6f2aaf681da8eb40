"""The guide "Bring your own environment" (docs/guides/bring-your-own-env.md) runs as written: its env module and
YAML are taken from the page, `robot-rl train` runs them with actor and learner processes from a folder that is
neither the config's nor the repo's, and `robot-rl eval` evaluates the run with a video from a third folder."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robot_rl.replay.store import load_buffer
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.utils.video import read_video

GUIDE = Path(__file__).parents[2] / "docs" / "guides" / "bring-your-own-env.md"
CLI = [sys.executable, "-m", "robot_rl.cli"]


def guide_files(folder: Path) -> Path:
    """Writes the guide's python and yaml blocks as point_reach.py / point_reach.yaml; returns the yaml."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), re.S)
    (python,) = [b for lang, b in blocks if lang == "python"]
    (yaml,) = [b for lang, b in blocks if lang == "yaml"]
    folder.mkdir(parents=True)
    (folder / "point_reach.py").write_text(python)
    (folder / "point_reach.yaml").write_text(yaml)
    return folder / "point_reach.yaml"


@pytest.mark.timeout(400)
def test_guide_example_trains_and_evaluates_by_config_alone_from_another_folder(tmp_path) -> None:
    config = guide_files(tmp_path / "my_project" / "configs")
    elsewhere, third = tmp_path / "elsewhere", tmp_path / "third"
    elsewhere.mkdir()
    third.mkdir()
    runs = tmp_path / "runs"
    train = subprocess.run([*CLI, "train", str(config), "--name", "pr", "--runs-dir", str(runs), "--no-progress",
                            "--total-env-steps", "700", "--random-steps", "300", "--learning-starts", "300",
                            "--eval-every", "0", "--eval-episodes", "3", "--checkpoint-every", "0",
                            "--runtime.max-update-lag", "50"],
                           cwd=elsewhere, capture_output=True, text=True, timeout=360)
    assert train.returncode == 0, train.stderr[-3000:]
    run = runs / "pr"
    final = json.loads((run / "final_eval.json").read_text())
    assert 0.0 <= final["success_rate"] <= 1.0  # success read from info["reached"]: not NaN
    replay = load_buffer(latest_checkpoint(run) / "replay.zarr")
    assert replay.spec.state_dim == 6 and not replay.spec.cameras  # robot.pos, robot.vel, target; no camera
    online = replay.partitions["online"]
    assert online.num_transitions >= 700
    versions = online.arrays["policy_version"][: online.size][online.arrays["valid"][: online.size]]
    assert versions.max() > 1, "the actor never acted with a policy the learner published"

    video = third / "pr.gif"
    evaluation = subprocess.run([*CLI, "eval", str(run), "--episodes", "2", "--video", str(video)], cwd=third,
                                capture_output=True, text=True, timeout=120)
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    assert np.isfinite(json.loads(evaluation.stdout)["return_mean"])
    frames = read_video(video)
    assert frames.shape[1:] == (32, 64, 3), frames.shape  # the two 32x32 cameras render() returns, side by side
