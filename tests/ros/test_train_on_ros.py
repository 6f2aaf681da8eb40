"""`robot-rl train` runs on the ROS 2 robot env by config alone: the actor process steps RosArmEnv against the
sim hardware graph, the learner updates (and never evaluates on the robot: only the actor drives it), the run
finishes cleanly, and `robot-rl eval RUN_DIR` then evaluates the policy through the ROS 2 path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.ros.graph import ROOT, ros_env

pytestmark = pytest.mark.ros


@pytest.mark.timeout(300)
def test_robot_rl_train_on_the_ros_env(arm_graph, domain: int, tmp_path) -> None:
    cmd = [sys.executable, "-m", "robot_rl.cli", "train", "pickcube_ros",
           "--env.kwargs", '{"namespace": ""}', "--env.max-episode-steps", "40", "--total-env-steps", "120",
           "--random-steps", "120", "--learning-starts", "80", "--eval-episodes", "1", "--checkpoint-every", "0",
           "--agent.hidden-dims", "64", "64", "--name", "ros", "--runs-dir", str(tmp_path), "--no-progress"]
    out = subprocess.run(cmd, env=ros_env(domain), cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    status = json.loads((tmp_path / "ros" / "status.json").read_text())
    assert status["env_steps"] >= 120 and status["updates"] > 0, status
    final_path = tmp_path / "ros" / "final_eval.json"
    assert not final_path.exists() or json.loads(final_path.read_text()) == {}  # the learner left the robot alone
    out = subprocess.run([sys.executable, "-m", "robot_rl.cli", "eval", str(tmp_path / "ros"), "--episodes", "1"],
                         env=ros_env(domain), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert json.loads(out.stdout)["episode_length"] == 40  # one evaluation episode through the ROS 2 path
