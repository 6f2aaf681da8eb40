"""Car profiles against robot_rl's emulation of each driver (diff_drive_controller; the F1TENTH gym bridge's
Ackermann drive) on the sim car, every node in its own process: a pure-pursuit driver on the env's map pose laps the
track through each profile; bad actions never reach the driver, the watchdog stops the car, the e-stop latches, a
stale diff-drive command is ignored as the real controller ignores it; a wrong profile fails at start naming the
field."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_rl.config import ConfigError

pytestmark = pytest.mark.ros

CAR_PROFILES = ("diff_drive", "ackermann")

BAD = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e6, 1e6))
ACTIONS = st.lists(BAD, min_size=2, max_size=2)


def start_car_graph(graph, profile: str) -> None:
    graph.start("car_hardware", "-p", f"profile:={profile}")
    graph.start("car_safety", "-p", f"profile:={profile}")


def drive_lap(env, max_steps: int = 400) -> dict:
    """Pure pursuit on the env's map pose (what a localiser gives a real car) until the episode ends."""
    from robot_rl.robots.track import pure_pursuit

    lim = env.profile.limits
    info: dict = {}
    for _ in range(max_steps):
        xy, yaw = env.pose()
        action = pure_pursuit(env.track, xy, yaw, env.track.project(xy)[0], lim.max_speed, lim.max_yaw_rate)
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return info


def _command_probe(profile):
    """A node recording the driver's commands as (speed, yaw rate or steering angle) and the odometry's speed."""
    from nav_msgs.msg import Odometry
    from std_msgs.msg import String

    from robot_rl.ros.link import RosLink

    link = RosLink("car_probe")
    if profile.command.interface == "diff_drive":
        from geometry_msgs.msg import TwistStamped

        link.subscribe("cmd", TwistStamped, profile.command.topic,
                       lambda m: (m.twist.linear.x, m.twist.angular.z), stamped=False, depth=100000)
    else:
        from ackermann_msgs.msg import AckermannDriveStamped

        link.subscribe("cmd", AckermannDriveStamped, profile.command.topic,
                       lambda m: (m.drive.speed, m.drive.steering_angle), stamped=False, depth=100000)
    link.subscribe("speed", Odometry, profile.odom.topic, lambda m: math.hypot(m.twist.twist.linear.x,
                                                                              m.twist.twist.angular.z), depth=1000)
    link.subscribe("state", String, "safety_state", lambda m: m.data, stamped=False, latched=True, depth=100)
    assert not link.wait_matched(["cmd", "speed", "state"], 30.0)
    return link


def _check_commands(profile, commands) -> None:
    cmds = np.array(commands)
    assert len(cmds) and np.all(np.isfinite(cmds)), "nothing, or a non-finite command, reached the driver"
    assert np.max(np.abs(cmds[:, 0])) <= profile.limits.max_speed + 1e-6
    bound = profile.limits.max_yaw_rate if profile.command.interface == "diff_drive" else \
        profile.command.max_steering_angle
    assert np.max(np.abs(cmds[:, 1])) <= bound + 1e-6


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", CAR_PROFILES)
def test_a_lap_and_the_safety_layers_through_each_car_profile(graph, name: str) -> None:
    from geometry_msgs.msg import Twist
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    from robot_rl.envs.ros_car_env import RosCarEnv

    profile = f"rehearsal/{name}"
    start_car_graph(graph, profile)
    env = RosCarEnv(profile=profile, reset_service="car_hardware/reset", connect_timeout=60.0)
    probe = None
    try:
        env.reset(seed=0)
        probe = _command_probe(env.profile)
        info = drive_lap(env)
        assert info["is_success"] and info["collisions"] == 0, (info, graph.log("car_safety")[-2000:])
        assert info["obs_skew"] < 0.1, info  # the scan (40 Hz) read beside the odometry

        # bad actions (first layer) and bad twists straight to the safety node (second layer)
        env.reset()

        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        @given(ACTIONS)
        def step_bad(action: list[float]) -> None:
            env.step(np.array(action, np.float32))

        step_bad()
        raw = probe.publisher("raw", Twist, "policy/cmd_vel")
        assert not probe.wait_subscribed(["raw"], 10.0)
        for v, w in [(math.nan, 0.0), (math.inf, 1.0), (50.0, -80.0), (-1e9, 1e9)]:
            msg = Twist()
            msg.linear.x, msg.angular.z = v, w
            raw.publish(msg)
            time.sleep(0.02)
        time.sleep(0.3)
        _check_commands(env.profile, [c for _, c in probe.streams["cmd"].items])

        # the watchdog: the policy stops commanding a moving car; a stop reaches the driver and the car halts
        env.reset()
        for _ in range(15):
            env.step(np.array([0.5, 0.0], np.float32))
        last = env.publish_times[-1]
        time.sleep(1.5)
        stops = [t for t, (v, _) in list(probe.streams["cmd"].items) if t > last and v == 0.0]
        assert stops and stops[0] - last < 0.25, "no stop command within 0.25 s of the last policy command"
        assert probe.streams["speed"].latest()[1] < 0.05, probe.streams["speed"].latest()
        assert probe.streams["state"].latest()[1] == "hold"

        # the e-stop latches: the car stays put under commands until reset
        estop = probe.publisher("estop", Bool, "estop")
        assert not probe.wait_subscribed(["estop"], 10.0)
        estop.publish(Bool(data=True))
        deadline = time.monotonic() + 3.0
        while probe.streams["state"].latest()[1] != "estop" and time.monotonic() < deadline:
            time.sleep(0.01)
        start, _ = env.pose()
        for _ in range(10):
            env.step(np.array([1.0, 0.0], np.float32))
        assert np.linalg.norm(env.pose()[0] - start) < 0.02
        assert probe.call(Trigger, "car_safety/reset_estop").success
        for _ in range(10):
            env.step(np.array([0.5, 0.0], np.float32))
        assert np.linalg.norm(env.pose()[0] - start) > 0.1, "no motion after the e-stop reset"
    finally:
        env.close()
        if probe is not None:
            probe.close()


