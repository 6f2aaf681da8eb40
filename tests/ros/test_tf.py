"""TF and the robot description of the sim hardware, as RViz would use them, from real node processes: the URDF on
``robot_description`` parses and its links are exactly the frames on /tf + /tf_static (plus the task object); every
frame is reachable from the root; composing the transforms gives the pose ``ee_pose`` reports for the same physics
step; the images name their optical frame. The car: odom -> base_link equals the odometry message."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytestmark = pytest.mark.ros


def _rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    w, xyz = q[0], q[1:]
    return v + 2.0 * np.cross(xyz, np.cross(xyz, v) + w * v)


def _quat_from_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF rpy (fixed axes: R = Rz(yaw) Ry(pitch) Rx(roll)) -> (w, x, y, z)."""
    def axis(angle: float, i: int) -> np.ndarray:
        q = np.zeros(4)
        q[0], q[1 + i] = np.cos(angle / 2), np.sin(angle / 2)
        return q

    return _compose((np.zeros(3), _compose((np.zeros(3), axis(yaw, 2)), (np.zeros(3), axis(pitch, 1)))[1]),
                    (np.zeros(3), axis(roll, 0)))[1]


def _compose(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    (pa, qa), (pb, qb) = a, b
    w1, x1, y1, z1 = qa
    w2, x2, y2, z2 = qb
    q = np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                  w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])
    return pa + _rotate(qa, pb), q


def _listen(extra: dict[str, tuple[type, str]], enough_tf: int) -> dict[str, list]:
    """Messages of /tf, /tf_static, /robot_description (latched) and the ``extra`` topics (key -> (type, topic)),
    until each has one and /tf ``enough_tf`` (90 s at most)."""
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String
    from tf2_msgs.msg import TFMessage

    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    topics = {"tf": (TFMessage, "/tf", 200), "static": (TFMessage, "/tf_static", latched),
              "urdf": (String, "/robot_description", latched), **{k: (*v, 200) for k, v in extra.items()}}
    rclpy.init()
    node = Node("tf_probe")
    got: dict[str, list] = {k: [] for k in topics}
    for key, (kind, topic, qos) in topics.items():
        node.create_subscription(kind, topic, got[key].append, qos)
    try:
        deadline = time.monotonic() + 90.0
        while not (all(got.values()) and len(got["tf"]) >= enough_tf) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
    finally:
        node.destroy_node()
        rclpy.shutdown()
    return got


def _edges(msgs) -> dict[str, tuple[str, float, np.ndarray, np.ndarray]]:  # noqa: ANN001
    """child -> (parent, stamp, translation, rotation) of TFMessages."""
    out = {}
    for msg in msgs:
        for t in msg.transforms:
            v, r = t.transform.translation, t.transform.rotation
            stamp = t.header.stamp.sec + 1e-9 * t.header.stamp.nanosec
            out[t.child_frame_id] = (t.header.frame_id, stamp, np.array([v.x, v.y, v.z]),
                                     np.array([r.w, r.x, r.y, r.z]))
    return out


