"""Command limits shared by both safety layers: the robot env (first layer) and the ROS 2 safety node (second).

Pure numpy, no ROS: the same :class:`ArmLimits` / :class:`CarLimits` and the same functions run in the env before a
command is published and again in the safety node before it reaches the controller, so the two layers cannot
drift apart. Every function returns the filtered command plus the names of the limits that acted (the
rejection/clip reasons counted on the diagnostics topic):

* ``nonfinite`` — NaN/inf somewhere in the command: the whole command is rejected (the previous one is held).
* ``bounds`` — a normalised action outside [-1, 1] (clipped).
* ``workspace`` — target position outside the workspace box (clipped to the box).
* ``step`` — target moved more than ``max_step`` per axis since the last accepted target (clipped).
* ``velocity`` — target moved faster than ``max_speed`` over the time since the last accepted target (clipped).
* ``lead`` — target further than ``max_target_lead`` per axis from the measured EE (clipped; anti-windup).
* ``tilt`` — target orientation more than ``max_tilt`` from the home orientation (rejected: held).
* ``force`` — measured contact force above ``max_force``: the target becomes the measured EE position (the
  controller stops pushing; holding the last target instead kept a pinned arm pressing, and every later target
  rejected, for good).
* ``gripper`` — gripper opening outside [0, ``max_opening``] (clipped).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOME_QUAT = (0.0, 1.0, 0.0, 0.0)
"""Home EE orientation of the sim arm (w, x, y, z): the hand pointing straight down."""


@dataclass
class ArmLimits:
    """Limits on Cartesian arm commands (the defaults match ``robot_rl_sim.arm_env.ArmTaskConfig``)."""

    workspace_low: tuple[float, float, float] = (0.3, -0.25, 0.015)
    """Lower corner of the box the target EE position is clipped to (m, robot base frame)."""
    workspace_high: tuple[float, float, float] = (0.65, 0.25, 0.35)
    """Upper corner of the workspace box (m)."""
    max_step: float = 0.02
    """Largest change of the target position per command, per axis (m)."""
    max_speed: float = 0.5
    """Largest target speed per axis (m/s), over the time since the last accepted target."""
    min_period: float = 0.04
    """Commands closer together than this (s) are limited as if this far apart (velocity limit floor)."""
    max_target_lead: float = 0.05
    """The target stays within this distance (m, per axis) of the measured EE position (anti-windup)."""
    max_tilt: float = 1.2
    """Largest angle (rad) of the target orientation from ``home_quat``; beyond it the orientation is held."""
    home_quat: tuple[float, float, float, float] = HOME_QUAT
    """Reference orientation (w, x, y, z) for ``max_tilt``."""
    max_force: float = 60.0
    """Measured EE force (N) above which the target becomes the measured EE position, so the controller stops
    pushing."""
    max_opening: float = 0.08
    """Gripper opening range is [0, max_opening] (m)."""

    def validate(self) -> None:
        if np.any(np.asarray(self.workspace_low) >= np.asarray(self.workspace_high)):
            raise ValueError("workspace_low must be < workspace_high on every axis")
        for name in ("max_step", "max_speed", "min_period", "max_target_lead", "max_tilt", "max_force",
                     "max_opening"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ArmLimits.{name} must be > 0")


@dataclass
class CarLimits:
    """Limits on car twist commands."""

    max_speed: float = 2.0
    """|forward speed| limit (m/s)."""
    max_yaw_rate: float = 3.0
    """|yaw rate| limit (rad/s)."""

    def validate(self) -> None:
        if not (self.max_speed > 0 and self.max_yaw_rate > 0):
            raise ValueError("CarLimits.max_speed and max_yaw_rate must be > 0")


def check_action(action: np.ndarray, hold: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """First-layer check of a normalised action: NaN/inf anywhere -> ``hold`` (reason ``nonfinite``); otherwise
    clipped to [-1, 1] (reason ``bounds`` if anything was outside). Returns a float32 copy."""
    a = np.asarray(action, dtype=np.float64)
    if a.shape != np.shape(hold):
        raise ValueError(f"action shape {a.shape} != {np.shape(hold)}")
    if not np.all(np.isfinite(a)):
        return np.array(hold, dtype=np.float32), ["nonfinite"]
    clipped = np.clip(a, -1.0, 1.0)
    return clipped.astype(np.float32), (["bounds"] if np.any(clipped != a) else [])


def quat_angle(q1: np.ndarray, q2: np.ndarray) -> float:
    """Angle (rad, [0, pi]) of the rotation between two unit quaternions (w, x, y, z)."""
    d = abs(float(np.dot(q1, q2)))
    return 2.0 * float(np.arccos(min(1.0, d)))


def filter_arm_target(limits: ArmLimits, pos: np.ndarray, quat: np.ndarray, last_pos: np.ndarray | None,
                      last_quat: np.ndarray | None, ee_pos: np.ndarray | None, dt: float | None = None,
                      force: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Applies every arm limit to a target pose; returns ``(pos, quat, reasons)``.

    ``last_pos``/``last_quat``: the last accepted target (None before the first: no step/velocity limit; a
    rejected first command then holds ``ee_pos``). ``ee_pos``: measured EE position (None: no lead limit).
    ``dt``: seconds since the last accepted target (None: no velocity limit). ``force``: measured EE force (N).
    """
    reasons: list[str] = []
    pos = np.asarray(pos, dtype=np.float64)
    quat = np.asarray(quat, dtype=np.float64)
    hold_pos = last_pos if last_pos is not None else ee_pos
    hold_quat = last_quat if last_quat is not None else np.asarray(limits.home_quat, np.float64)
    norm = float(np.linalg.norm(quat)) if np.all(np.isfinite(quat)) else 0.0
    if not (np.all(np.isfinite(pos)) and np.isfinite(norm)) or norm < 0.5 or norm > 1.5:
        if hold_pos is None:
            raise ValueError("first target is not finite and no measured EE position is known to hold")
        return np.array(hold_pos, np.float64), np.array(hold_quat, np.float64), ["nonfinite"]
    quat = quat / norm
    if quat_angle(quat, np.asarray(limits.home_quat, np.float64)) > limits.max_tilt + 1e-9:
        reasons.append("tilt")
        quat = np.array(hold_quat, np.float64)
    release = ee_pos if ee_pos is not None else last_pos
    if force is not None and release is not None and float(np.linalg.norm(force)) > limits.max_force:
        return np.clip(release, limits.workspace_low, limits.workspace_high), quat, [*reasons, "force"]
    out = pos.copy()
    if last_pos is not None:
        last = np.asarray(last_pos, np.float64)
        step = limits.max_step
        if dt is not None:
            vstep = limits.max_speed * max(float(dt), limits.min_period)
            if vstep < step and np.any(np.abs(out - last) > vstep + 1e-12):
                reasons.append("velocity")
            step = min(step, vstep)
        clipped = np.clip(out, last - step, last + step)
        if np.any(np.abs(clipped - out) > 1e-12) and "velocity" not in reasons:
            reasons.append("step")
        out = clipped
    if ee_pos is not None:
        ee = np.asarray(ee_pos, np.float64)
        clipped = np.clip(out, ee - limits.max_target_lead, ee + limits.max_target_lead)
        if np.any(np.abs(clipped - out) > 1e-12):
            reasons.append("lead")
        out = clipped
    clipped = np.clip(out, limits.workspace_low, limits.workspace_high)
    if np.any(clipped != out):
        reasons.append("workspace")
    return clipped, quat, reasons


def filter_gripper(limits: ArmLimits, opening: float, last: float | None) -> tuple[float, list[str]]:
    """Gripper opening (m): non-finite -> ``last`` (or fully open if none); otherwise clipped to the range."""
    if not np.isfinite(opening):
        return (limits.max_opening if last is None else float(last)), ["nonfinite"]
    clipped = float(np.clip(opening, 0.0, limits.max_opening))
    return clipped, (["gripper"] if clipped != opening else [])


def filter_twist(limits: CarLimits, v: float, w: float) -> tuple[float, float, list[str]]:
    """Car twist: non-finite -> stop (0, 0); otherwise clipped to the speed and yaw-rate limits."""
    if not (np.isfinite(v) and np.isfinite(w)):
        return 0.0, 0.0, ["nonfinite"]
    cv = float(np.clip(v, -limits.max_speed, limits.max_speed))
    cw = float(np.clip(w, -limits.max_yaw_rate, limits.max_yaw_rate))
    return cv, cw, (["velocity"] if (cv != v or cw != w) else [])


class RejectionCounter:
    """Counts limit activations by reason (what the diagnostics topic publishes)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, reasons: list[str]) -> None:
        for r in reasons:
            self.counts[r] = self.counts.get(r, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())
