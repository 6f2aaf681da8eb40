"""Robot profiles against robot_rl's emulation of each driver, every node in its own process: a PickCube policy
acting on the observation picks the cube through each arm profile's command interface, and a wrong profile fails at
start with one message naming the field, before anything moves."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from robot_rl.config import ConfigError
from tests.ros.experts import run_episode
from tests.ros.graph import Graph, ros_env

pytestmark = pytest.mark.ros

ARM_PROFILES = {
    "ros2_control_joint_position": {},
    "joint_trajectory": {"command": {"interface": "joint_trajectory",
                                     "topic": "/joint_trajectory_controller/joint_trajectory",
                                     "controller": "joint_trajectory_controller"}},
    "franka_fr3_cartesian": {},
    "ur5e_servo": {},
    "parallel_gripper": {"gripper": {"interface": "parallel_action",
                                     "command": "/gripper_controller/gripper_cmd", "command_scale": 0.5}},
}
"""Bundled rehearsal profiles, plus the generic one driving a joint trajectory controller instead, and with a
parallel_gripper_controller (ParallelGripperCommand) instead of its forward gripper controller."""


def profile_file(name: str, tmp_path) -> str:
    """The rehearsal profile of ``name`` (with its ARM_PROFILES overrides) as a YAML file the nodes and env read."""
    import yaml

    from robot_rl.config import to_dict
    from robot_rl.robots.profile import load_profile, with_overrides

    base = "ros2_control_joint_position" if name in ("joint_trajectory", "parallel_gripper") else name
    profile = with_overrides(load_profile(f"rehearsal/{base}"), ARM_PROFILES[name])
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(to_dict(profile)))
    return str(path)


def start_profile_graph(graph: Graph, profile: str, *driver_args: str) -> None:
    graph.start("arm_driver", "-p", f"profile:={profile}", *driver_args)
    graph.start("arm_safety", "-p", f"profile:={profile}")


def wait_kinematics(graph: Graph, timeout: float = 60.0) -> None:
    """Until the safety node has built the URDF kinematics (it then forwards commands)."""
    deadline = time.monotonic() + timeout
    while "kinematics of" not in graph.log("arm_safety"):
        assert all(graph.alive().values()), {n: graph.log(n)[-2000:] for n in graph.procs}
        assert time.monotonic() < deadline, graph.log("arm_safety")
        time.sleep(0.1)


@contextmanager
def running_profile(domain: int, folder: Path, profile: str, *driver_args: str) -> Iterator[Graph]:
    """The emulated driver of ``profile`` and the safety node on ``domain``, ready (kinematics built), until the
    block ends: for scripts, which have no ``graph`` fixture."""
    graph = Graph(domain, folder)
    start_profile_graph(graph, profile, *driver_args)
    try:
        wait_kinematics(graph)
        yield graph
    finally:
        graph.stop()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", list(ARM_PROFILES))
def test_an_observation_policy_picks_the_cube_through_each_profile(graph, tmp_path, name: str) -> None:
    from robot_rl.envs.ros_env import RosArmEnv

    profile = profile_file(name, tmp_path)
    start_profile_graph(graph, profile)
    wait_kinematics(graph)
    env = RosArmEnv(profile=profile, reset_service="arm_driver/reset", connect_timeout=60.0)
    try:
        results = [run_episode(env, seed) for seed in range(3)]
        state = env.reset()[0]["state"]
        rejections = dict(env.rejections)
    finally:
        env.close()
    assert all(ok for ok, _ in results), (results, rejections, graph.log("arm_safety")[-2000:])
    # the observation is built from joint states, TF and the URDF only: at home, at rest (the watchdog's stop through
    # the emulated trajectory controller moves the tool at up to 2 cm/s), gripper open
    assert np.allclose(state[:3], env.cfg.home_pos, atol=0.005) and np.linalg.norm(state[7:10]) < 0.02, state
    assert state[10] > 0.07, state
    log = graph.log("arm_driver")
    assert "command ignored" not in log, log[-2000:]


@pytest.mark.timeout(240)
def test_a_profile_camera_is_read_through_the_camera_rig(graph, tmp_path) -> None:
    """A profile's camera is a ROS 2 camera of robot_rl.cameras: its frames (resized) reach obs["pixels"], and its
    CameraInfo is part of the start-up check."""
    import yaml

    from robot_rl.config import to_dict
    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl.robots.profile import load_profile, with_overrides

    camera = {"name": "wrist", "source": "ros", "topic": "/wrist_camera/color/image_raw", "resize": [24, 24]}
    profile = with_overrides(load_profile("rehearsal/ros2_control_joint_position"), {"cameras": [camera]})
    path = tmp_path / "with_camera.yaml"
    path.write_text(yaml.safe_dump(to_dict(profile)))
    start_profile_graph(graph, str(path), "-p", "image_size:=32")
    wait_kinematics(graph)
    env = RosArmEnv(profile=str(path), reset_service="arm_driver/reset", connect_timeout=60.0)
    try:
        assert env.observation_space["pixels"]["wrist"].shape == (24, 24, 3)
        obs, _ = env.reset()
        frames = [obs["pixels"]["wrist"]]
        for _ in range(5):
            obs, *_ = env.step(np.array([0.0, 0.0, -1.0, -1.0], np.float32))
            frames.append(obs["pixels"]["wrist"])
    finally:
        env.close()
    assert all(f.shape == (24, 24, 3) and f.dtype == np.uint8 and f.std() > 1.0 for f in frames)
    assert np.abs(frames[-1].astype(int) - frames[0]).mean() > 1.0  # the wrist camera moved with the arm


@pytest.mark.timeout(240)
def test_a_wrong_profile_fails_at_start_naming_the_field(graph, tmp_path) -> None:
    from robot_rl.robots.profile import load_profile, with_overrides
    from robot_rl.ros.link import RosLink
    from robot_rl.ros.profile_check import ProfileCheck

    profile = profile_file("ros2_control_joint_position", tmp_path)
    graph.start("arm_driver", "-p", f"profile:={profile}", "-p", "inactive_controllers:=['gripper_controller']")
    good = load_profile(profile)
    mistakes = {
        "wrench.topic": {"wrench": {"topic": "/joint_states", "frame": "tool0"}},  # a topic of another type
        "tool_frame": {"tool_frame": "tool_flange"},  # a frame TF (and the URDF) does not have
        "joint_states.names": {"joint_states": {"names": ["joint1", "joint2", "joint3", "joint4", "joint5",
                                                          "joint6", "joint_7"]}},
        "command.controller": {"command": {"controller": "joint_group_position_controller"}},  # not loaded
        "gripper.controller": {},  # loaded but inactive (the driver lists it so)
        "objects[0].frame": {"objects": [{"name": "cube", "frame": "cube_tag"}]},
        "command.topic": {"command": {"topic": "/position_controller/commands"}},  # nobody subscribes
    }
    link = RosLink("check_probe")
    try:
        for field, change in mistakes.items():
            with pytest.raises(ConfigError) as info:
                ProfileCheck(link.node, with_overrides(good, change), timeout=4.0).arm()
            assert f": {field}: " in str(info.value), (field, str(info.value))
    finally:
        link.close()
    message = str(info.value)
    assert message.startswith(f"profile {good.name}: command.topic: nobody subscribes"), message

    # robot-rl robot check: every wrong field at once, exit code 2 (the checks after a failed one wait 2 s each)
    several = {"tool_frame": "tool_flange", "command": {"controller": "joint_group_position_controller"},
               "wrench": {"topic": "/joint_states", "frame": "tool0"}}
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "robot_rl.cli", "robot", "check", profile, "--timeout", "4",
                          "--overrides", json.dumps(several)], env=ros_env(graph.domain), capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    for field in ("tool_frame", "command.controller", "wrench.topic", "gripper.controller", "safety node"):
        assert f": {field}: " in run.stderr, (field, run.stderr)
    assert "nobody publishes /safety_state" in run.stderr, run.stderr
    assert time.monotonic() - started < 60, time.monotonic() - started

    # robot-rl train with the wrong profile: exit code 2 and that one message, before any process starts
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"extends: {profile}\ntool_frame: tool_flange\n")
    run = subprocess.run(
        [sys.executable, "-m", "robot_rl.cli", "train", "pickcube_ros", "--env.kwargs",
         f'{{"profile": "{bad}", "reset_service": "arm_driver/reset"}}', "--runs-dir", str(tmp_path / "runs")],
        env=ros_env(graph.domain), capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert "tool_frame: frame 'tool_flange' is not in the URDF" in run.stderr, run.stderr[-2000:]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_profiles_load_and_name_their_fields() -> None:
    from robot_rl.robots.profile import bundled_profiles, load_profile, with_overrides

    for name in bundled_profiles():
        load_profile(name)
    good = load_profile("ur5e_servo")
    with pytest.raises(ConfigError, match="command.interface: 'twist' is not one of"):
        with_overrides(good, {"command": {"interface": "twist"}})
    with pytest.raises(ConfigError, match="unknown config field"):
        with_overrides(good, {"comand": {}})
    with pytest.raises(ConfigError, match="no such bundled profile"):
        load_profile("ur10_servo")
    with pytest.raises(ConfigError, match="kind 'car', where a profile of kind 'arm' is needed"):
        load_profile("diff_drive", "arm")
    with pytest.raises(ConfigError, match="command.wheelbase and command.max_steering_angle"):
        with_overrides(load_profile("ackermann"), {"command": {"wheelbase": 0.0}})



def test_none_clears_what_the_base_profile_had(tmp_path) -> None:
    """One merge rule for ``extends`` and overrides: mappings merge, lists and ``none`` replace; a section with
    ``interface: none`` keeps nothing of the base's section (an arm without a gripper needs no ``joints: []``)."""
    from robot_rl.robots.profile import load_profile, with_overrides

    mine = tmp_path / "no_gripper.yaml"
    mine.write_text("extends: ros2_control_joint_position\ngripper: {interface: none}\nwrench: none\n"
                    "joint_states: {topic: /arm/joint_states}\n")
    profile = load_profile(str(mine))
    base = load_profile("ros2_control_joint_position")
    assert profile.gripper == type(base.gripper)(interface="none")  # no finger joints, no controller left
    assert profile.wrench == type(base.wrench)()
    assert profile.joint_states.names == base.joint_states.names  # a mapping merges: only the topic changed
    assert profile.joint_states.topic == "/arm/joint_states"
    cams = with_overrides(load_profile("rehearsal/ur5e_servo"), {"cameras": [{"name": "wrist", "source": "ros",
                                                                              "topic": "/wrist/image_raw"}]})
    assert len(cams.cameras) == 1 and len(with_overrides(cams, {"cameras": "none"}).cameras) == 0
    assert with_overrides(cams, {"objects": []}).objects == ()  # a list replaces
    shown = subprocess.run([sys.executable, "-m", "robot_rl.cli", "robot", "show", str(mine)], capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "gripper:\n  interface: none\n  joints: []\n" in shown.stdout, shown.stdout
    bad = subprocess.run([sys.executable, "-m", "robot_rl.cli", "robot", "show", "ur10_servo"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such bundled profile" in bad.stderr


def test_the_real_robot_path_never_imports_the_sim() -> None:
    """The robot envs, the safety node with a profile, the profile check and the kinematics load with robot_rl_sim
    (and MuJoCo's task models) made unimportable: a real robot's path needs neither."""
    code = """
import sys
sys.modules["robot_rl_sim"] = None  # any import of it raises ImportError
import robot_rl.envs.ros_env, robot_rl.envs.ros_sources, robot_rl.ros.profile_check, robot_rl.robots.kinematics
import robot_rl_controllers.ros_safety_node, robot_rl_controllers.arm_outputs, robot_rl_controllers.car_outputs
from robot_rl.robots.profile import bundled_profiles, load_profile
from robot_rl.envs.ros_env import RosArmEnv
from robot_rl.envs.ros_car_env import RosCarEnv
for name in bundled_profiles():
    if not name.startswith("rehearsal/"):  # spaces only: no ROS connection before the first reset
        (RosCarEnv if load_profile(name).kind == "car" else RosArmEnv)(profile=name)
print("ok", sorted(m for m, v in sys.modules.items() if m.startswith("robot_rl_sim") and v is not None))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok []", (out.stdout, out.stderr[-2000:])
