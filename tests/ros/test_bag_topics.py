"""Bags written with rosbags' own writer (no ROS 2 process): a topic that is not in the bag reads as no messages,
so a bag whose cameras were recorded compressed imports, and a bag without ``object_pose`` fails with the message
that names it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")


def write_bag(path: Path, steps: int = 4, object_pose: bool = True, camera: str = "") -> None:
    """A teleop bag as ``ros2 bag record`` would leave it: state topics, the target poses, success; ``camera``: one
    camera recorded compressed (``camera/<name>/image_raw/compressed``, JPEG)."""
    import cv2
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    t = ts.types
    Time, Header = t["builtin_interfaces/msg/Time"], t["std_msgs/msg/Header"]
    Point, Quat, Pose = t["geometry_msgs/msg/Point"], t["geometry_msgs/msg/Quaternion"], t["geometry_msgs/msg/Pose"]
    Vec, Twist = t["geometry_msgs/msg/Vector3"], t["geometry_msgs/msg/Twist"]

    def header(ns: int) -> object:
        return Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id="base")

    def pose(ns: int, x: float) -> object:
        return t["geometry_msgs/msg/PoseStamped"](header=header(ns), pose=Pose(
            position=Point(x=x, y=0.0, z=0.2), orientation=Quat(x=1.0, y=0.0, z=0.0, w=0.0)))

    topics = {"/policy/target_pose": "geometry_msgs/msg/PoseStamped", "/ee_pose": "geometry_msgs/msg/PoseStamped",
              "/ee_twist": "geometry_msgs/msg/TwistStamped", "/gripper/joint_states": "sensor_msgs/msg/JointState",
              "/success": "std_msgs/msg/Bool", "/policy/gripper": "std_msgs/msg/Float64"}
    if object_pose:
        topics["/object_pose"] = "geometry_msgs/msg/PoseStamped"
    if camera:
        topics[f"/camera/{camera}/image_raw/compressed"] = "sensor_msgs/msg/CompressedImage"
    with Writer(path, version=9) as writer:
        conns = {name: writer.add_connection(name, kind, typestore=ts) for name, kind in topics.items()}

        def put(topic: str, ns: int, msg: object) -> None:
            writer.write(conns[topic], ns, ts.serialize_cdr(msg, topics[topic]))
        for k in range(steps):
            ns = (k + 1) * 50_000_000
            put("/ee_pose", ns - 1000, pose(ns - 1000, 0.5 + 0.01 * k))
            put("/ee_twist", ns - 1000, t["geometry_msgs/msg/TwistStamped"](
                header=header(ns - 1000), twist=Twist(linear=Vec(x=0.0, y=0.0, z=0.0),
                                                      angular=Vec(x=0.0, y=0.0, z=0.0))))
            put("/gripper/joint_states", ns - 1000, t["sensor_msgs/msg/JointState"](
                header=header(ns - 1000), name=["finger_left", "finger_right"], position=np.array([0.02, 0.02]),
                velocity=np.zeros(0), effort=np.zeros(0)))
            if object_pose:
                put("/object_pose", ns - 1000, pose(ns - 1000, 0.6))
            if camera:
                frame = np.full((16, 16, 3), 40 * k, np.uint8)
                ok, jpeg = cv2.imencode(".jpg", frame)
                put(f"/camera/{camera}/image_raw/compressed", ns - 1000, t["sensor_msgs/msg/CompressedImage"](
                    header=header(ns - 1000), format="jpeg", data=np.frombuffer(jpeg.tobytes(), np.uint8)))
            put("/policy/target_pose", ns, pose(ns, 0.51 + 0.01 * k))
            put("/policy/gripper", ns, t["std_msgs/msg/Float64"](data=0.04))
            put("/success", ns + 1000, t["std_msgs/msg/Bool"](data=k == steps - 1))  # seen after the step


def test_a_bag_with_compressed_camera_frames_imports(tmp_path):
    from robot_rl.datasets.bag_demos import bag_episode

    write_bag(tmp_path / "bag", camera="front")
    episode = bag_episode(tmp_path / "bag", cameras=("front",))
    frames = episode.observations["pixels/front"]
    assert frames.shape == (5, 16, 16, 3)
    assert abs(int(frames[2].mean()) - 80) <= 3  # the JPEG of frame 2, decoded (the last observation repeats 3)
    assert episode.action.shape == (4, 4) and episode.reward[-1] == 1.0


def test_a_bag_without_object_pose_names_it(tmp_path):
    from robot_rl.datasets.bag_demos import bag_episode

    write_bag(tmp_path / "bag", object_pose=False)
    with pytest.raises(ValueError, match="no object_pose messages"):
        bag_episode(tmp_path / "bag", object_state=True)
    assert bag_episode(tmp_path / "bag", object_state=False).observations["state"].shape == (5, 11)
