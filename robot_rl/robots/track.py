"""The driving task's track as a map: a closed rounded-rectangle centreline (counter-clockwise, arc length ``s = 0``
at the middle of the bottom straight, heading +x) with projection of a position onto it. Pure numpy: the sim builds
its walls from it (``robot_rl_sim.car_model``), and a car on ROS 2 localises against it from odometry (the Drive
task's state, checkpoints and success on a real car, :mod:`robot_rl.envs.ros_car_env`)."""

from __future__ import annotations

import math

import numpy as np


class TrackMap:
    """Closed centreline (rounded rectangle) with arc-length parametrisation and projection."""

    def __init__(self, size: tuple[float, float] = (6.0, 4.0), corner_radius: float = 1.2, width: float = 1.0,
                 spacing: float = 0.02) -> None:
        sx, sy = float(size[0]) / 2, float(size[1]) / 2
        r = float(corner_radius)
        a, b = sx - r, sy - r  # corner-circle centres at (±a, ±b)
        self.width, self.corner_radius = float(width), r
        # (kind, params, length): lines as (p0, p1); arcs as (centre, theta0); counter-clockwise
        segs: list[tuple[str, tuple, float]] = []

        def line(p0: tuple[float, float], p1: tuple[float, float]) -> None:
            length = math.dist(p0, p1)
            if length > 1e-9:
                segs.append(("line", (np.array(p0), np.array(p1)), length))

        def arc(cx: float, cy: float, theta0: float) -> None:
            segs.append(("arc", (np.array([cx, cy]), theta0), r * math.pi / 2))

        line((0.0, -sy), (a, -sy))
        arc(a, -b, -math.pi / 2)
        line((sx, -b), (sx, b))
        arc(a, b, 0.0)
        line((a, sy), (-a, sy))
        arc(-a, b, math.pi / 2)
        line((-sx, b), (-sx, -b))
        arc(-a, -b, math.pi)
        line((-a, -sy), (0.0, -sy))
        self.segments = segs
        self._starts = np.cumsum([0.0] + [seg[2] for seg in segs])
        self.length = float(self._starts[-1])
        n = int(math.ceil(self.length / spacing))
        self.s = np.linspace(0.0, self.length, n, endpoint=False)
        poses = [self.pose(s) for s in self.s]
        self.points = np.array([p for p, _ in poses])
        yaw = np.array([y for _, y in poses])
        self.tangents = np.stack([np.cos(yaw), np.sin(yaw)], axis=1)

    def pose(self, s: float, lateral: float = 0.0) -> tuple[np.ndarray, float]:
        """(xy [2], yaw) of the point at arc length ``s`` (wrapped), ``lateral`` m to the left of the centreline."""
        s = float(s) % self.length
        k = min(int(np.searchsorted(self._starts, s, side="right")) - 1, len(self.segments) - 1)
        kind, params, length = self.segments[k]
        u = s - self._starts[k]
        if kind == "line":
            p0, p1 = params
            t = (p1 - p0) / length
            xy, yaw = p0 + t * u, math.atan2(t[1], t[0])
        else:
            centre, theta0 = params
            theta = theta0 + u / self.corner_radius
            xy = centre + self.corner_radius * np.array([math.cos(theta), math.sin(theta)])
            yaw = theta + math.pi / 2
        if lateral:
            xy = xy + lateral * np.array([-math.sin(yaw), math.cos(yaw)])
        return xy, math.atan2(math.sin(yaw), math.cos(yaw))

    def project(self, xy: np.ndarray) -> tuple[float, float, int]:
        """(s, lateral offset (m, + = left of the driving direction), index of the nearest sample) of a point.
        Unique while the point is within ``corner_radius`` of the centreline (always true on the track)."""
        d = self.points - xy[:2]
        i = int(np.argmin(np.einsum("ij,ij->i", d, d)))
        rel = xy[:2] - self.points[i]
        t = self.tangents[i]
        s = (self.s[i] + rel[0] * t[0] + rel[1] * t[1]) % self.length
        return float(s), float(t[0] * rel[1] - t[1] * rel[0]), i


def pure_pursuit(track: TrackMap, xy: np.ndarray, yaw: float, s: float, max_speed: float, max_yaw_rate: float,
                 lookahead: float = 0.8, cruise: float = 1.6, lateral_accel: float = 2.0) -> np.ndarray:
    """The Drive task's expert from a pose on the track map: steer along the arc through the centreline point
    ``lookahead`` m ahead of arc length ``s``, at ``cruise`` m/s capped so the lateral acceleration stays under
    ``lateral_accel``; turn on the spot when facing away from the path. Returns the normalised action
    ``[speed / max_speed, yaw rate / max_yaw_rate]`` (float32, clipped to [-1, 1])."""
    target, _ = track.pose(s + lookahead)
    dx, dy = target - xy
    c, sn = math.cos(yaw), math.sin(yaw)
    fx, fy = c * dx + sn * dy, -sn * dx + c * dy
    curvature = 2.0 * fy / max(fx * fx + fy * fy, 1e-6)
    speed = min(cruise, math.sqrt(lateral_accel / max(abs(curvature), 1e-6)))
    if fx < 0.2:  # facing away from the path: turn on the spot
        speed = 0.0
    a = np.array([speed / max_speed, speed * curvature / max_yaw_rate], np.float32)
    if fx < 0.2:
        a[1] = math.copysign(1.0, fy)
    return np.clip(a, -1.0, 1.0)
