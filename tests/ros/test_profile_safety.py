"""The safety node on every arm profile's command path, against robot_rl's emulation of each driver: bad actions
and bad targets never reach the driver (every message on the driver's command topic is checked in that
interface's units), a stopped command stream brings the arm to rest without rebound, and the e-stop latches until
reset."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.ros.test_profiles import ARM_PROFILES, profile_file, start_profile_graph, wait_kinematics
from tests.ros.test_safety import ACTIONS, publish_bad_targets

pytestmark = pytest.mark.ros

PROFILES = [p for p in ARM_PROFILES if p not in ("joint_trajectory", "parallel_gripper")]
"""The bundled arm profiles (the generic profile's joint-trajectory variant stops with a 2 cm/s bump on the emulated
trajectory controller: not yet covered here; its parallel-gripper variant commands the arm as the generic one)."""


def _command_probe(profile):
    """A node recording every message on the profile's command topic (as arrays in the interface's units), the
    safety state, and the arm's tool pose from the joint states through the URDF."""
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, String

    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import pose_arrays
    from robot_rl.ros.robot_state import JointReader, RobotDescription

    link = RosLink("command_probe")
    kind, topic = profile.command.interface, profile.command.topic
    if kind == "cartesian_pose":
        link.subscribe("cmd", PoseStamped, topic, lambda m: np.concatenate(pose_arrays(m.pose)), depth=100000)
    elif kind == "servo_twist":
        link.subscribe("cmd", TwistStamped, topic, lambda m: np.array(
            [m.twist.linear.x, m.twist.linear.y, m.twist.linear.z]), depth=100000)
    elif kind == "joint_position":
        link.subscribe("cmd", Float64MultiArray, topic, lambda m: np.array(m.data), stamped=False, depth=100000)
    else:
        from trajectory_msgs.msg import JointTrajectory

        link.subscribe("cmd", JointTrajectory, topic, lambda m: np.array(m.points[0].positions), stamped=False,
                       depth=100000)
    link.subscribe("state", String, "safety_state", lambda m: m.data, stamped=False, latched=True, depth=100)
    kin = RobotDescription(link.node, profile.robot_description).kinematics(
        profile.joint_states.names, profile.base_frame, profile.tool_frame, 30.0)
    reader = JointReader(profile.joint_states.names)
    link.subscribe("tool", JointState, profile.joint_states.topic,
                   lambda m: None if (j := reader(m)) is None else kin.forward(j[0])[0], depth=100000, fast=True)
    link.subscribe("speed", JointState, profile.joint_states.topic,  # the physics' own joint velocities
                   lambda m: None if (j := reader(m)) is None else float(np.linalg.norm(kin.twist(*j)[:3])),
                   depth=100000, fast=True)
    assert not link.wait_matched(["cmd", "tool", "speed"], 30.0)
    return link, kin


def _check_commands(profile, kin, commands: list[np.ndarray]) -> None:
    lim = profile.limits
    assert commands, "nothing reached the driver"
    cmds = np.array(commands)
    assert np.all(np.isfinite(cmds)), "a non-finite command reached the driver"
    kind = profile.command.interface
    if kind == "cartesian_pose":
        assert np.all(cmds[:, :3] >= np.array(lim.workspace_low) - 1e-6)
        assert np.all(cmds[:, :3] <= np.array(lim.workspace_high) + 1e-6)
        assert np.allclose(np.linalg.norm(cmds[:, 3:], axis=1), 1.0, atol=1e-6)
    elif kind == "servo_twist":
        assert np.max(np.abs(cmds)) <= lim.max_speed + 1e-6, np.max(np.abs(cmds))
    else:
        assert np.all(cmds >= kin.lower - 1e-9) and np.all(cmds <= kin.upper + 1e-9)
        reached = np.array([kin.forward(q)[0] for q in cmds])
        assert np.all(reached >= np.array(lim.workspace_low) - 0.01)
        assert np.all(reached <= np.array(lim.workspace_high) + 0.01)


