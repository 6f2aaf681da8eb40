"""The car env's pose on the track map, from TF without ROS: the profile's track origin moves and turns the map."""

from __future__ import annotations

import math

import numpy as np

from robot_rl.envs.ros_car_env import RosCarEnv
from robot_rl.ros.tf_buffer import TfBuffer


def test_the_pose_is_read_on_the_track_laid_out_at_its_origin() -> None:
    env = RosCarEnv(profile="diff_drive", profile_overrides={"track": {"origin": [1.0, 2.0, math.pi / 2]}})
    env.tf = TfBuffer()
    yaw = math.pi / 2 + 0.3
    env.tf.set_transform("odom", "base_link", 5.0, (1.0, 0.0, 0.0), (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)))
    xy, heading = env.pose()
    np.testing.assert_allclose(xy, [-2.0, 0.0], atol=1e-9)  # 2 m behind the origin along its turned x axis
    assert abs(heading - 0.3) < 1e-9
    assert env.observation_space["state"].shape == (15,) and env.action_space.shape == (2,)


def test_a_static_frame_that_arrives_late_is_waited_for_and_a_missing_one_named() -> None:
    """The laser's static transform can reach a new subscription after its first scan: the car env waits for it (up
    to its connect timeout) instead of failing on the first lookup."""
    import threading

    import pytest

    from robot_rl.ros.tf_buffer import TfError

    tf = TfBuffer()
    tf.set_transform("odom", "base_link", 0.0, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
    late = threading.Timer(0.3, tf.set_transform, ("base_link", "laser", 0.0, (0.275, 0.0, 0.1), (1.0, 0.0, 0.0, 0.0)),
                           {"static": True})
    late.start()
    pos, _, _ = tf.wait_lookup("base_link", "laser", timeout=5.0)
    assert np.allclose(pos, [0.275, 0.0, 0.1])
    with pytest.raises(TfError, match="'lidar' is not in the TF tree"):
        tf.wait_lookup("base_link", "lidar", timeout=0.2)
