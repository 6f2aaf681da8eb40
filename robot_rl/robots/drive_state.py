"""The Drive task's state and lap bookkeeping from a pose on the track map, shared by the sim car
(:mod:`robot_rl_sim.car`) and a ROS 2 car (:mod:`robot_rl.envs.ros_car_env`): one implementation, so a policy trained
in sim reads the same numbers from a real car's odometry, TF and lidar. Pure numpy."""

from __future__ import annotations

import math

import numpy as np

from robot_rl.robots.track import TrackMap


class LapProgress:
    """Progress along the centreline since a start at arc length ``s0`` (signed, unwrapped, metres) and the
    checkpoints passed in order (``n_checkpoints`` evenly spaced per lap)."""

    def __init__(self, track: TrackMap, n_checkpoints: int) -> None:
        self.track = track
        self.spacing = track.length / n_checkpoints
        self.reset(0.0)

    def reset(self, s0: float) -> None:
        """A start at arc length ``s0``: progress 0, the next checkpoint ahead."""
        self.s0 = self.s = s0
        self.progress = 0.0
        self.checkpoints = 0
        ahead = (-s0) % self.spacing
        self.next_checkpoint = ahead if ahead > 1e-9 else self.spacing  # its progress value
        self.new_checkpoints, self.delta = 0, 0.0

    def update(self, s: float) -> None:
        """The car is now at arc length ``s`` (it moves far less than half a lap between updates)."""
        length = self.track.length
        delta = (s - self.s + length / 2) % length - length / 2
        self.s, self.progress, self.delta = s, self.progress + delta, delta
        self.new_checkpoints = 0
        while self.progress >= self.next_checkpoint:
            self.checkpoints += 1
            self.new_checkpoints += 1
            self.next_checkpoint += self.spacing

    def back_to_last_checkpoint(self) -> float:
        """Rewinds the progress to the last checkpoint passed (the start when none); returns its arc length."""
        last = self.next_checkpoint - self.spacing if self.checkpoints else 0.0
        self.progress = last
        return self.s0 + last

    def next_checkpoint_xy(self) -> np.ndarray:
        return self.track.pose(self.s0 + self.next_checkpoint)[0]


def drive_state_head(track: TrackMap, xy: np.ndarray, yaw: float, body_twist: tuple[float, float, float],
                     lateral: float, nearest: int, checkpoint_xy: np.ndarray) -> list[float]:
    """The state before the ranges: forward and lateral speed (m/s, car frame), yaw rate (rad/s), sin/cos of the
    heading relative to the track direction at sample ``nearest``, lateral offset from the centreline (m, + = left)
    and the next checkpoint's position in the car frame (x forward, y left, m)."""
    c, s = math.cos(yaw), math.sin(yaw)
    t = track.tangents[nearest]
    rel = math.atan2(t[0] * s - t[1] * c, t[0] * c + t[1] * s)  # heading - track direction
    dx, dy = checkpoint_xy - xy
    vx, vy, wz = body_twist
    return [vx, vy, wz, math.sin(rel), math.cos(rel), lateral, c * dx + s * dy, -s * dx + c * dy]


def range_angles(n_ranges: int) -> np.ndarray:
    """Bearings (rad, car frame, + = left) of the state's ``n_ranges`` wall distances: evenly over +-90 deg."""
    return np.linspace(-np.pi / 2, np.pi / 2, n_ranges) if n_ranges > 1 else np.zeros(n_ranges)


def scan_in_car_frame(ranges: np.ndarray, angle_min: float, angle_increment: float, range_min: float,
                      laser_xy: tuple[float, float], laser_yaw: float) -> tuple[np.ndarray, np.ndarray]:
    """Each beam of a ``sensor_msgs/LaserScan`` as seen from the car's origin (the laser at ``laser_xy``, turned
    ``laser_yaw``): (bearing, distance) of its hit point; a beam without a return (inf, NaN, under ``range_min``)
    keeps its own bearing and has distance inf."""
    r = np.asarray(ranges, np.float64)
    valid = np.isfinite(r) & (r >= range_min)
    r = np.where(valid, r, np.inf)
    beam = laser_yaw + angle_min + angle_increment * np.arange(len(r))
    with np.errstate(invalid="ignore"):
        px = laser_xy[0] + r * np.cos(beam)
        py = laser_xy[1] + r * np.sin(beam)
    # a beam without a return points the same way from the car as from the laser far away
    return np.where(valid, np.arctan2(py, px), beam), np.where(valid, np.hypot(px, py), np.inf)


def ranges_from_scan(bearing: np.ndarray, dist: np.ndarray, angle_increment: float, n_ranges: int,
                     range_max: float) -> np.ndarray:
    """The state's wall distances from a scan in the car frame (:func:`scan_in_car_frame`): for each state bearing
    the distance of the hit point nearest that bearing, capped at ``range_max`` (no return: ``range_max``)."""
    out = np.full(n_ranges, float(range_max))
    for k, a in enumerate(range_angles(n_ranges)):
        diff = np.abs((bearing - a + np.pi) % (2 * np.pi) - np.pi)
        i = int(np.argmin(diff))
        if diff[i] <= max(abs(angle_increment), 1e-3) * 2:
            out[k] = min(float(dist[i]), range_max)
    return out
