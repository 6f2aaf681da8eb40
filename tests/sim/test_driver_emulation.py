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
