"""The car drivers robot_rl's car profiles command, emulated on the sim car (no ROS here; the hardware node
:mod:`robot_rl_sim.ros_car_node` wires them to topics). Facts and sources: docs/design/driver-facts.md (4.3, 8).

* ``diff_drive`` — ros2_controllers' ``diff_drive_controller`` (Jazzy): ``~/cmd_vel`` TwistStamped; a zero stamp is
  taken as now, a command whose age is ``cmd_vel_timeout`` (0.5 s) or more is ignored, and the controller brakes
  to zero once the newest command is that old; ``~/odom`` and ``/tf`` ``odom`` -> ``base_link`` at 50 Hz; the
  wheel joints on ``joint_states`` (joint_state_broadcaster). The lidar is robot_rl's assumption (a 360 deg
  scanner on the base): the controller has none.
* ``ackermann`` — the F1TENTH gym bridge (f1tenth_gym_ros): ``/drive`` AckermannDriveStamped, the last command
  held with no timeout; odometry in ``map`` with TF ``map`` -> ``ego_racecar/base_link`` and the laser 0.275 m
  ahead of the base (``ego_racecar/laser``), 1080 beams over 4.7 rad. The sim car is a differential drive: the
  speed and steering angle become the twist of the same path, ``yaw rate = speed * tan(steering) / wheelbase``.

Scans are published at ``scan_rate_hz`` of the hardware node (40 Hz, a Hokuyo UST-10LX's rate; the gym bridge
publishes at 250 Hz, more than a Python node keeps up with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass(frozen=True)
class CarDriverFacts:
    """What one emulated car driver exposes."""

    cmd_timeout: float
    """A command this old (s) is ignored, and the wheels brake once the newest is this old (inf: held forever)."""
    laser_x: float
    """Laser position ahead of the base frame (m)."""
    scan_beams: int
    """Beams per scan."""
    scan_fov: float
    """Field of view of a scan (rad), centred on the heading."""
    joint_states: bool
    """Whether the wheel joints are published on ``joint_states``."""


DRIVERS = {
    "diff_drive": CarDriverFacts(cmd_timeout=0.5, laser_x=0.0, scan_beams=360, scan_fov=2 * math.pi,
                                 joint_states=True),
    "ackermann": CarDriverFacts(cmd_timeout=math.inf, laser_x=0.275, scan_beams=1080, scan_fov=4.7,
                                joint_states=False),
}


def laser_frame(base_frame: str) -> str:
    """The laser's frame beside ``base_frame`` (``ego_racecar/base_link`` -> ``ego_racecar/laser``)."""
    return base_frame.rsplit("/", 1)[0] + "/laser" if "/" in base_frame else "laser"


def ackermann_twist(speed: float, steering_angle: float, wheelbase: float) -> tuple[float, float]:
    """(forward speed, yaw rate) of a kinematic bicycle: the twist of the path the Ackermann command drives."""
    return speed, speed * math.tan(steering_angle) / wheelbase


class Lidar:
    """A planar scanner on the sim car: ``beams`` rays over ``fov`` centred on the heading, from ``laser_x`` ahead
    of the car's origin at the lidar's height, against the walls only (MuJoCo geom group 1)."""

    def __init__(self, model: mujoco.MjModel, car_body: int, height: float, facts: CarDriverFacts,
                 range_max: float = 10.0) -> None:
        self.model, self.car_body, self.height = model, car_body, height
        self.laser_x, self.range_max = facts.laser_x, range_max
        n = facts.scan_beams
        self.increment = facts.scan_fov / n if facts.scan_fov >= 2 * math.pi - 1e-9 else facts.scan_fov / (n - 1)
        self.angle_min = -facts.scan_fov / 2
        self.angles = self.angle_min + self.increment * np.arange(n)
        self._vec = np.zeros(3 * n)
        self._geom = np.zeros(n, np.int32)
        self._dist = np.zeros(n)
        self._groups = np.array([0, 1, 0, 0, 0, 0], np.uint8)

    def scan(self, data: mujoco.MjData, xy: np.ndarray, yaw: float) -> np.ndarray:
        """Ranges (m) of the beams; ``inf`` where a beam hits nothing within ``range_max``."""
        n = len(self.angles)
        c, s = math.cos(yaw), math.sin(yaw)
        vec = self._vec.reshape(n, 3)
        vec[:, 0], vec[:, 1] = np.cos(yaw + self.angles), np.sin(yaw + self.angles)
        origin = np.array([xy[0] + c * self.laser_x, xy[1] + s * self.laser_x, self.height])
        mujoco.mj_multiRay(self.model, data, origin, self._vec, self._groups, 1, self.car_body, self._geom,
                           self._dist, None, n, self.range_max)
        return np.where((self._geom < 0) | (self._dist < 0) | (self._dist > self.range_max), np.inf, self._dist)
