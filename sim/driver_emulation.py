"""What the real drivers' controllers do with a command, emulated inside the MuJoCo hardware loop (no ROS here).

Each class takes the command a driver's controller accepts and, at every physics step, gives the arm's joint
efforts (the hardware loop's ``in_loop`` contract: ``(q, qd, t) -> efforts``):

* :class:`JointTracker` — the joint position loop under every position interface: computed torque towards the
  commanded positions (what a robot's own joint controller does with a position command).
* :class:`ForwardPositionEmulation` — ros2_control's forward position controller: each command is the new target.
* :class:`TrajectoryEmulation` — the joint trajectory controller: a trajectory's points are interpolated
  (linearly between positions, as JTC does without velocities) from where the previous command had got to.
* :class:`ServoEmulation` — MoveIt Servo: every ``period`` the latest twist moves the measured joints by the damped
  pseudo-inverse of the Jacobian there, each joint halted at its limit margin; a twist older than ``timeout``
  halts it.
* :class:`CartesianMotionEmulation` — a Cartesian controller's target pose, tracked by the impedance law the sim
  arm uses (:class:`robot_rl_controllers.impedance.MujocoArmState`).

Commands arrive on ROS threads; they are handed over through the hardware's input queue (so ``command_latency``
applies) and read in the physics loop only.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from robot_rl_controllers.impedance import ImpedanceGains, MujocoArmState


class JointTracker:
    """Computed-torque joint position control: ``tau = M (kp (q* - q) + kd (qd* - qd)) + bias``, clipped to the
    torque limits; ``kp = omega^2``, ``kd = 2 omega`` (critically damped at ``omega`` rad/s). ``index``: the arm
    joints the commands address (the others are held where they were when tracking began)."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, site_id: int, dofs: range,
                 torque_limits: np.ndarray, omega: float = 30.0, index: np.ndarray | None = None) -> None:
        self.data = data
        self.arm = MujocoArmState(model, site_id, dofs)
        self.arm.warm_up()  # not on the first command, in the physics loop
        self.kp, self.kd = omega * omega, 2.0 * omega
        self.limits = np.asarray(torque_limits, np.float64)
        self.q_cmd: np.ndarray | None = None
        self.qd_cmd = np.zeros(len(dofs))
        self.index = np.arange(len(dofs)) if index is None else np.asarray(index)

    def measured(self) -> np.ndarray:
        """The commanded joints' measured positions."""
        return self.data.qpos[self.arm.qpos_sl][self.index].copy()

    def command(self) -> np.ndarray:
        """The commanded joints' current command (the measured positions before the first)."""
        if self.q_cmd is None:
            self.q_cmd = self.data.qpos[self.arm.qpos_sl].copy()
        return self.q_cmd[self.index].copy()

    def set(self, q: np.ndarray, qd: np.ndarray | None = None) -> None:
        """New command for the commanded joints (velocity 0 unless given)."""
        self.command()
        self.q_cmd[self.index] = q
        self.qd_cmd[:] = 0.0
        if qd is not None:
            self.qd_cmd[self.index] = qd

    def torques(self) -> np.ndarray:
        arm = self.arm
        arm.update(self.data)
        if self.q_cmd is None:  # no command yet: hold where the arm is
            self.q_cmd = arm.q.copy()
        acc = self.kp * (self.q_cmd - arm.q) + self.kd * (self.qd_cmd - arm.qd)
        return np.clip(arm.M @ acc + arm.bias, -self.limits, self.limits)