def _measure_stop(env, probe) -> str | None:
    """Moves the arm fast, stops commanding it, and checks the stop from the tool speed the joint velocities give:
    held within 0.2 s, at rest within 1 s of the hold, no rebound (from its peak in the first 0.1 s the speed
    falls monotonically within 1 cm/s, over 20 ms: two periods of the streamed command) and no motion again.
    Returns what failed, or None."""
    env.reset()
    for _ in range(10):
        env.step(np.array([0.0, -1.0, 0.0, -1.0], np.float32))
    last = env.publish_times[-1]  # when the last command left (wall clock, as the probe's receive times)
    if not _wait_state(probe, "hold"):
        return "the watchdog never held"
    holds = [t for t, v in list(probe.streams["state"].items) if v == "hold" and t > last - 0.01]
    if not holds:
        return "no hold after the last command (the state was already 'hold')"
    hold_at = min(holds)
    time.sleep(1.5)
    speeds = [(t, v) for t, v in list(probe.streams["speed"].items) if t >= last - 0.2]  # a copy: it grows
    n = max(1, int(round(0.02 / np.median(np.diff([x for x, _ in speeds])))))
    ts = np.array([x for x, _ in speeds])[n - 1:]
    smooth = np.convolve([y for _, y in speeds], np.ones(n) / n, mode="valid")
    if smooth[ts <= last + 0.05].max() <= 0.1:
        return "not moving when the stream stopped"
    if hold_at - last >= 0.2:
        return f"held {hold_at - last:.3f} s after the last command"
    rest = ts[np.flatnonzero((smooth < 0.01) & (ts > hold_at))]
    if not len(rest) or rest[0] - hold_at >= 1.0:
        return f"not at rest 1 s after the hold ({smooth[-20:]})"
    after, t_after = smooth[ts >= hold_at], ts[ts >= hold_at] - hold_at
    peak = int(np.argmax(np.where(t_after < 0.1, after, -1.0)))
    rebound = float(np.max(after[peak:] - np.minimum.accumulate(after[peak:])))
    if rebound >= 0.01:
        return f"rebound {rebound:.3f} m/s; speed every 10 ms after the hold: " + \
            " ".join(f"{v:.3f}" for v in after[::max(1, n // 2)][:60])
    if not np.all(smooth[ts >= rest[0]] < 0.02):
        return "moved again after coming to rest"
    return None


def _wait_state(link, value: str, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        item = link.streams["state"].latest()
        if item and item[1] == value:
            return True
        time.sleep(0.005)
    return False


@pytest.mark.serial
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", PROFILES)
def test_the_safety_node_guards_every_profile(graph, tmp_path, name: str) -> None:
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl.robots.profile import load_profile

    path = profile_file(name, tmp_path)
    profile = load_profile(path)
    start_profile_graph(graph, path)
    wait_kinematics(graph)
    probe, kin = _command_probe(profile)
    env = RosArmEnv(profile=path, reset_service="", connect_timeout=60.0)
    try:
        env.reset()

        # 1. bad actions (first layer) and bad targets straight to the safety node (second layer)
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        @given(ACTIONS)
        def step_bad(action: list[float]) -> None:
            env.step(np.array(action, np.float32))

        step_bad()
        raw = probe.publisher("raw", PoseStamped, "policy/target_pose")
        assert not probe.wait_subscribed(["raw"], 10.0)
        publish_bad_targets(raw, profile.base_frame)
        time.sleep(0.3)
        _check_commands(profile, kin, [c for _, c in probe.streams["cmd"].items])

        # 2. the command stream stops while the arm moves fast: it comes to rest, without rebound. Measured again
        # (at most twice) when a measurement fails: on a loaded 2-core machine the processes' loops can starve
        # (a stalled twist stream halts Servo, as the real one does); one clean stop must pass every check.
        failures = []
        for _ in range(3):
            failures.append(_measure_stop(env, probe))
            if failures[-1] is None:
                break
        assert failures[-1] is None, failures

        # 3. the e-stop latches: the arm stays put under commands until reset; the env's periods meanwhile are held
        # (nothing recorded, not steps of the episode), and a reset waits for the person's reset of the e-stop
        env.reset()
        estop = probe.publisher("estop", Bool, "estop")
        assert not probe.wait_subscribed(["estop"], 10.0)
        estop.publish(Bool(data=True))
        assert _wait_state(probe, "estop")
        time.sleep(0.5)
        start = probe.streams["tool"].latest()[1]
        for _ in range(10):
            _, _, terminated, truncated, info = env.step(np.array([1.0, 1.0, -1.0, 1.0], np.float32))
            assert info.get("paused") and not (terminated or truncated), info
        assert env.steps == 0
        assert np.linalg.norm(probe.streams["tool"].latest()[1] - start) < 0.02
        assert probe.call(Trigger, "arm_safety/reset_estop").success
        reset_at = time.time()
        before = probe.streams["tool"].latest()[1]
        for _ in range(8):
            env.step(np.array([0.0, 0.0, 1.0, -1.0], np.float32))
        time.sleep(0.3)
        # commands flow again (the watchdog holds once they stop, so the latest state may already be "hold")
        assert any(v == "ok" and t > reset_at for t, v in list(probe.streams["state"].items))
        assert probe.streams["tool"].latest()[1][2] - before[2] > 0.02, "no motion after the reset"
        assert env.steps > 0 and not env.step(env.hold_action())[4].get("paused")
        _check_commands(profile, kin, [c for _, c in probe.streams["cmd"].items])

        estop.publish(Bool(data=True))
        assert _wait_state(probe, "estop")
        time.sleep(0.3)
        person = threading.Timer(1.5, lambda: probe.call(Trigger, "arm_safety/reset_estop"))
        person.start()
        t0 = time.monotonic()
        env.reset()  # waits for the reset of the e-stop (before: an error, and a crashed actor)
        person.join()
        assert time.monotonic() - t0 >= 1.4 and env.safety_state() != "estop"
    finally:
        env.close()
        probe.close()
    assert "command ignored" not in graph.log("arm_driver"), graph.log("arm_driver")[-2000:]
