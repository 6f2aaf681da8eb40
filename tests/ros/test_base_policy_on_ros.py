"""A base policy runs through the ROS 2 path unchanged: the small VLA (trained here on sim demos) evaluated with
`robot-rl eval` on RosArmEnv against the sim hardware graph (camera topics, impedance controller, safety node),
with future-state-aware asynchronous execution at the robot's rate."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from robot_rl.policies.vla_model import VLAConfig
from robot_rl.vla.train import TrainBCConfig, train_bc
from tests.ros.conftest import wait_ready
from tests.ros.graph import ROOT, ros_env

pytestmark = pytest.mark.ros


@pytest.mark.timeout(400)
def test_small_vla_through_the_ros_arm_with_future_aware_execution(graph, domain: int, tmp_path) -> None:
    tiny = VLAConfig(image_size=32, channels=(8, 16, 32), width=32, depth=1, head_depth=1, heads=2, chunk_length=5,
                     flow_steps=2)
    train_bc(TrainBCConfig(datasets=("scripted:PickCube:2",), out=str(tmp_path / "vla"), demo_dir=str(tmp_path),
                           steps=10, batch_size=8, warmup_steps=2, eval_episodes=0, progress=False, model=tiny))
    graph.start("arm_hardware", "-p", "image_size:=32")
    graph.start("arm_controller")
    graph.start("arm_safety")
    wait_ready(graph, "arm_hardware", "arm_safety")
    kwargs = {"image_size": 32, "cameras": ["front", "wrist"], "object_state": False}
    out = subprocess.run([sys.executable, "-m", "robot_rl.cli", "eval", str(tmp_path / "vla"), "--tasks",
                          "robot_rl.envs.ros_env:robot_rl/RosArm-v0", "--env-kwargs", json.dumps(kwargs),
                          "--instruction", "pick up the red cube", "--episodes", "1", "--execution.mode", "future",
                          "--execution.lead-steps", "2"],
                         env=ros_env(domain), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout)["RosArm-v0"]
    assert result["episode_length"] == 100  # RosArmEnv's time limit: 5 s at 20 Hz
    assert result["executor/inferences"] >= 100 // 5 and result["executor/failures"] == 0, result
