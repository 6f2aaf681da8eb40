"""Time for nodes and the robot env: the host's clock on a robot, the simulation's ``/clock`` with ``use_sim_time``.

A sim hardware node started with ``use_sim_time`` (the standard ROS 2 parameter) publishes ``/clock`` and stamps
every message with the physics time of its step, so a simulation that runs slower than real time (a loaded CPU)
stays consistent: a speed computed from two stamps is the speed the physics had. Every other node and the robot env
take their time from :class:`NodeTime`, which follows ``/clock`` exactly when the node's ``use_sim_time`` is set and
is the host's clock otherwise (real robots: nothing changes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from builtin_interfaces.msg import Time as TimeMsg
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.parameter import Parameter

from robot_rl.ros.msgs import to_stamp


class NodeTime:
    """``now()`` in seconds: ``real()`` (default ``time.monotonic``: timeouts immune to wall-clock steps; the robot
    env passes ``time.time`` to compare with wall-clock stamps), or the node's ROS time while ``use_sim_time`` is
    active. ``stamp()``: the node clock as a header stamp (wall or sim time)."""

    def __init__(self, node: Node, real: Callable[[], float] = time.monotonic) -> None:
        self.node, self.clock, self.real = node, node.get_clock(), real
        # read once: rclpy settles use_sim_time while it builds the node, and the hot paths (the safety node's
        # watchdog) should not take the clock's lock on every call
        self.sim = bool(self.clock.ros_time_is_active)

    def now(self) -> float:
        return self.clock.now().nanoseconds * 1e-9 if self.sim else self.real()

    def stamp(self) -> TimeMsg:
        return self.clock.now().to_msg() if self.sim else to_stamp(time.time())

    def sleep_until(self, t: float, timeout: float | None = None) -> None:
        """Returns once ``now() >= t``: in sim time once ``/clock`` has passed ``t``, however slow the sim, but at
        most ``timeout`` s of real time (then TimeoutError: a simulation that stopped must not hang its callers)."""
        if not self.sim:
            time.sleep(max(0.0, t - self.real()))
            return
        until = int(t * 1e9)
        reached = threading.Event()

        def on_jump(_jump: object) -> None:
            if self.clock.now().nanoseconds >= until:
                reached.set()

        threshold = JumpThreshold(min_forward=Duration(nanoseconds=1), min_backward=None, on_clock_change=True)
        with self.clock.create_jump_callback(threshold, post_callback=on_jump):
            if self.clock.now().nanoseconds < until and not reached.wait(timeout):
                raise TimeoutError(f"/clock did not reach {t:.3f} s within {timeout} s (simulation stopped?)")

    def next_period(self, tick: float, period: float, timeout: float | None = None) -> tuple[float, bool]:
        """A fixed-rate schedule (a robot env's step): the next tick after ``tick``, slept until; when the caller
        already took longer than a period, a new schedule from now. Returns (tick, overran)."""
        tick += period
        now = self.now()
        if now > tick:
            return now, True
        self.sleep_until(tick, timeout)
        return tick, False

    def wait_for_clock(self, timeout: float) -> None:
        """In sim time: until the first ``/clock`` has arrived (ROS time reads 0 before)."""
        deadline = time.monotonic() + timeout
        while self.sim and self.clock.now().nanoseconds == 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no /clock within {timeout} s (is the sim hardware started with use_sim_time?)")
            time.sleep(0.01)


def use_sim_time_override(enabled: bool) -> list:
    """``parameter_overrides`` that start a node with ``use_sim_time`` set (for nodes created in code)."""
    if not enabled:
        return []

    return [Parameter("use_sim_time", Parameter.Type.BOOL, True)]
