"""A robot's state from what its driver publishes: joint states read by name, and the URDF from
``/robot_description`` turned into kinematics (:class:`robot_rl.robots.kinematics.UrdfKinematics`).

Used by the robot env and the safety node with a robot profile; both read the same topics the same way.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from robot_rl.robots.kinematics import UrdfKinematics


class JointReader:
    """``sensor_msgs/JointState`` -> (positions, velocities) of ``names`` in that order, or None for a message
    that lacks one of them (a driver may publish several joint state messages, e.g. arm and gripper apart). The
    index is cached per name layout."""

    def __init__(self, names: tuple[str, ...] | list[str]) -> None:
        self.names = tuple(names)
        self._layout: tuple[str, ...] = ()
        self._order: list[int] | None = None

    def __call__(self, msg: Any) -> tuple[np.ndarray, np.ndarray] | None:
        layout = tuple(msg.name)
        if layout != self._layout:
            index = {n: i for i, n in enumerate(layout)}
            self._layout = layout
            self._order = [index[n] for n in self.names] if all(n in index for n in self.names) else None
        if self._order is None:
            return None
        pos = np.asarray(msg.position, np.float64)
        vel = np.asarray(msg.velocity, np.float64) if len(msg.velocity) == len(layout) else np.zeros(len(layout))
        return pos[self._order], vel[self._order]


class RobotDescription:
    """The URDF of ``topic`` (``std_msgs/String``, transient local, as robot_state_publisher latches it) on
    ``node``; :meth:`kinematics` waits for it and builds the kinematics of the profile's arm."""

    def __init__(self, node: Any, topic: str = "/robot_description",
                 on_urdf: Any = None) -> None:
        """``on_urdf(urdf)`` is called (on the executor's thread) with every description received."""
        # optional: ros2
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from std_msgs.msg import String

        self.topic, self.on_urdf = topic, on_urdf
        self.urdf: str | None = None
        self._got = threading.Event()
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._sub = node.create_subscription(String, topic, self._on_urdf, qos)

    def _on_urdf(self, msg: Any) -> None:
        self.urdf = msg.data
        self._got.set()
        if self.on_urdf is not None:
            self.on_urdf(msg.data)

    def wait(self, timeout: float) -> str:
        if not self._got.wait(timeout):
            raise TimeoutError(f"no URDF on {self.topic} within {timeout} s (is robot_state_publisher up?)")
        return self.urdf or ""

    def kinematics(self, joints: tuple[str, ...], base_frame: str, tool_frame: str,
                   timeout: float = 10.0) -> UrdfKinematics:
        return UrdfKinematics(self.wait(timeout), joints, base_frame, tool_frame)
