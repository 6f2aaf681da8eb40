"""A robot graph that stalls while a person records classifier frames (a loaded robot PC, a driver busy for
seconds): the recording waits for the robot, starts the episode again and goes on. The bare driver's state streams
really pause (longer than the env's observation timeout); every node runs in its own process."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.rewards.helpers import ScriptedKeys
from tests.ros.bare import start_bare_driver
from tests.ros.test_profiles import wait_kinematics

pytestmark = pytest.mark.ros

STALL_S = 5.0
"""Longer than the env's obs_timeout (3 s): the step that waits for a fresh pose gives up."""


@pytest.mark.timeout(180)
def test_a_stalled_robot_graph_does_not_end_a_frame_recording(graph, tmp_path, caplog) -> None:
    import yaml

    from robot_rl.config import to_dict
    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl.rewards.frames import load_frames, record_key_frames
    from robot_rl.robots.profile import load_profile, with_overrides
    from robot_rl_sim.scene_channel import ScenePerson

    caplog.set_level(logging.INFO)
    camera = {"name": "wrist", "source": "ros", "topic": "/wrist_camera/color/image_raw", "resize": [24, 24]}
    profile = with_overrides(load_profile("ros2_control_joint_position"),
                             {"cameras": [camera], "success": {"source": "none"}})
    path = tmp_path / "ros2_control_joint_position.yaml"
    path.write_text(yaml.safe_dump(to_dict(profile)))
    scene = tmp_path / "scene"
    start_bare_driver(graph, str(path), scene, "-p", "image_size:=32")
    graph.start("arm_safety", "-p", f"profile:={path}")
    wait_kinematics(graph)
    person = ScenePerson(scene)
    env = RosArmEnv(profile=str(path), connect_timeout=60.0)
    stalled = []

    def stall_once(frames: int, label: bool) -> None:
        if frames == 10 and not stalled:
            person.ask("pause_state", seconds=STALL_S)
            stalled.append(frames)
    device = ScriptedKeys([(False, ("success",))] + [(False, ())] * 100)
    try:
        stats = record_key_frames(env, device, tmp_path / "frames.zarr", max_frames=25, progress=False,
                                  on_step=stall_once)
    finally:
        env.close()
    data = load_frames(tmp_path / "frames.zarr")
    assert stats.frames == 25 and "robot_lost" not in data.meta
    assert set(np.unique(data.episodes).tolist()) == {0, 1}  # the stalled episode ended, a new one began
    assert data.labels[data.episodes == 0].all() and not data.labels[data.episodes == 1].any()
    assert "the robot stopped answering" in caplog.text and "answers again" in caplog.text
