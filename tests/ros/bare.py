"""The bare-driver rehearsal for the tests: robot_rl's emulated driver with only what the real driver exposes
(``bare:=true``), the scene reached through a person's channel (robot_rl_sim.scene_channel), and a probe of the
tool's motion measured from the driver's own joint states through its URDF."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from tests.ros.graph import Graph

TASKS = {"ros2_control_joint_position": "PickCube", "ur5e_servo": "Reach", "franka_fr3_cartesian": "PickCube"}
"""The sim task each bundled profile's bare rehearsal runs (the UR has no gripper: a reach)."""


def start_bare_driver(graph: Graph, profile: str, scene: Path, *args: str, name: str = "arm_driver",
                      task: str = "") -> None:
    """The emulated driver of ``profile`` in bare mode, its scene in ``scene`` (task: by default the bundled
    profile's, :data:`TASKS`)."""
    graph.start("arm_driver", "-p", f"profile:={profile}", "-p", "bare:=true", "-p", f"scene_dir:={scene}",
                "-p", f"task:={task or TASKS[Path(profile).stem]}", *args, name=name)


class ToolProbe:
    """Every tool position the driver's joint states give through its URDF, with the wall time it arrived."""

    def __init__(self, profile: object, timeout: float = 60.0) -> None:
        from sensor_msgs.msg import JointState

        from robot_rl.ros.link import RosLink
        from robot_rl.ros.robot_state import JointReader, RobotDescription

        self.link = RosLink("tool_probe")
        self.kin = RobotDescription(self.link.node, profile.robot_description).kinematics(
            profile.joint_states.names, profile.base_frame, profile.tool_frame, timeout)
        reader = JointReader(profile.joint_states.names)
        self.samples: list[tuple[float, np.ndarray]] = []
        self._lock = threading.Lock()

        def on_joints(msg: object) -> None:
            joints = reader(msg)
            if joints is not None:
                pos = self.kin.forward(joints[0])[0]
                with self._lock:
                    self.samples.append((time.monotonic(), pos))
        self.link.subscribe("joints", JointState, profile.joint_states.topic, on_joints, fast=True)
        deadline = time.monotonic() + timeout
        while not self.samples:
            assert time.monotonic() < deadline, "no joint states"
            time.sleep(0.05)

    def now(self) -> np.ndarray:
        with self._lock:
            return self.samples[-1][1].copy()

    def peak_motion(self, since: float, until: float | None = None) -> float:
        """The largest distance (m) of the tool from where it was at ``since`` (the first sample then or after)."""
        with self._lock:
            window = [p for t, p in self.samples if t >= since and (until is None or t <= until)]
        assert len(window) > 10, f"only {len(window)} joint states since {since}"
        return float(max(np.linalg.norm(p - window[0]) for p in window))

    def wait_still(self, speed: float = 0.002, window: float = 0.5, timeout: float = 15.0) -> None:
        """Until the tool moved less than ``speed`` m/s over the last ``window`` s."""
        deadline = time.monotonic() + timeout
        time.sleep(window)
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if self.peak_motion(time.monotonic() - window) < speed * window:
                return
        raise AssertionError("the arm did not come to rest")

    def close(self) -> None:
        self.link.close()