@pytest.mark.timeout(180)
def test_the_emulated_diff_drive_controller_ignores_stale_commands(graph) -> None:
    """diff_drive_controller drops a TwistStamped whose age is cmd_vel_timeout (0.5 s) or more: the emulation
    does, so robot_rl's stamping is what makes commands count."""
    from geometry_msgs.msg import TwistStamped
    from nav_msgs.msg import Odometry

    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import to_stamp

    graph.start("car_hardware", "-p", "profile:=rehearsal/diff_drive")
    link = RosLink("stale_probe")
    try:
        link.subscribe("speed", Odometry, "/diff_drive_controller/odom", lambda m: m.twist.twist.linear.x)
        pub = link.publisher("cmd", TwistStamped, "/diff_drive_controller/cmd_vel")
        assert not link.wait_for(["speed"], 90.0) and not link.wait_subscribed(["cmd"], 30.0)

        def drive(age: float) -> float:
            for _ in range(10):
                msg = TwistStamped()
                msg.header.stamp = to_stamp(time.time() - age)
                msg.twist.linear.x = 0.5
                pub.publish(msg)
                time.sleep(0.05)
            return link.streams["speed"].latest()[1]

        assert abs(drive(age=0.6)) < 0.01  # stale: ignored
        assert drive(age=0.0) > 0.3  # fresh: the car drives
    finally:
        link.close()


@pytest.mark.timeout(180)
def test_a_wrong_car_profile_fails_at_start_naming_the_field(graph) -> None:
    from robot_rl.robots.profile import load_profile, with_overrides
    from robot_rl.ros.link import RosLink
    from robot_rl.ros.profile_check import ProfileCheck

    graph.start("car_hardware", "-p", "profile:=rehearsal/diff_drive")
    good = load_profile("rehearsal/diff_drive")
    mistakes = {
        "odom.topic": {"odom": {"topic": "/scan"}},  # a topic of another type
        "scan.topic": {"scan": {"topic": "/lidar/scan"}},  # nobody publishes it
        "base_frame": {"base_frame": "base_footprint"},  # a frame TF does not have
        "command.controller": {"command": {"controller": "ackermann_steering_controller"}},  # not loaded
        "command.topic": {"command": {"topic": "/cmd_vel"}},  # nobody subscribes
    }
    link = RosLink("car_check_probe")
    try:
        ProfileCheck(link.node, good, timeout=60.0).car()  # the good profile passes
        for field, change in mistakes.items():
            with pytest.raises(ConfigError) as info:
                ProfileCheck(link.node, with_overrides(good, change), timeout=4.0).car()
            assert f": {field}: " in str(info.value), (field, str(info.value))
    finally:
        link.close()
