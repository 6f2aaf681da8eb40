"""The project's launcher runs the YAML launch files: it starts the whole graph (namespace, params and remaps
applied), the robot env works against it, and Ctrl-C (SIGINT) stops every node."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from robot_rl.ros.launch import load
from tests.ros.graph import ROOT, ros_env

pytestmark = pytest.mark.ros

LAUNCH = ROOT / "launch"


def test_launch_files_parse() -> None:
    arm = load(LAUNCH / "sim_arm.launch.yaml", {"image_size": "64"})
    assert [p.name for p in arm] == ["arm_hardware", "arm_controller", "arm_safety"]
    hw = arm[0].cmd
    assert hw[hw.index("--ros-args"):][:5] == ["--ros-args", "-r", "__node:=arm_hardware", "-r", "__ns:=/arm"]
    assert "image_size:=64" in hw and "estop:=/estop" in arm[2].cmd
    assert "limits.workspace_low:=[0.3, -0.25, 0.015]" in arm[2].cmd
    stack = load(LAUNCH / "sim_arm_stack.launch.yaml", {"rt_priority": "50"})
    assert [p.name for p in stack] == ["arm_stack"]
    cmd = stack[0].cmd
    assert cmd[1:3] == ["--rt-priority", "50"] and not any(a.startswith("__node:=") for a in cmd)
    assert "physics_dt:=0.001" in cmd and "estop:=/estop" in cmd and "gains.kp_pos:=400.0" in cmd
    car = load(LAUNCH / "sim_car.launch.yaml")
    assert [p.name for p in car] == ["car_hardware", "drive_controller", "car_safety"]
    actor = load(LAUNCH / "actor.launch.yaml", {"run_dir": "runs/x", "index": "2"})
    assert actor[0].cmd[1:5] == ["--run-dir", "runs/x", "--index", "2"]
    with pytest.raises(ValueError, match="required"):
        load(LAUNCH / "actor.launch.yaml")
    with pytest.raises(ValueError, match="unknown launch arguments"):
        load(LAUNCH / "sim_car.launch.yaml", {"nope": "1"})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("launch_file", "processes", "stop_signal"),
                         [("sim_arm.launch.yaml", 3, signal.SIGINT), ("sim_arm_stack.launch.yaml", 1, signal.SIGHUP)])
def test_launcher_starts_and_stops_the_arm_graph(domain: int, tmp_path: Path, launch_file: str,
                                                 processes: int, stop_signal: int) -> None:
    """Ctrl-C, and a closed terminal (SIGHUP), stop every node of the graph."""
    from std_msgs.msg import Bool

    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl.ros.link import RosLink

    log = open(tmp_path / "launch.log", "w")  # noqa: SIM115
    launcher = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "launch", str(LAUNCH / launch_file),
                                 "namespace:=arm_t"], env=ros_env(domain), stdout=log, stderr=subprocess.STDOUT,
                                cwd=ROOT)
    env = link = None
    try:
        env = RosArmEnv(namespace="/arm_t", reset_service="arm_hardware/reset", connect_timeout=90.0)
        obs, _ = env.reset()
        for _ in range(5):
            obs, *_ = env.step(np.array([0.0, 0.0, -1.0, -1.0], np.float32))
        assert env.safety_state() == "ok"
        link = RosLink("launch_probe")
        estop = link.publisher("estop", Bool, "/estop")  # the launch file remaps the safety node's estop here
        deadline = time.monotonic() + 10.0
        while env.safety_state() != "estop" and time.monotonic() < deadline:
            estop.publish(Bool(data=True))
            time.sleep(0.1)
        assert env.safety_state() == "estop"
    finally:
        if env is not None:
            env.close()
        if link is not None:
            link.close()
        text = (tmp_path / "launch.log").read_text()
        pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", text)]
        launcher.send_signal(stop_signal)
        code = launcher.wait(timeout=30)
        log.close()
    text = (tmp_path / "launch.log").read_text()
    assert len(pids) == processes, text
    assert code == 0, text
    assert not [p for p in pids if _alive(p)], text


def test_ros_index_registers_the_package(tmp_path: Path) -> None:
    """The ament index layout `ros2 launch robot_rl <file>` / `ros2 run robot_rl <exec>` resolve through."""
    from robot_rl.ros.ament import write_index
    from robot_rl.ros.launch import EXECUTABLES

    prefix = write_index(tmp_path / "ament")
    assert (prefix / "share/ament_index/resource_index/packages/robot_rl").is_file()
    assert (prefix / "share/robot_rl/package.xml").read_text().count("<name>robot_rl</name>") == 1
    assert {p.name for p in (prefix / "share/robot_rl/launch").iterdir()} >= {
        "sim_arm.launch.yaml", "sim_car.launch.yaml", "actor.launch.yaml"}
    for exe in EXECUTABLES:
        assert os.access(prefix / "lib/robot_rl" / exe, os.X_OK), exe


def test_rt_priority_flag_is_taken_out_of_a_node_command_line() -> None:
    from robot_rl.ros.node import pop_rt_priority

    assert pop_rt_priority(["exe", "--rt-priority", "50", "--ros-args", "-p", "a:=1"]) == (
        50, ["exe", "--ros-args", "-p", "a:=1"])
    assert pop_rt_priority(["exe", "--rt-priority", "0"]) == (0, ["exe"])
    assert pop_rt_priority(["exe", "--ros-args", "--rt-priority", "5"])[0] == 0  # a ROS argument, not ours
    for bad in (["exe", "--rt-priority"], ["exe", "--rt-priority", "100"], ["exe", "--rt-priority", "x"]):
        with pytest.raises(SystemExit, match="1-99"):
            pop_rt_priority(bad)


@pytest.mark.timeout(120)
def test_the_recording_launch_file_runs_under_the_launcher(domain: int, tmp_path: Path) -> None:
    """launch/record_arm.launch.yaml starts its bag recorder (an executable the launcher and the ament index know)
    and stops it cleanly."""
    log = open(tmp_path / "launch.log", "w")  # noqa: SIM115
    launcher = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "launch", str(LAUNCH / "record_arm.launch.yaml"),
                                 f"record_dir:={tmp_path / 'bags'}"], env=ros_env(domain), stdout=log,
                                stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while "started bag_recorder" not in (tmp_path / "launch.log").read_text() and time.monotonic() < deadline:
            assert launcher.poll() is None, (tmp_path / "launch.log").read_text()
            time.sleep(0.2)
        time.sleep(3.0)
        assert launcher.poll() is None, (tmp_path / "launch.log").read_text()
    finally:
        launcher.send_signal(signal.SIGTERM)
        code = launcher.wait(timeout=30)
        log.close()
    text = (tmp_path / "launch.log").read_text()
    assert code == 0 and "bag_recorder exited" not in text, text
