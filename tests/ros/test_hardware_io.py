"""The MuJoCo hardware node's camera frames reach the robot env synchronised with the state, and its injected
command latency shows up in the command -> state round trip."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.ros.conftest import wait_ready

pytestmark = pytest.mark.ros


@pytest.mark.timeout(180)
def test_camera_frames_and_injected_latency(graph) -> None:
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import Header

    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl.envs.ros_io import RosLink
    from robot_rl.ros.msgs import from_stamp, pose_stamped

    graph.start("arm_hardware", "-p", "image_size:=32", "-p", "command_latency:=0.03")
    graph.start("arm_controller")
    graph.start("arm_safety")
    wait_ready(graph, "arm_hardware", "arm_safety")
    env = RosArmEnv(image_size=32, cameras=("front", "wrist"))
    try:
        obs, _ = env.reset()
        skews = []
        for _ in range(10):
            obs, _, _, _, info = env.step(np.array([0.3, 0.0, -0.3, -1.0], np.float32))
            skews.append(info["obs_skew"])
        assert set(obs["pixels"]) == {"front", "wrist"}
        for img in obs["pixels"].values():
            assert img.shape == (32, 32, 3) and img.dtype == np.uint8 and img.std() > 5
        assert obs["state"].shape == env.observation_space["state"].shape
        assert max(skews) < 0.011, skews  # state and frames from the same physics step (within one 100 Hz period)
    finally:
        env.close()
    link = RosLink("latency_probe")
    try:
        link.subscribe("applied", Header, "applied_command", lambda m: (from_stamp(m.stamp), time.time()),
                       stamped=False, depth=10000)
        pub = link.publisher("target", PoseStamped, "controller/target_pose")  # straight to the controller
        assert not link.wait_matched(["applied"], 30.0), "never discovered the hardware's applied_command"
        while pub.get_subscription_count() == 0:
            time.sleep(0.05)
        sent = []
        for k in range(20):
            t0 = time.time()
            pub.publish(pose_stamped(np.array([0.53, 0.002 * (k % 2), 0.28]), np.array([0.0, 1.0, 0.0, 0.0]), t0))
            sent.append(t0)
            time.sleep(0.05)
        time.sleep(0.2)
        first: dict[float, float] = {}
        for _, (stamp, arrival) in list(link.streams["applied"].items):
            first.setdefault(round(stamp, 6), arrival)
        rtt = np.array([first[round(t, 6)] - t for t in sent if round(t, 6) in first])
    finally:
        link.close()
    assert rtt.size >= 15, rtt
    assert np.median(rtt) >= 0.03 and np.median(rtt) < 0.06, rtt  # the injected 30 ms plus transport
