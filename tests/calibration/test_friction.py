"""Friction read off the motors' efforts (no ROS): the sim arm with hidden joint friction follows the excitation
through the emulated driver's joint loop; the log of its joint states (positions and velocities with the
``typical`` robot's noise, the efforts applied) gives that friction back, whatever the joint loop and latency were."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robot_rl.calibration.excite import ExcitationConfig, excitation
from robot_rl.calibration.friction import friction_from_efforts
from robot_rl.calibration.log import DriverLog
from robot_rl.calibration.replay import ArmReplay
from robot_rl_controllers.arm_model import TORQUE_LIMITS
from robot_rl_sim.driver_emulation import JointTracker


def _logged_arm(replay: ArmReplay, coulomb: float, viscous: float, omega: float, seconds: float = 8.0,
                noise: float = 1e-4, effort_noise: float = 0.0) -> DriverLog:
    """Every physics step's joint state of the sim arm (friction added) tracking the excitation at ``omega``; the
    efforts read with ``effort_noise`` N m of noise."""
    env, m = replay.env, replay.env.model
    d = mujoco.MjData(m)
    d.qpos[:] = env.data.qpos
    mujoco.mj_forward(m, d)
    tracker = JointTracker(m, d, env.ee_site, env.arm_dofs, np.asarray(TORQUE_LIMITS), omega)
    q0, cfg, rng = d.qpos[replay.qpos].copy(), ExcitationConfig(), np.random.default_rng(0)
    stamps, q, qd, effort = [], [], [], []
    with replay.friction(coulomb, viscous):
        for k in range(int(seconds / replay.dt)):
            tracker.set(excitation(k * replay.dt, q0, cfg))
            d.ctrl[env.arm_ctrl] = tracker.torques()
            mujoco.mj_step(m, d)
            stamps.append((k + 1) * replay.dt)
            q.append(d.qpos[replay.qpos] + rng.normal(0.0, noise, 7))
            qd.append(d.qvel[replay.arm_dofs] + rng.normal(0.0, noise, 7))
            effort.append(d.ctrl[env.arm_ctrl] + rng.normal(0.0, effort_noise, 7))
    n, none = len(stamps), np.zeros(0)
    return DriverLog(command_t=none, command_q=np.zeros((0, 7)), state_stamp=np.array(stamps),
                     state_t=np.array(stamps), state_q=np.array(q), state_qd=np.array(qd),
                     state_effort=np.array(effort), opening=np.full(n, np.nan), gripper_t=none, gripper_opening=none)


@pytest.mark.parametrize(("omega", "effort_noise"), [(25.0, 0.0), (12.0, 0.0), (25.0, 0.1)])
def test_the_efforts_give_the_hidden_friction_back_whatever_the_joint_loop(omega, effort_noise):
    replay = ArmReplay()
    found = friction_from_efforts(_logged_arm(replay, 0.3, 0.2, omega, effort_noise=effort_noise), replay)
    within = 0.1 if effort_noise else 0.03  # 8 s of log; noisier torques want more of it
    assert abs(found.coulomb / 0.3 - 1) < within and abs(found.viscous / 0.2 - 1) < within, found
    if not effort_noise:  # the velocities' noise, nothing left unexplained
        assert found.rms < 5e-4 and found.samples > 1000, found
    assert replay.env.model.dof_damping[replay.arm_dofs].tolist() == replay.nominal_damping.tolist()  # restored


def test_a_log_without_efforts_says_which_profile_field_to_change():
    replay = ArmReplay()
    log = _logged_arm(replay, 0.3, 0.2, 25.0, seconds=1.0)
    log.state_effort[:] = np.nan
    with pytest.raises(ValueError, match="joint_states.effort"):
        friction_from_efforts(log, replay)
