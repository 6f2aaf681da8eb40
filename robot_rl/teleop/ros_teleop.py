"""ROS 2 teleop input: ``sensor_msgs/Joy`` (e.g. joy_node) or ``geometry_msgs/Twist`` (any Twist teleop node).

The subscription runs on its own rclpy context and executor thread (:class:`robot_rl.ros.link.RosLink`);
each message updates the input map in the callback, so button presses are seen even between control periods.
Joy: axes ``a0``.. and buttons ``b0``.. as published (joy_node makes stick left/up positive). Twist: axes
``linear.x`` .. ``angular.z`` in m/s and rad/s (``teleop.scale`` converts them to action units), no buttons.

The input counts as connected while messages keep coming: silent for ``disconnect_timeout_s`` (or never heard)
reads as disconnected, so the teleop node must publish continuously (joy_node does at its ``autorepeat_rate``;
most Twist teleop nodes have a repeat rate parameter).
"""

from __future__ import annotations

import time
from typing import Any

from robot_rl.teleop.base import TeleopReading
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.gamepad import DEFAULT_BUTTONS as GAMEPAD_BUTTONS
from robot_rl.teleop.mapping import InputMap, TeleopDeviceError, ThreadedDevice, default_axes

JOY_SIX_DOF = ("a1", "a0", "a4", "a6", "a7", "a3")  # left stick x/y, right stick z and yaw, d-pad roll/pitch
JOY_CAR = ("a1", "a3")
TWIST_AXES = ("linear.x", "linear.y", "linear.z", "angular.x", "angular.y", "angular.z")
TWIST_CAR = ("linear.x", "angular.z")


def twist_axes(msg: Any) -> dict[str, float]:
    return {f"{part}.{c}": float(getattr(getattr(msg, part), c)) for part in ("linear", "angular") for c in "xyz"}


class RosTeleop(ThreadedDevice):
    """Teleop input from a ROS 2 topic (``cfg.ros_topic`` of type ``cfg.ros_msg``)."""

    name = "ros"

    def __init__(self, cfg: TeleopConfig, action_dim: int, node_name: str = "robot_rl_teleop") -> None:
        if cfg.ros_msg == "twist":
            input_map = InputMap(cfg, action_dim, default_axes(action_dim, TWIST_AXES, TWIST_CAR), {}, TWIST_AXES)
        else:
            input_map = InputMap(cfg, action_dim, default_axes(action_dim, JOY_SIX_DOF, JOY_CAR), GAMEPAD_BUTTONS)
        super().__init__(input_map)
        self.timeout = cfg.disconnect_timeout_s
        self.topic = cfg.ros_topic
        self.messages = 0
        self._last: float | None = None
        try:
            from robot_rl.ros.link import RosLink  # optional: ros2 (imports rclpy)
        except ImportError as exc:
            raise TeleopDeviceError(f"ros: rclpy is not installed (pip install 'robot-rl[ros2]'): {exc}") from exc
        if cfg.ros_msg == "twist":
            from geometry_msgs.msg import Twist as msg_type  # optional: ros2
        else:
            from sensor_msgs.msg import Joy as msg_type  # optional: ros2
        self.link = RosLink(node_name)
        self.link.node.create_subscription(msg_type, cfg.ros_topic, self._on_message, 10)

    def _on_message(self, msg: Any) -> None:
        if hasattr(msg, "buttons"):
            axes = {f"a{i}": float(v) for i, v in enumerate(msg.axes)}
            self.map.update(axes, {f"b{i}" for i, v in enumerate(msg.buttons) if v})
        else:
            self.map.update(twist_axes(msg), set())
        self.messages += 1
        self._last = time.monotonic()

    def read(self) -> TeleopReading:
        last = self._last
        connected = last is not None and time.monotonic() - last < self.timeout
        if not connected and self.connected:
            self.map.release()  # a silent publisher must not leave its last command deflected
        self.connected = connected
        return self.map.reading(connected)

    def close(self) -> None:
        self.link.close()
