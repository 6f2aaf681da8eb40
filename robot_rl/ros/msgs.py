"""numpy <-> standard ROS 2 message conversions (geometry_msgs, sensor_msgs, builtin_interfaces).

Quaternions are (w, x, y, z) in numpy (MuJoCo's order) and (x, y, z, w) fields in the messages."""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Pose, PoseStamped
from sensor_msgs.msg import Image


def to_stamp(t: float) -> Time:
    """Seconds (float, e.g. ``time.time()``) -> ``builtin_interfaces/Time``."""
    sec = int(np.floor(t))
    return Time(sec=sec, nanosec=min(999_999_999, int(round((t - sec) * 1e9))))


def from_stamp(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def set_pose(pose: Pose, pos: np.ndarray, quat: np.ndarray) -> Pose:
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in pos)
    o = pose.orientation
    o.w, o.x, o.y, o.z = (float(v) for v in quat)
    return pose


def pose_stamped(pos: np.ndarray, quat: np.ndarray, t: float | Time, frame: str = "base_link") -> PoseStamped:
    msg = PoseStamped()
    msg.header.stamp = t if isinstance(t, Time) else to_stamp(t)
    msg.header.frame_id = frame
    set_pose(msg.pose, pos, quat)
    return msg


def pose_arrays(pose: Pose) -> tuple[np.ndarray, np.ndarray]:
    """(position [3], quaternion w-x-y-z [4]) of a Pose."""
    p, o = pose.position, pose.orientation
    return np.array([p.x, p.y, p.z]), np.array([o.w, o.x, o.y, o.z])


def image_msg(pixels: np.ndarray, t: float, frame: str) -> Image:
    """uint8 ``[H, W, 3]`` -> ``sensor_msgs/Image`` (rgb8)."""
    msg = Image()
    msg.header.stamp = to_stamp(t)
    msg.header.frame_id = frame
    msg.height, msg.width = int(pixels.shape[0]), int(pixels.shape[1])
    msg.encoding = "rgb8"
    msg.step = msg.width * 3
    msg.data = np.ascontiguousarray(pixels, dtype=np.uint8).tobytes()
    return msg


def image_array(msg: Image) -> np.ndarray:
    """``sensor_msgs/Image`` (rgb8 / bgr8) -> uint8 ``[H, W, 3]`` RGB."""
    if msg.encoding not in ("rgb8", "bgr8"):
        raise ValueError(f"unsupported image encoding {msg.encoding!r} (rgb8 or bgr8)")
    rows = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)
    img = rows[:, : msg.width * 3].reshape(msg.height, msg.width, 3)
    return img[..., ::-1].copy() if msg.encoding == "bgr8" else img.copy()


def diagnostics_by_node(msg: DiagnosticArray) -> dict[str, dict[str, str]]:
    """A DiagnosticArray as ``{node name: {key: value}}`` (status names are ``/<ns>/<node>: <what>``)."""
    return {s.name.split(":")[0].split("/")[-1]: {kv.key: kv.value for kv in s.values} for s in msg.status}
