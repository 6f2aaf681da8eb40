"""The project's launcher runs the YAML launch files: it starts the whole graph (namespace, params and remaps
applied), the robot env works against it, and Ctrl-C (SIGINT) stops every node. It fails like a ``robot-rl``
command: a node's refused configuration is one line and exit code 2, a stop signal exits 128 + its number."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from robot_rl.ros.launch import executable_path, load
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
    assert code == 128 + stop_signal, text  # as robot-rl train: 130 for Ctrl-C, 129 for a closed terminal
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
    assert code == 128 + signal.SIGTERM and "bag_recorder exited" not in text, text


def _refused_output(text: str, message: str) -> None:
    """One line naming the node and the refused value, once, and no traceback or C++ abort on the way."""
    assert text.count(message) == 1, text
    assert "Traceback" not in text and "terminate called" not in text, text


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("param", "message"), [
    ("profile:=nosuch", "arm_safety: profile 'nosuch': no such bundled profile"),
    ("watchdog_timeout:=abc", "arm_safety: Trying to set parameter 'watchdog_timeout' to 'abc'")],
    ids=["missing_profile", "parameter_type"])
def test_a_node_that_refuses_its_configuration_exits_2_with_one_line(domain: int, param: str, message: str) -> None:
    """Made alone (no launcher): the line on stderr, exit code 2. A missing profile is found after the node has
    started a subscription thread, whose C++ wait aborted the process at exit (SIGABRT) before."""
    started = time.monotonic()
    done = subprocess.run([executable_path("robot_rl", "arm_safety"), "--ros-args", "-p", param], env=ros_env(domain),
                          capture_output=True, text=True, timeout=45, cwd=ROOT)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(message), done.stderr
    _refused_output(done.stdout + done.stderr, message)
    assert time.monotonic() - started < 30


@pytest.mark.timeout(60)
@pytest.mark.parametrize("profile", ["nosuch", "bad_file"])
def test_a_refused_profile_stops_the_launch_with_exit_code_2(domain: int, tmp_path: Path, profile: str) -> None:
    """A mistyped profile name, or a profile file with a field that does not exist: the launcher repeats the node's
    one line and exits 2 at once (the graph is stopped)."""
    if profile == "bad_file":
        bad = tmp_path / "my_arm.yaml"
        text = (ROOT / "robot_rl/robots/profiles/ros2_control_joint_position.yaml").read_text()
        bad.write_text(text + "grippr: {joints: [finger_joint1]}\n")  # a mistyped field
        profile, message = str(bad), "arm_safety: unknown config field(s) profile my_arm.yaml.grippr"
    else:
        message = "arm_safety: profile 'nosuch': no such bundled profile"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "robot_rl.cli", "launch", str(LAUNCH / "robot_arm.launch.yaml"),
                           f"profile:={profile}"], env=ros_env(domain), capture_output=True, text=True, timeout=45,
                          cwd=ROOT)
    text = done.stdout + done.stderr
    assert done.returncode == 2, text
    assert f"robot-rl launch: error: {message}" in done.stderr, text
    _refused_output(text, message)
    assert "stopped: {'arm_safety': 2}" in text, text
    assert time.monotonic() - started < 30, text


@pytest.mark.timeout(90)
@pytest.mark.parametrize("stop_signal", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_stop_signal_stops_every_node_and_exits_as_train_does(domain: int, tmp_path: Path,
                                                                 stop_signal: int) -> None:
    """A closed terminal (SIGHUP) or a scheduler (SIGTERM) stops a running graph: every node exits cleanly, and the
    launcher exits 128 + the signal's number (129, 143), as robot-rl train does."""
    from std_msgs.msg import String

    from robot_rl.ros.link import RosLink

    launch_file = tmp_path / "two.launch.yaml"
    launch_file.write_text("launch:\n"
                           "- node: {pkg: robot_rl, exec: arm_safety, name: arm_safety, namespace: sig_arm}\n"
                           "- node: {pkg: robot_rl, exec: car_safety, name: car_safety, namespace: sig_car}\n")
    log = open(tmp_path / "launch.log", "w")  # noqa: SIM115
    launcher = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "launch", str(launch_file)],
                                env=ros_env(domain), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    link = RosLink("launch_probe")
    try:
        for ns in ("sig_arm", "sig_car"):  # each node is up once its latched state arrives
            link.subscribe(ns, String, f"/{ns}/safety_state", lambda m: m.data, stamped=False, latched=True)
        deadline = time.monotonic() + 60
        while not all(link.streams[ns].latest() for ns in ("sig_arm", "sig_car")) and time.monotonic() < deadline:
            assert launcher.poll() is None, (tmp_path / "launch.log").read_text()
            time.sleep(0.1)
        ready = all(link.streams[ns].latest() for ns in ("sig_arm", "sig_car"))
    finally:
        link.close()
        launcher.send_signal(stop_signal)
        code = launcher.wait(timeout=30)
        log.close()
    text = (tmp_path / "launch.log").read_text()
    assert ready and code == 128 + stop_signal, text
    pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", text)]
    assert len(pids) == 2 and not [p for p in pids if _alive(p)], text
    stopped = ast.literal_eval(re.search(r"stopped: (\{.*\})", text).group(1))
    assert stopped == {"arm_safety": 0, "car_safety": 0}, text  # stopped by SIGINT in time: no SIGTERM/SIGKILL
