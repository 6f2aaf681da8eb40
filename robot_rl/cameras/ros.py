"""ROS 2 cameras: a ``sensor_msgs/Image`` or ``sensor_msgs/CompressedImage`` subscription.

The subscription lives on its own rclpy node and executor thread (``RosLink``); its callback only hands the
newest message to the camera's capture thread, which decodes, crops and resizes (a slow decode never stalls
the executor). A topic whose publisher stops counts as disconnected after ``frame_timeout``; reopening checks
that a publisher exists again, and frames resume on the same subscription.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import numpy as np

from robot_rl.cameras.base import Camera, CameraError, FrameRejected, Grab, wall_to_monotonic
from robot_rl.robots.camera import CameraConfig

_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1}
_names = itertools.count()


def image_to_array(msg: Any) -> tuple[np.ndarray, bool]:
    """``sensor_msgs/Image`` -> (uint8 array ``[H, W, C]`` or ``[H, W]``, channels are BGR)."""
    channels = _CHANNELS.get(msg.encoding)
    if channels is None:
        raise FrameRejected(f"unsupported image encoding {msg.encoding!r} (supported: {', '.join(_CHANNELS)})")
    rows = np.frombuffer(msg.data, np.uint8).reshape(msg.height, msg.step)
    img = rows[:, : msg.width * channels].reshape(msg.height, msg.width, channels)
    return (img[..., 0] if channels == 1 else img), msg.encoding.startswith("bgr")


def compressed_to_array(msg: Any) -> np.ndarray:
    """``sensor_msgs/CompressedImage`` (JPEG/PNG) -> uint8 BGR ``[H, W, 3]``."""
    import cv2  # optional: cameras

    img = cv2.imdecode(np.frombuffer(msg.data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise FrameRejected(f"could not decode a {msg.format!r} CompressedImage ({len(msg.data)} bytes)")
    return img


class RosCamera(Camera):
    """Frames of ``cfg.topic``; timestamps from ``header.stamp`` (wall clock, converted to monotonic) unless
    ``use_header_stamp`` is off or the stamp is unset."""

    def __init__(self, cfg: CameraConfig) -> None:
        super().__init__(cfg)
        self._link: Any = None
        self._pending: Any = None
        self._arrived = 0.0
        self._msg_cond = threading.Condition()

    def _on_msg(self, msg: Any) -> None:  # executor thread: hand over, nothing else
        with self._msg_cond:
            if self._pending is not None:
                self._count_skipped(1)
            self._pending, self._arrived = msg, time.monotonic()
            self._msg_cond.notify()

    def _open(self) -> None:
        if self._link is None:
            # optional: ros2
            from rclpy.qos import qos_profile_sensor_data
            from sensor_msgs.msg import CompressedImage, Image

            from robot_rl.ros.link import RosLink  # optional: ros2 (robot_rl.ros.link imports rclpy)

            link = RosLink(f"robot_rl_camera_{self.cfg.name}_{next(_names)}")
            # Best effort, shallow queue: matches reliable and best-effort publishers, never queues old frames.
            link.node.create_subscription(CompressedImage if self.cfg.compressed else Image, self.cfg.topic,
                                          self._on_msg, qos_profile_sensor_data)
            self._link = link
        if self._link.node.count_publishers(self.cfg.topic) == 0:
            raise CameraError(f"no publisher on {self.cfg.topic}")

    def _grab(self, timeout: float) -> Grab | None:
        with self._msg_cond:
            if self._pending is None:
                self._msg_cond.wait(timeout)
            msg, arrived, self._pending = self._pending, self._arrived, None
        if msg is None:
            return None
        if self.cfg.compressed:
            image, bgr = compressed_to_array(msg), True
        else:
            image, bgr = image_to_array(msg)
        stamp = arrived
        if self.cfg.use_header_stamp and (msg.header.stamp.sec or msg.header.stamp.nanosec):
            stamp = wall_to_monotonic(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
        return Grab(image, stamp=stamp, bgr=bgr)

    def _close(self) -> None:
        pass  # the subscription outlives disconnects: a restarted publisher is picked up again

    def stop(self) -> None:
        super().stop()
        link, self._link = self._link, None
        if link is not None:
            link.close()
