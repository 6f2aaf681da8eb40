"""Twist <-> wheel-speed conversion for a differential-drive base (the ``geometry_msgs/Twist`` driving law).

Pure numpy, no env or ROS specifics: the sim (robot_rl_sim.car) and a ROS 2 driving controller node call the same
functions. Every input may carry the same leading batch dims ``[...]`` (N cars in a batched env)::

    left  = (v - w * track_width / 2) / wheel_radius         wheel angular velocities (rad/s)
    right = (v + w * track_width / 2) / wheel_radius
    if max(|left|, |right|) > max_wheel_speed: both scaled by the same factor (the path curvature w / v is kept)

``v`` is the forward speed (m/s, body x, Twist ``linear.x``) and ``w`` the yaw rate (rad/s, counter-clockwise
seen from above, Twist ``angular.z``). :func:`wheel_speeds_to_twist` is the inverse (wheel odometry).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class DifferentialDriveParams:
    """Geometry and limits of a differential-drive base."""

    track_width: float = 0.30
    """Distance between the left and right wheel contact points (m)."""
    wheel_radius: float = 0.05
    """Drive wheel radius (m)."""
    max_wheel_speed: float = 50.0
    """Wheel angular speed limit (rad/s); commands beyond it are scaled down keeping the curvature."""

    def validate(self) -> None:
        for name in ("track_width", "wheel_radius", "max_wheel_speed"):
            if not getattr(self, name) > 0:
                raise ValueError(f"DifferentialDriveParams.{name} must be > 0")


MIN_STEERING_SPEED = 0.1
"""Below this speed (m/s) a car's curvature limit is taken at this speed: a car cannot turn in place, but it can
steer before it moves off."""


def limit_yaw_rate(v: float, w: float, min_turn_radius: float) -> float:
    """Yaw rate ``w`` (rad/s) limited to what a car-like robot reaches at forward speed ``v`` (m/s): ``|v| /
    min_turn_radius`` (an Ackermann car: ``min_turn_radius = wheelbase / tan(max steering angle)``), with ``|v|``
    at least :data:`MIN_STEERING_SPEED`; ``min_turn_radius`` 0: unlimited (a differential drive)."""
    if min_turn_radius <= 0:
        return w
    limit = max(abs(v), MIN_STEERING_SPEED) / min_turn_radius
    return max(-limit, min(limit, w))


def twist_to_wheel_speeds(v: np.ndarray | float, w: np.ndarray | float,
                          params: DifferentialDriveParams) -> tuple[np.ndarray, np.ndarray]:
    """(left, right) wheel angular velocities in rad/s for forward speed ``v`` (m/s) and yaw rate ``w`` (rad/s),
    saturated at ``params.max_wheel_speed`` with the ratio (and so the turning radius) preserved."""
    v, w = np.asarray(v, np.float64), np.asarray(w, np.float64)
    half = 0.5 * params.track_width * w
    left = (v - half) / params.wheel_radius
    right = (v + half) / params.wheel_radius
    peak = np.maximum(np.abs(left), np.abs(right))
    scale = np.minimum(1.0, params.max_wheel_speed / np.maximum(peak, 1e-12))
    return left * scale, right * scale


def wheel_speeds_to_twist(left: np.ndarray | float, right: np.ndarray | float,
                          params: DifferentialDriveParams) -> tuple[np.ndarray, np.ndarray]:
    """(v, w): forward speed (m/s) and yaw rate (rad/s) from wheel angular velocities (rad/s), i.e. odometry."""
    left, right = np.asarray(left, np.float64), np.asarray(right, np.float64)
    v = 0.5 * params.wheel_radius * (left + right)
    w = params.wheel_radius * (right - left) / params.track_width
    return v, w
