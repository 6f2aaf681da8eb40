"""Driving controller node for the differential-drive car: twist in, rate-limited twist out at a fixed rate.

Subscribes ``controller/cmd_vel`` (geometry_msgs/Twist, from the safety node); publishes ``cmd_vel`` (to the base)
every ``1 / rate_hz`` s: the commanded twist saturated at the wheel speed limit with the path curvature kept
(:func:`robot_rl_controllers.driving.twist_to_wheel_speeds` and back, the same law the sim env uses) and moved
towards it at no more than ``max_accel`` / ``max_yaw_accel`` (a zero twist, a stop, is passed on at once). Also
publishes the wheel speed set-points on ``wheel_speeds`` (std_msgs/Float64MultiArray, rad/s, [left, right]).
Parameters: ``drive.*`` (geometry and wheel speed limit) and the acceleration limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from geometry_msgs.msg import Twist
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray

from robot_rl.ros.node import run_node
from robot_rl.ros.params import declare_config
from robot_rl_controllers.driving import DifferentialDriveParams, twist_to_wheel_speeds, wheel_speeds_to_twist


def _sim_drive() -> DifferentialDriveParams:
    return DifferentialDriveParams(track_width=0.30, wheel_radius=0.05, max_wheel_speed=50.0)


@dataclass
class DriveControllerConfig:
    """Parameters of the driving controller node (all ROS 2 parameters)."""

    startup_only: ClassVar[tuple[str, ...]] = ("rate_hz",)
    """Read when the node starts (rates, scene, cameras): read-only parameters."""

    drive: DifferentialDriveParams = field(default_factory=_sim_drive)
    """Track width, wheel radius and wheel speed limit of the base (defaults: the sim car)."""
    rate_hz: float = 50.0
    """Output rate of cmd_vel."""
    max_accel: float = 5.0
    """Largest change of the forward speed (m/s^2); 0 = unlimited."""
    max_yaw_accel: float = 20.0
    """Largest change of the yaw rate (rad/s^2); 0 = unlimited."""

    def validate(self) -> None:
        self.drive.validate()
        if self.rate_hz <= 0 or self.max_accel < 0 or self.max_yaw_accel < 0:
            raise ValueError("rate_hz must be > 0 and the acceleration limits >= 0")


class DriveControllerNode(Node):
    """See the module docstring."""

    def __init__(self, cfg: DriveControllerConfig | None = None, name: str = "drive_controller") -> None:
        super().__init__(name)
        self.cfg = declare_config(self, cfg or DriveControllerConfig())
        self.goal = np.zeros(2)
        self.out = np.zeros(2)
        self.pub = self.create_publisher(Twist, "cmd_vel", 10)
        self.pub_wheels = self.create_publisher(Float64MultiArray, "wheel_speeds", 10)
        self.create_subscription(Twist, "controller/cmd_vel", self._on_cmd, 10)
        self.create_timer(1.0 / self.cfg.rate_hz, self._tick)

    def _on_cmd(self, msg: Twist) -> None:
        v, w = float(msg.linear.x), float(msg.angular.z)
        if np.isfinite(v) and np.isfinite(w):
            left, right = twist_to_wheel_speeds(v, w, self.cfg.drive)
            self.goal = np.array([float(x) for x in wheel_speeds_to_twist(left, right, self.cfg.drive)])

    def _tick(self) -> None:
        cfg, dt = self.cfg, 1.0 / self.cfg.rate_hz
        step = np.array([cfg.max_accel * dt if cfg.max_accel else np.inf,
                         cfg.max_yaw_accel * dt if cfg.max_yaw_accel else np.inf])
        if not self.goal.any():  # a stop (e.g. the safety node's watchdog) goes through at once: the wheel
            self.out = self.goal.copy()  # servos then brake at their torque limit
        else:
            self.out = self.out + np.clip(self.goal - self.out, -step, step)
        msg = Twist()
        msg.linear.x, msg.angular.z = float(self.out[0]), float(self.out[1])
        self.pub.publish(msg)
        left, right = twist_to_wheel_speeds(self.out[0], self.out[1], cfg.drive)
        self.pub_wheels.publish(Float64MultiArray(data=[float(left), float(right)]))


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``robot-rl-drive-controller`` (ROS 2 executable ``drive_controller``)."""
    return run_node(DriveControllerNode, argv)
