"""The arm through the ROS 2 path: env -> safety node -> impedance controller node -> MuJoCo hardware node, each
in its own process over Fast DDS. The scripted expert's success rate must match pure sim within 10 points."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.envs.make import EnvConfig, make_env
from tests.ros.experts import run_episode

pytestmark = pytest.mark.ros

EPISODES = 10


@pytest.mark.timeout(240)
def test_pickcube_expert_through_ros_matches_pure_sim(arm_graph) -> None:
    from robot_rl_sim.arm_tasks import PickCubeEnv

    sim = PickCubeEnv()
    sim_rate = np.mean([run_episode(sim, seed)[0] for seed in range(EPISODES)])
    env = make_env(EnvConfig(id="robot_rl.envs.ros_env:robot_rl/RosArm-v0"))  # made by config, as the actor does
    try:
        results = [run_episode(env, seed) for seed in range(EPISODES)]
        base = env.unwrapped
        periods = np.diff(base.publish_times)
    finally:
        env.close()
    ros_rate = np.mean([ok for ok, _ in results])
    assert abs(ros_rate - sim_rate) <= 0.10, (ros_rate, sim_rate, results)
    assert ros_rate >= 0.8
    assert np.median(periods) == pytest.approx(0.05, abs=0.005)  # fixed 20 Hz command rate
    assert all(arm_graph.alive().values())


@pytest.mark.timeout(120)
def test_env_spaces_need_no_robot() -> None:
    """Building the env (as the learner does for its spaces) connects to nothing."""
    from robot_rl.envs.ros_env import RosArmEnv

    env = RosArmEnv(image_size=32, cameras=("front",))
    assert env.link is None
    assert env.observation_space["state"].shape == (14,)
    assert env.observation_space["pixels"]["front"].shape == (32, 32, 3)
    assert env.action_space.shape == (4,)
    env.close()
