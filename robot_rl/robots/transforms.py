"""Rigid transforms as (position [3], quaternion w-x-y-z [4]) pairs, in numpy: composition, inversion and
interpolation, for the TF buffer and the robot profiles (no ROS, no MuJoCo)."""

from __future__ import annotations

import numpy as np

IDENTITY = (np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of (w, x, y, z) quaternions."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw])


def quat_conj(q: np.ndarray) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``v`` rotated by the unit quaternion ``q``."""
    return quat_mul(quat_mul(q, np.array([0.0, *v])), quat_conj(q))[1:]


def compose(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``a * b``: the pose ``b`` (given in frame A) expressed in the frame ``a`` is given in."""
    return a[0] + rotate(a[1], b[0]), quat_mul(a[1], b[1])


def invert(a: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    inv = quat_conj(a[1])
    return -rotate(inv, a[0]), inv


def slerp(q0: np.ndarray, q1: np.ndarray, s: float) -> np.ndarray:
    """Spherical interpolation from ``q0`` (s = 0) to ``q1`` (s = 1), the short way round."""
    d = float(np.dot(q0, q1))
    if d < 0:
        q1, d = -q1, -d
    if d > 0.9995:
        out = q0 + s * (q1 - q0)
        return out / np.linalg.norm(out)
    theta = np.arccos(d)
    return (np.sin((1 - s) * theta) * q0 + np.sin(s * theta) * q1) / np.sin(theta)


def interpolate(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                s: float) -> tuple[np.ndarray, np.ndarray]:
    return a[0] + s * (b[0] - a[0]), slerp(a[1], b[1], s)
