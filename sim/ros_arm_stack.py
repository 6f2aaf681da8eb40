"""The arm's hardware, impedance controller and safety filter composed in one process, as ros2_control runs a
driver and its controllers: the controller is evaluated inside the hardware's physics loop (read -> update ->
write before every step) and the safety node hands its filtered targets to the controller directly.

The three are the same node classes that run as separate processes (``arm_hardware``, ``arm_controller``,
``arm_safety``), with the same names, parameters and outside topics: ``policy/target_pose``, ``policy/gripper``,
``estop``, ``joint_states``, ``ee_pose``, ``applied_command``, ``diagnostics``, ``safety_state`` ... — so the robot
env, the tests and the launch files use either form unchanged. What is gone are the three internal hops
(``controller/target_pose``, ``joint_states`` -> controller, ``joint_command``): a command now crosses DDS once
on its way in and its effect once on its way out. The filtered targets are still published on
``controller/target_pose`` for monitoring (nothing in the stack listens to them). Parameters given to the process
apply to all three nodes (their names do not overlap); do not rename the process's node (``__node:=``): that
would give all three one name.

    robot-rl-arm-stack [--rt-priority 50] --ros-args -r __ns:=/arm -p task:=PickCube -p watchdog_timeout:=0.075
    robot-rl launch launch/sim_arm_stack.launch.yaml

The physics + control loop runs at 1 kHz here by default (``physics_dt``), as a Franka's torque interface does;
``--rt-priority N`` gives the process SCHED_FIFO (all of its threads, Fast DDS's included) where permitted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time

from robot_rl.ros.msgs import pose_stamped
from robot_rl.ros.node import run_node
from robot_rl_controllers.ros_arm_controller import ArmControllerNode
from robot_rl_controllers.ros_safety_node import ArmSafetyNode
from robot_rl_sim.ros_arm_node import ArmHardwareConfig, ArmHardwareNode

GIL_SWITCH_INTERVAL = 0.0005
"""Seconds a Python thread may hold the GIL while another waits (default 5 ms): the physics loop, the executor and
the watchdog share one interpreter here, and a 5 ms wait would dwarf the hops saved."""


def compose(hardware: ArmHardwareNode, controller: ArmControllerNode, safety: ArmSafetyNode) -> None:
    """Wires the three, all driven by the hardware's physics loop: at the top of every step the safety filter
    takes the newest ``policy/target_pose`` and hands the filtered target to the controller through the
    hardware's input queue (so ``command_latency`` applies); then the controller computes the step's efforts."""

    def target(pos: np.ndarray, quat: np.ndarray, stamp: Time) -> None:
        hardware.enqueue("call", partial(controller.set_target, pos, quat, stamp))
        safety.pub_target.publish(pose_stamped(pos, quat, stamp))  # still on controller/target_pose, to monitor

    def in_loop(pos: np.ndarray, vel: np.ndarray, t: float) -> tuple[np.ndarray, object] | None:
        tau = controller.update(pos, vel, t)
        return None if tau is None else (tau, controller.target_stamp)

    safety.send_target = target
    safety.send_gripper = controller.set_gripper
    controller.send_gripper = partial(hardware.enqueue, "gripper")
    hardware.in_loop = in_loop
    hardware.pre_step = safety.poll_target  # the command topic is read by the loop itself: no thread hand-over
    hardware.pub_pose = Tee(hardware.pub_pose, safety._on_ee_pose)  # the safety filter's measurements, no DDS
    hardware.pub_wrench = Tee(hardware.pub_wrench, safety._on_wrench)


class Tee:
    """A publisher that also hands every message to in-process callbacks (same message, same injected latency)."""

    def __init__(self, publisher: Any, *callbacks: Callable[[Any], None]) -> None:
        self.publisher, self.callbacks = publisher, callbacks

    def publish(self, msg: Any) -> None:
        self.publisher.publish(msg)
        for callback in self.callbacks:
            callback(msg)


STACK_PHYSICS_DT = 0.001
"""The composed hardware loop's default period: 1 kHz, a Franka arm's torque-interface rate (parameter
``physics_dt``; the separate hardware node keeps the model's 2 ms)."""


def make_stack() -> list:
    """The composed nodes, hardware first: its physics loop starts in its constructor (braking until the controller
    is wired a few ms later) and must stop first at exit, before the other nodes' subscriptions are destroyed."""
    hardware = ArmHardwareNode(ArmHardwareConfig(physics_dt=STACK_PHYSICS_DT))
    controller = ArmControllerNode(topics=False)
    safety = ArmSafetyNode(composed=True)
    compose(hardware, controller, safety)
    return [hardware, controller, safety]


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``robot-rl-arm-stack`` (ROS 2 executable ``arm_stack``)."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    return run_node(make_stack, argv)


if __name__ == "__main__":
    raise SystemExit(main())
