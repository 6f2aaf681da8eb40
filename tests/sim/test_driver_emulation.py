"""The driver emulations on the real MuJoCo arm, without ROS: what each controller does with its command."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from robot_rl_controllers.arm_model import TORQUE_LIMITS  # noqa: E402
from robot_rl_sim.arm_tasks import PickCubeEnv  # noqa: E402
from robot_rl_sim.driver_emulation import JointTracker, ServoEmulation  # noqa: E402


def servo_on_the_arm() -> tuple[PickCubeEnv, ServoEmulation]:
    env = PickCubeEnv()
    env.reset(seed=0)
    tracker = JointTracker(env.model, env.data, env.ee_site, env.arm_dofs, np.asarray(TORQUE_LIMITS), 50.0)
    return env, ServoEmulation(tracker, env.model, period=0.004, timeout=0.1)


def test_servo_moves_the_tool_along_the_twist() -> None:
    env, servo = servo_on_the_arm()
    start = env.data.site_xpos[env.ee_site].copy()
    dt = env.model.opt.timestep
    for k in range(int(0.5 / dt)):  # 0.5 s of 5 cm/s upwards
        now = k * dt
        servo.command(np.array([0.0, 0.0, 0.05, 0.0, 0.0, 0.0]), now)
        env.data.qfrc_applied[:] = 0.0
        env.data.ctrl[:] = 0.0
        env.data.qfrc_applied[env.arm_dofs] = servo.efforts(now)
        mujoco.mj_step(env.model, env.data)
    moved = env.data.site_xpos[env.ee_site] - start
    assert 0.02 < moved[2] < 0.03 and np.all(np.abs(moved[:2]) < 0.003), moved


def test_a_blocked_arm_does_not_wind_the_servo_command_up() -> None:
    """Jazzy's Servo (Float64MultiArray output) starts each cycle from the measured joints: while the arm cannot
    follow (here: not stepped at all, as if against an obstacle), the command stays one cycle's motion from the
    arm, so once freed the arm goes where the twist says, not where the wound-up command had got to."""
    env, servo = servo_on_the_arm()
    q0 = servo.tracker.measured()
    for k in range(500):  # 2 s of a 10 cm/s twist down into the "obstacle", the arm not moving
        now = k * servo.period
        servo.command(np.array([0.0, 0.0, -0.1, 0.0, 0.0, 0.0]), now)
        servo.efforts(now)
    lead = np.abs(servo.tracker.command() - q0).max()
    assert lead < 0.01, lead  # rad: one 4 ms cycle at 10 cm/s, not 2 s of it


def test_servo_halts_every_joint_at_a_joint_bound_instead_of_sliding_along_it() -> None:
    """A twist held until a joint reaches its margin: Servo halts all joints there (JOINT_BOUND), so the tool stops
    on the commanded line; clipping only that joint would let the others carry the tool off it, a motion nobody
    commanded."""
    env, servo = servo_on_the_arm()
    dt = env.model.opt.timestep
    twist = np.array([-0.15, 0.0, 0.0, 0.0, 0.0, 0.0])  # towards the base, until the elbow meets its bound
    start = env.data.site_xpos[env.ee_site].copy()
    path = []
    for k in range(int(4.0 / dt)):
        now = k * dt
        servo.command(twist, now)
        env.data.qfrc_applied[:] = 0.0
        env.data.ctrl[:] = 0.0
        env.data.qfrc_applied[env.arm_dofs] = servo.efforts(now)
        mujoco.mj_step(env.model, env.data)
        path.append(env.data.site_xpos[env.ee_site].copy())
    assert servo.halts > 0, "the twist never reached a joint bound"
    off_line = np.abs(np.array(path)[:, 1:] - start[1:]).max()
    assert off_line < 0.01, off_line  # m off the commanded (x) line (clipping the elbow alone: 10 cm)
    end = path[-1]
    assert np.linalg.norm(path[-int(0.5 / dt)] - end) < 0.002  # and it stays halted
