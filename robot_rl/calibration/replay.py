"""A logged command stream replayed in the sim arm through the driver emulation's own joint position path
(:mod:`robot_rl_sim.driver_emulation`: the forward position controller's interpolation, the computed-torque joint
loop), with the parameters calibration fits: how late commands act, the loop's bandwidth, joint friction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.calibration.log import DriverLog, opening_speed
from robot_rl_controllers.arm_model import FINGER_MAX, TORQUE_LIMITS
from robot_rl_sim import arm_tasks
from robot_rl_sim.driver_emulation import ForwardPositionEmulation, JointTracker

NOMINAL_OMEGA = 50.0
"""rad/s: the emulated driver's joint loop bandwidth (``joint_omega``), which ``bandwidth_scale`` scales."""

MOVING = 0.05
"""rad/s: joint samples slower than this are left out of the fit: where friction holds a joint, the position it
stops at within its dead band (up to friction / stiffness, mrad on light joints) hangs on the slightest difference,
which makes the error rugged for the search; while the joint moves, friction slows it by its own amount."""


@dataclass(frozen=True)
class Dynamics:
    """The sim parameters calibration fits (the nominal sim: the defaults)."""

    command_latency: float = 0.0
    """s from a command's logging to its taking effect."""
    bandwidth_scale: float = 1.0
    """The joint loop's bandwidth relative to ``NOMINAL_OMEGA``."""
    coulomb_friction: float = 0.0
    """N m of dry friction on every arm joint."""
    viscous_friction: float = 0.0
    """N m s/rad of damping added to every arm joint."""


class ArmReplay:
    """The sim arm (the task scene's model, nothing else moving) replaying a :class:`DriverLog`'s commands."""

    def __init__(self, task: str = "PickCube") -> None:
        self.env = getattr(arm_tasks, f"{task}Env")(image_size=0)
        self.env.reset(seed=0)
        m = self.env.model
        self.dt = float(m.opt.timestep)
        self.arm_dofs = np.asarray(self.env.arm_dofs)
        self.nominal_friction = m.dof_frictionloss[self.arm_dofs].copy()
        self.nominal_damping = m.dof_damping[self.arm_dofs].copy()
        self.qpos = self.env.arm_qpos

    def run(self, log: DriverLog, dyn: Dynamics) -> np.ndarray:
        """The arm's joint positions [M, 7] at the log's joint state stamps, from its first state (position and
        velocity), each logged command applied ``dyn.command_latency`` after it was logged."""
        d = mujoco.MjData(self.env.model)
        d.qpos[:] = self.env.data.qpos
        d.qpos[self.qpos] = log.state_q[0]
        d.qvel[self.arm_dofs] = log.state_qd[0]
        with self.friction(dyn.coulomb_friction, dyn.viscous_friction):
            return self._replay(log, dyn, d)

    @contextmanager
    def friction(self, coulomb: float, viscous: float) -> Iterator[None]:
        """The model with ``coulomb`` N m of dry friction and ``viscous`` N m s/rad of damping added to every arm
        joint; the nominal one again afterwards, whatever happened."""
        m = self.env.model
        m.dof_frictionloss[self.arm_dofs] = self.nominal_friction + coulomb
        m.dof_damping[self.arm_dofs] = self.nominal_damping + viscous
        try:
            yield
        finally:
            m.dof_frictionloss[self.arm_dofs] = self.nominal_friction
            m.dof_damping[self.arm_dofs] = self.nominal_damping

    def _replay(self, log: DriverLog, dyn: Dynamics, d: mujoco.MjData) -> np.ndarray:
        env, m = self.env, self.env.model
        mujoco.mj_forward(m, d)
        tracker = JointTracker(m, d, env.ee_site, env.arm_dofs, np.asarray(TORQUE_LIMITS),
                               NOMINAL_OMEGA * dyn.bandwidth_scale)
        tracker.q_cmd = log.state_q[0].copy()
        control = ForwardPositionEmulation(tracker)
        due = log.command_t + dyn.command_latency
        first = int(np.searchsorted(due, log.state_stamp[0], side="right"))
        if first > 0:  # the command in force when the log starts
            control.command(log.command_q[first - 1], log.state_stamp[0])
        out = np.empty_like(log.state_q)
        out[0] = log.state_q[0]
        # the driver's physics keeps to the wall clock (a late step is caught up), so the state stamped t is
        # (t - t0) / dt steps on, whichever messages the log lost
        index = np.round((log.state_stamp - log.state_stamp[0]) / self.dt).astype(int)
        k = first
        for i in range(1, len(log.state_stamp)):
            # the driver takes due commands just before its step, and stamps the state just after it
            steps = int(index[i] - index[i - 1])
            for j in range(steps):
                now = float(log.state_stamp[i]) - (steps - 1 - j) * self.dt
                while k < len(due) and due[k] <= now:
                    # taken at the step, as by the driver, but timed from its due time and interpolated until
                    # the next one is due: the replay then varies smoothly with the parameters. (The driver
                    # interpolates over its running mean of the gaps, so a command arriving late leaves it still
                    # for a step: kicks whose timing the log cannot pin down to the step.)
                    gap = float(due[k + 1] - due[k]) if k + 1 < len(due) else 0.1
                    control.command(log.command_q[k], float(due[k]), gap if gap < 0.1 else None)
                    k += 1
                d.ctrl[env.arm_ctrl] = control.efforts(now)
                mujoco.mj_step(m, d)
            out[i] = d.qpos[self.qpos]
        return out

    def gripper_speed(self) -> float:
        """The nominal sim gripper's closing speed (m/s of opening, as :func:`opening_speed` measures a log)."""
        env, m = self.env, self.env.model
        d = mujoco.MjData(m)
        d.qpos[:] = env.data.qpos
        fingers = env.finger_qpos
        hold = JointTracker(m, d, env.ee_site, env.arm_dofs, np.asarray(TORQUE_LIMITS), NOMINAL_OMEGA)
        t, opening = [], []
        for k in range(int(1.5 / self.dt)):
            d.ctrl[env.grip_ctrl] = FINGER_MAX if k * self.dt < 0.5 else 0.0
            d.ctrl[env.arm_ctrl] = hold.torques()
            mujoco.mj_step(m, d)
            t.append(k * self.dt)
            opening.append(float(d.qpos[fingers].sum()))
        return opening_speed(np.array(t), np.array(opening), np.array([0.0, 0.5]))
