"""Running a node process: ``rclpy.init`` with the process's ``--ros-args`` (parameters, remaps, node name and
namespace given by a launch file), a spinning executor, and a clean stop on SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node


def make_executor(kind: str = "events", threads: int = 2) -> Executor:
    """``single`` / ``multi``: rclpy's Python executors; ``events``: rclpy.experimental's C++ EventsExecutor (with
    the Jazzy wheels here it delivered no messages to a node whose other thread publishes at 500 Hz and did not stop
    on SIGINT: not used by default)."""
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    if kind == "multi" and threads > 1:
        return MultiThreadedExecutor(num_threads=threads)
    return SingleThreadedExecutor()


def run_node(make: Callable[[], Node], argv: list[str] | None = None, executor: str = "single",
             threads: int = 2) -> int:
    """Builds the node with ``make()`` after ``rclpy.init(args=argv)`` and spins it with ``executor`` (see
    :func:`make_executor`) until SIGINT/SIGTERM; then calls its ``close()`` (if any), destroys it and shuts rclpy
    down. Returns the process exit code."""
    rclpy.init(args=sys.argv if argv is None else argv)
    signal.signal(signal.SIGTERM, lambda *_: rclpy.try_shutdown())
    node = None
    try:
        node = make()
        ex = make_executor(executor, threads)
        ex.add_node(node)
        ex.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if close is not None:
                close()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
