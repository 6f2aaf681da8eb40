"""The guide "Bring your own robot" runs as written: its arm profile files, extracted from the page, pass the live
graph check against robot_rl's emulated driver, the rehearsal launch file starts the graph from them, and an
observation policy picks the cube through them; its car profile does the same on the emulated car with a lap of
the track; every node in its own process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ros.experts import run_episode
from tests.ros.graph import ROOT, ros_env
from tests.ros.test_profiles import wait_kinematics

pytestmark = pytest.mark.ros

GUIDE = ROOT / "docs" / "guides" / "bring-your-own-robot.md"


def guide_files(folder: Path) -> dict[str, Path]:
    """The page's YAML blocks whose first line names a file (``# my_arm.yaml: ...``), written into ``folder``."""
    out = {}
    for block in re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), re.S):
        name = re.match(r"# (\S+\.yaml)", block)
        if name:
            out[name.group(1)] = folder / name.group(1)
            out[name.group(1)].write_text(block)
    return out


@pytest.mark.timeout(240)
def test_the_guide_profiles_drive_the_emulated_driver(graph, tmp_path) -> None:
    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl.robots.profile import load_profile
    from robot_rl.ros.link import RosLink
    from robot_rl.ros.profile_check import ProfileCheck

    files = guide_files(tmp_path)
    assert set(files) == {"my_arm.yaml", "my_arm_rehearsal.yaml", "my_car.yaml"}, files
    rehearsal = str(files["my_arm_rehearsal.yaml"])
    # the launch line of the page, as printed by the launcher: the two nodes with the profile file
    printed = subprocess.run([sys.executable, "-m", "robot_rl.cli", "launch",
                              str(ROOT / "launch/rehearse_arm.launch.yaml"), f"profile:={rehearsal}", "--print"],
                             capture_output=True, text=True, timeout=60, env=ros_env(graph.domain))
    assert printed.returncode == 0 and printed.stdout.count(f"profile:={rehearsal}") == 2, printed
    graph.start("arm_driver", "-p", f"profile:={rehearsal}")
    graph.start("arm_safety", "-p", f"profile:={rehearsal}")
    wait_kinematics(graph)
    link = RosLink("guide_check")
    try:
        for name in ("my_arm.yaml", "my_arm_rehearsal.yaml"):  # the robot's own profile fits the emulation too
            ProfileCheck(link.node, load_profile(str(files[name])), timeout=20.0).arm()
    finally:
        link.close()
    env = RosArmEnv(profile=rehearsal, reset_service="arm_driver/reset", connect_timeout=60.0)
    try:
        results = [run_episode(env, seed) for seed in range(2)]
    finally:
        env.close()
    assert all(ok for ok, _ in results), (results, graph.log("arm_safety")[-2000:])
    assert load_profile(str(files["my_arm.yaml"])).success.source == "key"


@pytest.mark.timeout(180)
def test_the_guide_car_profile_drives_the_emulated_car(graph, tmp_path) -> None:
    from robot_rl.envs.ros_car_env import RosCarEnv
    from tests.ros.test_car_profiles import drive_lap

    car = str(guide_files(tmp_path)["my_car.yaml"])
    for launch in ("rehearse_car", "robot_car"):  # the page's launch lines pass the profile on to their nodes
        printed = subprocess.run([sys.executable, "-m", "robot_rl.cli", "launch",
                                  str(ROOT / f"launch/{launch}.launch.yaml"), f"profile:={car}", "--print"],
                                 capture_output=True, text=True, timeout=60, env=ros_env(graph.domain))
        assert printed.returncode == 0 and printed.stdout.count(f"profile:={car}") == 2 - (launch == "robot_car"), \
            printed
    graph.start("car_hardware", "-p", f"profile:={car}")
    graph.start("car_safety", "-p", f"profile:={car}")
    env = RosCarEnv(profile=car, reset_service="car_hardware/reset", connect_timeout=60.0)  # checks the profile
    try:
        env.reset()
        info = drive_lap(env)
    finally:
        env.close()
    assert info["is_success"] and info["collisions"] == 0, info
