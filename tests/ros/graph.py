"""Starting ROS 2 node processes for the tests: each test gets its own ROS_DOMAIN_ID and localhost-only
discovery, every node runs in its own process (real rclpy over Fast DDS) and is stopped with SIGINT."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODES = {
    "arm_hardware": "robot_rl_sim.ros_arm_node:main",
    "car_hardware": "robot_rl_sim.ros_car_node:main",
    "arm_controller": "robot_rl_controllers.ros_arm_controller:main",
    "drive_controller": "robot_rl_controllers.ros_drive_controller:main",
    "arm_safety": "robot_rl_controllers.ros_safety_node:main_arm",
    "car_safety": "robot_rl_controllers.ros_safety_node:main_car",
    "arm_stack": "robot_rl_sim.ros_arm_stack:main",
    "arm_driver": "robot_rl_sim.ros_arm_driver:main",
    "dds_echo": "robot_rl.ros.echo:main",  # the DDS floor for the latency benchmark
    "bag_recorder": "robot_rl.ros.bag:main",
}
# Under pytest-xdist each worker takes its own residue class of domains, so two tests running at once never share one.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
_WORKERS = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
_next_domain = [(os.getpid() % 50) * _WORKERS]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (no orphaned nodes after a crash)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def ros_env(domain: int) -> dict[str, str]:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"), PYTHONUNBUFFERED="1")
    env.pop("ROS_LOCALHOST_ONLY", None)
    return env


def new_domain() -> int:
    """A ROS_DOMAIN_ID not used by another test of this session or by a test on another xdist worker (0-232 are
    valid; this takes 100-229)."""
    _next_domain[0] += 1
    slots = 130 // _WORKERS
    return 100 + (_next_domain[0] % slots) * _WORKERS + _WORKER


class Graph:
    """Node processes on one domain; ``start(name, *ros_args)``; ``stop()`` sends SIGINT and waits."""

    def __init__(self, domain: int, log_dir: Path) -> None:
        self.domain, self.log_dir = domain, log_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, node: str, *ros_args: str, args: tuple[str, ...] = (), name: str = "") -> subprocess.Popen:
        """Starts ``node`` with ``args`` (e.g. ``--rt-priority 50``) and ``--ros-args *ros_args``; ``name``: the
        process's key in ``procs`` and its log's name (default ``node``; a second process of the same node)."""
        module, func = NODES[node].split(":")
        key = name or node
        code = f"import sys; from {module} import {func}; sys.exit({func}())"
        argv = [sys.executable, "-c", code, *args] + (["--ros-args", *ros_args] if ros_args else [])
        log = open(self.log_dir / f"{key}.log", "w")  # noqa: SIM115  (closed with the process)
        proc = subprocess.Popen(argv, env=ros_env(self.domain), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                preexec_fn=_die_with_parent)
        self.procs[key] = proc
        return proc

    def alive(self) -> dict[str, bool]:
        return {n: p.poll() is None for n, p in self.procs.items()}

    def log(self, node: str) -> str:
        return (self.log_dir / f"{node}.log").read_text()

    def stop(self, timeout: float = 10.0) -> dict[str, int]:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        codes, deadline = {}, time.monotonic() + timeout
        for n, p in self.procs.items():
            try:
                codes[n] = p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                codes[n] = p.wait()
        return codes
