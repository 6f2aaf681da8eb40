"""Joint friction read off the motors' efforts: from each logged joint state, one physics step of the sim arm with
the efforts the motors applied; the Coulomb and viscous friction added to every joint are those whose steps land
on the logged next velocities (least squares). It needs efforts that are the motors' torques (the profile's
``joint_states.effort: motor_torque``). Unlike the replay's position error it does not depend on when commands
acted or how the joint loop answered them, so friction is not traded against latency and bandwidth: on one
``typical`` log the replay read viscous friction 0.125 for the hidden 0.2, the efforts 0.200."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.calibration.log import DriverLog
from robot_rl.calibration.replay import MOVING, ArmReplay


@dataclass(frozen=True)
class EffortFriction:
    """Friction fitted from the efforts."""

    coulomb: float
    """N m of dry friction added to every arm joint."""
    viscous: float
    """N m s/rad of damping added to every arm joint."""
    rms: float
    """rad/s: joint velocity RMS error of one step from each state, fitted (the joint states' noise, at best)."""
    samples: int
    """Steps taken from the log."""


def steps_in(log: DriverLog, dt: float, most: int) -> np.ndarray:
    """Indices ``k`` of states one physics step after the state before them (within a quarter step), with efforts,
    some joint moving; at most ``most``, evenly spread."""
    gap = np.diff(log.state_stamp)
    ok = ((np.abs(gap - dt) < 0.25 * dt) & np.all(np.isfinite(log.state_effort[1:]), axis=1)
          & np.any(np.abs(log.state_qd[:-1]) > MOVING, axis=1))
    ks = np.flatnonzero(ok) + 1
    return ks[np.linspace(0, len(ks) - 1, most).astype(int)] if len(ks) > most else ks


def friction_from_efforts(log: DriverLog, replay: ArmReplay, most: int = 20000) -> EffortFriction:
    """See the module docstring. The effort a joint state carries is taken as the torque applied over the physics
    step that led to it (as the rehearsal's driver publishes it)."""
    from scipy.optimize import least_squares  # deferred: only calibration needs it

    ks = steps_in(log, replay.dt, most)
    if len(ks) < 100:
        raise ValueError(f"calibrate: the profile's joint_states.effort is motor_torque, but the log has {len(ks)} "
                         "moving joint states with efforts one physics step apart; record the driver's full-rate "
                         "joint states, or set joint_states.effort: none")
    env, m = replay.env, replay.env.model
    d = mujoco.MjData(m)
    fingers = np.nan_to_num(log.opening[ks - 1], nan=float(np.sum(env.data.qpos[env.finger_qpos]))) / 2.0
    moving = np.abs(log.state_qd[ks - 1]) > MOVING  # a held joint's friction is anything up to its bound

    def errors(x: np.ndarray) -> np.ndarray:
        out = np.empty((len(ks), len(replay.arm_dofs)))
        with replay.friction(float(x[0]), float(x[1])):
            for i, k in enumerate(ks):
                d.qpos[:] = env.data.qpos
                d.qpos[replay.qpos] = log.state_q[k - 1]
                d.qpos[env.finger_qpos] = fingers[i]
                d.qvel[:] = 0.0
                d.qvel[replay.arm_dofs] = log.state_qd[k - 1]
                d.ctrl[:] = 0.0
                d.ctrl[env.arm_ctrl] = log.state_effort[k]
                d.ctrl[env.grip_ctrl] = fingers[i]
                mujoco.mj_step(m, d)
                out[i] = d.qvel[replay.arm_dofs]
        return (out - log.state_qd[ks])[moving]

    fitted = least_squares(errors, np.array([0.1, 0.1]), bounds=(0.0, 1.0), x_scale=0.1, diff_step=1e-3,
                           max_nfev=30)
    return EffortFriction(coulomb=float(fitted.x[0]), viscous=float(fitted.x[1]),
                          rms=float(np.sqrt(np.mean(fitted.fun ** 2))), samples=len(ks))
