"""The Drive state from a lidar scan and the Ackermann steering of a twist, without ROS: a scan from a laser ahead
of the car gives the wall distances a scanner at the car's origin would; the steering angle drives the twist's path
(its yaw rate back through the bicycle model) within the steering limit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_rl.robots.drive_state import range_angles, ranges_from_scan, scan_in_car_frame
from robot_rl_controllers.car_outputs import ackermann_steering


def _wall_scan(laser_x: float, wall_x: float, beams: int, fov: float) -> tuple[np.ndarray, float, float]:
    """Ranges of a laser at (laser_x, 0) to a wall x = wall_x in front of the car (nothing elsewhere)."""
    inc = fov / (beams - 1)
    angles = -fov / 2 + inc * np.arange(beams)
    with np.errstate(divide="ignore"):
        r = np.where(np.cos(angles) > 1e-6, (wall_x - laser_x) / np.cos(angles), np.inf)
    return r, -fov / 2, inc


def test_ranges_from_an_offset_laser_are_the_distances_from_the_car_origin() -> None:
    for laser_x in (0.0, 0.275):
        r, a0, inc = _wall_scan(laser_x, 1.0, 1080, 4.7)
        out = ranges_from_scan(*scan_in_car_frame(r, a0, inc, 0.02, (laser_x, 0.0), 0.0), inc, 7, 3.0)
        want = [min(1.0 / math.cos(a), 3.0) if math.cos(a) > 1e-6 else 3.0 for a in range_angles(7)]
        np.testing.assert_allclose(out, want, atol=0.02)


def test_no_return_and_bad_values_read_as_range_max() -> None:
    r = np.full(360, np.nan)
    r[::2] = np.inf
    bearing, dist = scan_in_car_frame(r, -math.pi, 2 * math.pi / 360, 0.02, (0.0, 0.0), 0.0)
    assert np.all(ranges_from_scan(bearing, dist, 2 * math.pi / 360, 7, 3.0) == 3.0) and np.all(np.isinf(dist))


def test_the_steering_angle_drives_the_twists_path() -> None:
    wheelbase, limit = 0.3302, 0.4189
    for v, w in [(1.0, 0.5), (-0.8, 0.3), (2.0, -1.0)]:
        delta = ackermann_steering(v, w, wheelbase, limit)
        assert abs(delta) < limit
        assert v * math.tan(delta) / wheelbase == pytest.approx(w, rel=1e-6)
    assert ackermann_steering(1.0, 100.0, wheelbase, limit) == limit  # clipped at the limit
    assert ackermann_steering(0.0, 0.5, wheelbase, limit) > 0  # steers before moving off

