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
    from robot_rl.ros.link import RosLink
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


@pytest.mark.timeout(180)
def test_robot_env_reads_cameras_through_a_rig(graph, tmp_path) -> None:
    """``rig`` in the env config: frames come from robot_rl.cameras (here the hardware node's ROS image topic and
    an OpenCV video file on this PC), cropped/resized per camera, with the rig's skew and late-camera report."""
    from robot_rl.cameras import CameraConfig, RigConfig
    from robot_rl.envs.ros_env import RosArmEnv
    from tests.cameras.test_opencv import write_video

    video = write_video(tmp_path / "side.avi", frames=60, fps=30.0)
    graph.start("arm_hardware", "-p", "image_size:=32")
    graph.start("arm_controller")
    graph.start("arm_safety")
    wait_ready(graph, "arm_hardware", "arm_safety")
    rig = RigConfig(cameras=(
        CameraConfig(name="front", source="ros", topic="/camera/front/image_raw", resize=(24, 24), open_timeout=30.0),
        CameraConfig(name="side", source="opencv", device=str(video), loop=True, fps=30.0, resize=(16, 20))),
        max_skew=0.2, sync_timeout=0.2)
    env = RosArmEnv(rig=rig)
    assert env.observation_space["pixels"]["side"].shape == (16, 20, 3)
    try:
        obs, info = env.reset()
        for _ in range(10):
            obs, _, _, _, info = env.step(np.array([0.3, 0.0, 0.0, -1.0], np.float32))
            assert env.observation_space.contains(obs), {k: v.shape for k, v in obs["pixels"].items()}
        assert obs["pixels"]["front"].std() > 5 and obs["pixels"]["side"].std() > 5
        assert info["camera_skew"] <= 0.2 or info["late_cameras"], info
        assert np.isfinite(info["obs_skew"]) and info["obs_skew"] < 1.0, info
        stats, threads = env.rig.stats, [c._thread for c in env.rig.cameras.values()]
        assert stats.reads >= 11 and stats.max_skew_seen < 1.0, stats
    finally:
        env.close()
    assert env.rig is None and len(threads) == 2 and not any(t.is_alive() for t in threads)  # cameras stopped


@pytest.mark.timeout(120)
def test_dds_echo_answers_every_ping_with_its_stamp(graph) -> None:
    """The latency benchmark's DDS floor: the echo node answers each ping at once with the ping's own stamp."""
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import Header

    from robot_rl.ros.echo import PING, PONG
    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import from_stamp, pose_stamped

    graph.start("dds_echo")
    link = RosLink("echo_probe")
    try:
        link.subscribe("pong", Header, PONG, lambda m: from_stamp(m.stamp), stamped=False, depth=100, fast=True)
        ping = link.publisher("ping", PoseStamped, PING)
        deadline = time.monotonic() + 60.0
        while ping.get_subscription_count() == 0 or len(link.streams["pong"].items) == 0:
            assert time.monotonic() < deadline, "no answer from the echo node"
            ping.publish(pose_stamped(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), 1.0))  # until discovered
            time.sleep(0.1)
        stamps = [100.0 + k for k in range(20)]
        for t in stamps:
            ping.publish(pose_stamped(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), t))
            time.sleep(0.02)  # one at a time: the echo keeps only the newest waiting ping
        time.sleep(0.5)
        answered = {round(v, 6) for _, v in list(link.streams["pong"].items)}
    finally:
        link.close()
    assert all(round(t, 6) in answered for t in stamps), sorted(answered)
