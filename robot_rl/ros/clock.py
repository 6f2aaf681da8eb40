"""Time for nodes and the robot env: the host's clock on a robot, the simulation's ``/clock`` with ``use_sim_time``.

A sim hardware node started with ``use_sim_time`` (the standard ROS 2 parameter) publishes ``/clock`` and stamps
every message with the physics time of its step, so a simulation that runs slower than real time (a loaded CPU)
stays consistent: a speed computed from two stamps is the speed the physics had. Every other node and the robot env
take their time from :class:`NodeTime`, which follows ``/clock`` exactly when the node's ``use_sim_time`` is set and
is the host's clock otherwise (real robots: nothing changes).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from builtin_interfaces.msg import Time as TimeMsg
from rclpy.clock import ClockType
from rclpy.node import Node
from rclpy.time import Time


class NodeTime:
    """``now()`` in seconds: ``real()`` (default ``time.monotonic``: timeouts immune to wall-clock steps; the robot
    env passes ``time.time`` to compare with wall-clock stamps), or the node's ROS time while ``use_sim_time`` is
    active. ``stamp()``: the node clock as a header stamp (wall or sim time)."""

    def __init__(self, node: Node, real: Callable[[], float] = time.monotonic) -> None:
        self.node, self.clock, self.real = node, node.get_clock(), real

    @property
    def sim(self) -> bool:
        return bool(self.clock.ros_time_is_active)

    def now(self) -> float:
        return self.clock.now().nanoseconds * 1e-9 if self.sim else self.real()

    def stamp(self) -> TimeMsg:
        return self.clock.now().to_msg()

    def sleep_until(self, t: float) -> None:
        """Returns once ``now() >= t`` (in sim time: once ``/clock`` has passed ``t``, however slow the sim)."""
        if not self.sim:
            time.sleep(max(0.0, t - self.real()))
            return
        until = Time(nanoseconds=int(t * 1e9), clock_type=ClockType.ROS_TIME)
        self.clock.sleep_until(until, context=self.node.context)


def use_sim_time_override(enabled: bool) -> list:
    """``parameter_overrides`` that start a node with ``use_sim_time`` set (for nodes created in code)."""
    if not enabled:
        return []
    from rclpy.parameter import Parameter

    return [Parameter("use_sim_time", Parameter.Type.BOOL, True)]
