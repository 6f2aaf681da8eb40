"""Car command outputs of the safety node, one per car profile interface (:mod:`robot_rl.robots.car_profile`): the
filtered twist (forward speed, yaw rate) as ros2_controllers' ``diff_drive_controller`` takes it
(``geometry_msgs/TwistStamped``, stamped now: the controller ignores commands older than its ``cmd_vel_timeout``) or
as an Ackermann drive (``ackermann_msgs/AckermannDriveStamped``: speed and the steering angle of the same path
curvature through the wheelbase, clipped to the steering limit)."""

from __future__ import annotations

import math
from typing import Any

from robot_rl.robots.car_profile import CarProfile
from robot_rl_controllers.driving import MIN_STEERING_SPEED


def ackermann_steering(v: float, w: float, wheelbase: float, max_angle: float) -> float:
    """Steering angle (rad) of the path curvature ``w / v`` (kept at speeds under :data:`MIN_STEERING_SPEED`)."""
    speed = v if abs(v) >= MIN_STEERING_SPEED else math.copysign(MIN_STEERING_SPEED, v if v else 1.0)
    return max(-max_angle, min(max_angle, math.atan(wheelbase * w / speed)))


class CarOutput:
    """Sends a checked twist to the driver in the profile's interface."""

    def __init__(self, node: Any, profile: CarProfile) -> None:
        self.node, self.profile = node, profile

    def send(self, v: float, w: float) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.send(0.0, 0.0)


class TwistStampedOutput(CarOutput):
    """``diff_drive_controller``'s ``~/cmd_vel``."""

    def __init__(self, node: Any, profile: CarProfile) -> None:
        from geometry_msgs.msg import TwistStamped  # optional: ros2

        super().__init__(node, profile)
        self._msg = TwistStamped
        self.pub = node.create_publisher(TwistStamped, profile.command.topic, 10)

    def send(self, v: float, w: float) -> None:
        msg = self._msg()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.profile.command.frame
        msg.twist.linear.x, msg.twist.angular.z = float(v), float(w)
        self.pub.publish(msg)


class AckermannOutput(CarOutput):
    """An Ackermann drive topic (F1TENTH's ``/drive``)."""

    def __init__(self, node: Any, profile: CarProfile) -> None:
        # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
        from ackermann_msgs.msg import AckermannDriveStamped

        super().__init__(node, profile)
        self._msg = AckermannDriveStamped
        self.pub = node.create_publisher(AckermannDriveStamped, profile.command.topic, 10)

    def send(self, v: float, w: float) -> None:
        cmd = self.profile.command
        msg = self._msg()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = cmd.frame
        msg.drive.speed = float(v)
        msg.drive.steering_angle = float(ackermann_steering(v, w, cmd.wheelbase, cmd.max_steering_angle))
        self.pub.publish(msg)


def make_car_output(node: Any, profile: CarProfile) -> CarOutput:
    """The output of the profile's command interface."""
    return {"diff_drive": TwistStampedOutput, "ackermann": AckermannOutput}[profile.command.interface](node, profile)