@pytest.mark.timeout(180)
def test_the_arm_publishes_a_complete_tf_tree_and_a_matching_urdf(graph):
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import Image

    graph.start("arm_hardware", "-p", "image_size:=16", "-p", "tf_rate_hz:=100.0")
    got = _listen({"pose": (PoseStamped, "/ee_pose"), "image": (Image, "/camera/wrist/image_raw")}, 20)
    assert all(got.values()), ({k: len(v) for k, v in got.items()}, graph.log("arm_hardware")[-2000:])

    urdf = ET.fromstring(got["urdf"][0].data)
    links = {link.get("name") for link in urdf.iter("link")}
    joints = {j.find("child").get("link"): j.find("parent").get("link") for j in urdf.iter("joint")}
    static, moving = _edges(got["static"]), _edges(got["tf"])
    frames = {**static, **moving}
    objects = {"cube"}  # the task object: a TF frame, not a link of the robot
    assert links == (set(frames) - objects) | {"base_link"}, (links, set(frames))
    for child, (parent, *_) in frames.items():
        assert child in objects or joints[child] == parent, (child, parent)  # the same tree in TF and the URDF
    for link in links - {"base_link"}:  # reachable from the root
        seen, frame = set(), link
        while frame != "base_link":
            assert frame not in seen, f"cycle at {frame}"
            seen.add(frame)
            frame = frames[frame][0]
    assert {"ee", "ft", "front_camera_optical", "wrist_camera_optical", "link7", "finger_left"} <= links
    # the URDF's fixed joints carry the same transforms as /tf_static (its rpy convention included) ...
    for joint in urdf.iter("joint"):
        child = joint.find("child").get("link")
        if joint.get("type") == "fixed":
            origin = joint.find("origin")
            xyz = np.array([float(v) for v in origin.get("xyz").split()])
            quat = _quat_from_rpy(*(float(v) for v in origin.get("rpy").split()))
            _, _, p, q = static[child]
            assert np.allclose(xyz, p, atol=1e-8) and abs(abs(float(quat @ q)) - 1.0) < 1e-9, child
    # ... and the front camera's optical z axis (REP-103: forward) looks at the workspace in front of the arm
    _, _, cam_pos, cam_quat = static["front_camera_optical"]
    forward = _rotate(cam_quat, np.array([0.0, 0.0, 1.0]))
    to_table = np.array([0.5, 0.0, 0.05]) - cam_pos
    assert forward @ to_table / np.linalg.norm(to_table) > 0.8, (forward, to_table)
    assert got["image"][0].header.frame_id == "wrist_camera_optical"

    # base -> ... -> ee from TF at one /tf stamp equals ee_pose of the same physics step
    poses = {p.header.stamp.sec + 1e-9 * p.header.stamp.nanosec: p for p in got["pose"]}
    matched = 0
    for msg in got["tf"]:
        tree = {**static, **_edges([msg])}
        stamp = next(iter(_edges([msg]).values()))[1]
        pose = poses.get(stamp)
        if pose is None:
            continue
        chain, frame = [], "ee"
        while frame != "base_link":
            parent, _, p, q = tree[frame]
            chain.append((p, q))
            frame = parent
        total = (np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
        for edge in reversed(chain):
            total = _compose(total, edge)
        o = pose.pose.orientation
        want_p = np.array([pose.pose.position.x, pose.pose.position.y, pose.pose.position.z])
        want_q = np.array([o.w, o.x, o.y, o.z])
        assert np.allclose(total[0], want_p, atol=1e-6), (total[0], want_p)
        assert abs(abs(float(total[1] @ want_q)) - 1.0) < 1e-6, (total[1], want_q)
        matched += 1
    assert matched >= 3, f"no /tf message shared a stamp with ee_pose ({len(got['tf'])} tf, {len(poses)} poses)"


@pytest.mark.timeout(180)
def test_the_car_publishes_odom_to_base_link_matching_its_odometry(graph):
    from nav_msgs.msg import Odometry

    graph.start("car_hardware", "-p", "image_size:=16")
    got = _listen({"odom": (Odometry, "/odom")}, 10)
    assert all(got.values()), ({k: len(v) for k, v in got.items()}, graph.log("car_hardware")[-2000:])
    links = {link.get("name") for link in ET.fromstring(got["urdf"][0].data).iter("link")}
    frames = {**_edges(got["static"]), **_edges(got["tf"])}
    assert links == set(frames) and frames["base_link"][0] == "odom"  # odom: the frame the robot moves in
    assert frames["front_camera_optical"][0] == "base_link"
    odom = {m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec: m for m in got["odom"]}
    matched = 0
    for msg in got["tf"]:
        parent, stamp, p, q = _edges([msg])["base_link"]
        if stamp in odom:
            pose = odom[stamp].pose.pose
            assert np.allclose(p, [pose.position.x, pose.position.y, pose.position.z], atol=1e-9)
            assert np.allclose(q, [pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z])
            matched += 1
    assert matched >= 3
