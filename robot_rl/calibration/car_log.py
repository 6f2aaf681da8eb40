"""What car calibration reads of a robot log: the commands the car's driver heard and the odometry it published,
each with the time it was logged, from a rosbag2 bag (``robot-rl record-car-excitation`` writes one; ``ros2 bag
record`` of the profile's command and odometry topics while a person drives does too)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.datasets.bag_demos import one_bag, topic_series
from robot_rl.robots.car_profile import CarProfile


@dataclass
class CarLog:
    """One bag's car traffic, times in seconds on the logging machine's clock."""

    command_t: np.ndarray
    """[N] when each command was logged (the recorder hears it as the driver does)."""
    command: np.ndarray
    """[N, 2] the commanded forward speed (m/s) and yaw rate (rad/s); an Ackermann command's, through its
    wheelbase."""
    odom_stamp: np.ndarray
    """[M] each odometry message's header stamp (the time of the state it describes)."""
    odom_t: np.ndarray
    """[M] when each odometry message was logged."""
    pose: np.ndarray
    """[M, 3] x, y (m) and yaw (rad, unwrapped) of the odometry's pose."""
    twist: np.ndarray
    """[M, 2] the odometry's forward speed (m/s) and yaw rate (rad/s)."""

    @property
    def seconds(self) -> float:
        return float(self.odom_stamp[-1] - self.odom_stamp[0]) if len(self.odom_stamp) > 1 else 0.0

    def window(self, start: float, end: float) -> CarLog:
        """The part of the log between ``start`` and ``end`` s after its first odometry message."""
        t0 = self.odom_stamp[0]
        s = (self.odom_stamp >= t0 + start) & (self.odom_stamp < t0 + end)
        c = (self.command_t >= t0 + start - 1.0) & (self.command_t < t0 + end)
        return CarLog(self.command_t[c], self.command[c], self.odom_stamp[s], self.odom_t[s], self.pose[s],
                      self.twist[s])


def read_car_bag(folder: str | Path, profile: CarProfile) -> CarLog:
    """The car traffic of ``profile``'s command and odometry topics in the bag at ``folder``."""
    from rosbags.highlevel import AnyReader  # optional: data

    folder = one_bag(folder, "calibrate-car")
    with AnyReader([folder]) as reader:
        command_t, commands = topic_series(reader, profile.command.topic)
        odom_t, odoms = topic_series(reader, profile.odom.topic)
    if len(commands) < 20 or len(odoms) < 100:
        raise ValueError(f"calibrate-car: {folder} has {len(commands)} messages on {profile.command.topic} and "
                         f"{len(odoms)} on {profile.odom.topic}; record a minute or more of both while the car drives")
    if profile.command.interface == "ackermann":
        base = profile.command.wheelbase
        vw = [(m.drive.speed, m.drive.speed * math.tan(m.drive.steering_angle) / base) for m in commands]
    else:
        vw = [(m.twist.linear.x, m.twist.angular.z) for m in commands]
    rows = []
    for t, m in zip(odom_t, odoms, strict=True):
        q = m.pose.pose.orientation
        yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
        rows.append((m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, t * 1e-9, m.pose.pose.position.x,
                     m.pose.pose.position.y, yaw, m.twist.twist.linear.x, m.twist.twist.angular.z))
    rows.sort(key=lambda r: r[0])
    a = np.array(rows, np.float64)
    pose = a[:, 2:5].copy()
    pose[:, 2] = np.unwrap(pose[:, 2])
    return CarLog(command_t=command_t * 1e-9, command=np.array(vw, np.float64), odom_stamp=a[:, 0], odom_t=a[:, 1],
                  pose=pose, twist=a[:, 5:7].copy())


def pose_twist(log: CarLog) -> np.ndarray:
    """[M, 2] the forward speed and yaw rate the odometry's poses show (central differences in the car's frame):
    the car's true motion where its pose comes from a localiser and its twist from uncalibrated wheel odometry."""
    t, p = log.odom_stamp, log.pose
    dt = np.gradient(t)
    vx, vy = np.gradient(p[:, 0]) / dt, np.gradient(p[:, 1]) / dt
    yaw = p[:, 2]
    return np.stack([np.cos(yaw) * vx + np.sin(yaw) * vy, np.gradient(yaw) / dt], axis=1)