class ForwardPositionEmulation:
    """``Float64MultiArray`` of joint positions. A position-controlled arm interpolates the stream it is sent: each
    command is reached linearly over the stream's period (its running mean, 2-50 ms), with that slope as velocity
    feed-forward; a lone command after a pause is reached over the last period."""

    def __init__(self, tracker: JointTracker) -> None:
        self.tracker = tracker
        self.segment: tuple[float, float, np.ndarray, np.ndarray] | None = None  # (start, duration, from, to)
        self.period = 0.01
        self.last_command = -np.inf

    def command(self, positions: np.ndarray, now: float, duration: float | None = None) -> None:
        """A new target at ``now``, reached over the stream's running period, or over ``duration`` s when given (a
        replay that knows when the next command comes: :mod:`robot_rl.calibration.replay`)."""
        gap = now - self.last_command
        if 0.0 < gap < 0.1:
            self.period = float(np.clip(0.8 * self.period + 0.2 * gap, 0.002, 0.05))
        self.last_command = now
        start = self._desired(now)[0] if self.segment is not None else self.tracker.command()
        span = self.period if duration is None else float(np.clip(duration, 0.002, 0.05))
        self.segment = (now, span, start, np.asarray(positions, np.float64))

    def _desired(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        t0, duration, q0, q1 = self.segment
        s = (now - t0) / duration
        if s >= 1.0:
            return q1, np.zeros_like(q1)
        return q0 + max(s, 0.0) * (q1 - q0), (q1 - q0) / duration

    def hold_here(self) -> None:
        """The arm was guided by hand to the tracker's command: hold it there until the next command."""
        self.segment, self.last_command = None, -np.inf

    def efforts(self, now: float) -> np.ndarray:
        if self.segment is not None:
            self.tracker.set(*self._desired(now))
        return self.tracker.torques()


class TrajectoryEmulation:
    """A joint trajectory: ``points`` = ``[(time_from_start s, positions, velocities or None)]`` from ``start`` (a
    trajectory stamped 0 starts when it arrives), followed from where the previous one had got to (position and
    velocity): cubic segments where the points give velocities (JTC's splines), linear ones where they do not;
    the last point is held."""

    def __init__(self, tracker: JointTracker) -> None:
        self.tracker = tracker
        self.times: np.ndarray | None = None
        self.points: list[tuple[np.ndarray, np.ndarray | None]] = []

    def command(self, points: list[tuple[float, np.ndarray, np.ndarray | None]], now: float,
                start: float = 0.0) -> None:
        t0 = start if start > 0 else now
        q, qd = self._sample(now) if self.times is not None else (self.tracker.command(), np.zeros(len(points[0][1])))
        self.times = np.array([t0] + [t0 + t for t, _, _ in points])
        self.points = [(q, qd)] + [(np.asarray(p, np.float64), None if v is None else np.asarray(v, np.float64))
                                   for _, p, v in points]

    def _sample(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        times, points = self.times, self.points
        if now <= times[0]:
            return points[0][0], points[0][1] if points[0][1] is not None else np.zeros_like(points[0][0])
        if now >= times[-1]:
            return points[-1][0], np.zeros_like(points[-1][0])
        i = int(np.searchsorted(times, now))
        h = times[i] - times[i - 1]
        (p0, v0), (p1, v1) = points[i - 1], points[i]
        s = (now - times[i - 1]) / h
        if v1 is None:  # positions only: linear
            return p0 + s * (p1 - p0), (p1 - p0) / h
        v0 = np.zeros_like(p0) if v0 is None else v0
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
        pos = h00 * p0 + h10 * h * v0 + h01 * p1 + h11 * h * v1
        vel = (d00 * p0 + d01 * p1) / h + d10 * v0 + d11 * v1
        return pos, vel

    def hold_here(self) -> None:
        """See :meth:`ForwardPositionEmulation.hold_here`."""
        self.times, self.points = None, []

    def efforts(self, now: float) -> np.ndarray:
        if self.times is not None:
            self.tracker.set(*self._sample(now))
        return self.tracker.torques()


class ServoEmulation:
    """MoveIt Servo in speed units: every ``period`` s, the next joint command is the measured joints moved by
    twist ``[vx, vy, vz, wx, wy, wz]`` (base frame) through the damped pseudo-inverse of the Jacobian at the measured
    joints. Jazzy's Servo with a ``Float64MultiArray`` output starts each cycle from the robot's current state, not
    from its last command, so a blocked arm does not wind the command up. A twist whose stamp is ``timeout`` s old or
    more is stale and halts the command where it is (Servo's ``incoming_command_timeout``, counted from
    ``header.stamp``: a zero stamp is stale).

    Joint limits as Servo enforces them: the joint velocities are scaled down together (the Cartesian direction
    kept) until none exceeds ``max_joint_speed``, and a step that would take any joint past ``joint_margin`` inside
    its range, moving outwards, halts every joint at its measured position (``halt_all_joints_in_cartesian_mode``):
    the arm stops rather than moving in a direction nobody commanded, as clipping the one joint would make it."""

    def __init__(self, tracker: JointTracker, model: mujoco.MjModel, period: float = 0.01, timeout: float = 0.1,
                 damping: float = 1e-3, joint_margin: float = 0.1, max_joint_speed: float = math.pi) -> None:
        self.tracker, self.model = tracker, model
        arm = tracker.arm
        ranges = model.jnt_range[model.dof_jntid[arm.dof0 + tracker.index]]
        self.low, self.high = ranges[:, 0] + joint_margin, ranges[:, 1] - joint_margin
        self.max_joint_speed = max_joint_speed
        self.halts = 0  # cycles halted at a joint bound (Servo's JOINT_BOUND status)
        self.scratch = mujoco.MjData(model)
        self.period, self.timeout, self.damping = period, timeout, damping
        self.twist = np.zeros(6)
        self.stamp = -np.inf
        self.enabled = True  # False: Servo is in another command mode (switch_command_type) and ignores twists
        self.next_tick = -np.inf
        self._jac = np.zeros((6, model.nv))

    def command(self, twist: np.ndarray, now: float, stamp: float | None = None) -> None:
        """A twist arriving at ``now``, stamped ``stamp`` (its header's; None: ``now``)."""
        if self.enabled:
            self.twist, self.stamp = np.asarray(twist, np.float64).copy(), now if stamp is None else stamp

    def hold_here(self) -> None:
        """See :meth:`ForwardPositionEmulation.hold_here`: the last twist is forgotten (stale)."""
        self.twist, self.stamp = np.zeros(6), -np.inf

    def efforts(self, now: float) -> np.ndarray:
        tr = self.tracker
        q = tr.command()
        if now >= self.next_tick:
            self.next_tick = now + self.period
            fresh = now - self.stamp < self.timeout
            if fresh:
                q = tr.measured()
                self.scratch.qpos[:] = tr.data.qpos
                mujoco.mj_kinematics(self.model, self.scratch)
                mujoco.mj_comPos(self.model, self.scratch)
                # mj_jacSite fills translation (jacp) then rotation (jacr): our twist is (linear; angular)
                mujoco.mj_jacSite(self.model, self.scratch, self._jac[:3], self._jac[3:], tr.arm.site_id)
                jac = self._jac[:, tr.arm.dof0 + tr.index]
                qd = jac.T @ np.linalg.solve(jac @ jac.T + self.damping * np.eye(6), self.twist)
                qd *= min(1.0, self.max_joint_speed / max(float(np.max(np.abs(qd))), 1e-12))
                q_new = q + qd * self.period
                if np.any((qd < 0) & (q_new < self.low)) or np.any((qd > 0) & (q_new > self.high)):
                    self.halts += 1
                    tr.set(q)
                else:
                    tr.set(q_new, qd)
            else:
                tr.set(q)
        return tr.torques()


STIFF_CARTESIAN = ImpedanceGains(kp_pos=1600.0, kp_rot=1000.0)
"""A Cartesian motion controller tracks its target closely (FZI's is not compliant): 40 rad/s, twice the sim's
own impedance bandwidth."""


class CartesianMotionEmulation:
    """A Cartesian controller's target pose (base frame), tracked stiffly (:data:`STIFF_CARTESIAN`, the impedance
    law at high gains); until the first target it holds the measured pose."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, site_id: int, dofs: range,
                 posture: np.ndarray, gains: ImpedanceGains | None = None) -> None:
        self.data = data
        self.arm = MujocoArmState(model, site_id, dofs, gains or STIFF_CARTESIAN)
        self.arm.warm_up()  # not on the first command, in the physics loop
        self.posture = np.asarray(posture, np.float64)
        self.target: tuple[np.ndarray, np.ndarray] | None = None

    def command(self, pos: np.ndarray, quat: np.ndarray, now: float) -> None:
        norm = float(np.linalg.norm(quat))
        if np.all(np.isfinite(pos)) and np.isfinite(norm) and norm > 0.5:
            self.target = (np.asarray(pos, np.float64), np.asarray(quat, np.float64) / norm)

    def hold_here(self) -> None:
        """The arm was guided by hand: the measured pose becomes the target (at the next step)."""
        self.target = None

    def efforts(self, now: float) -> np.ndarray:
        arm = self.arm
        arm.update(self.data)
        if self.target is None:
            self.target = (arm.pos.copy(), arm.quat.copy())
        return arm.torques(self.target[0], self.target[1], self.posture)
