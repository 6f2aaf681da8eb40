"""Running a node process: ``rclpy.init`` with the process's ``--ros-args`` (parameters, remaps, node name and
namespace given by a launch file), a spinning executor, and a clean stop on SIGINT/SIGTERM.

rclpy's own signal handler is not installed: it shuts the context down under callbacks still running (a take on
a destroyed subscription then raises at exit). Here a signal only sets a flag; the spin loop sees it within
0.1 s, the node's ``close()`` stops its threads, then the node is destroyed and rclpy shut down."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions


def make_executor(kind: str = "single", threads: int = 2) -> Executor:
    """``single`` / ``multi``: rclpy's Python executors. (rclpy.experimental's EventsExecutor delivered no
    messages to a node whose other thread publishes at 500 Hz with the Jazzy wheels here, so it is not offered.)"""
    if kind == "multi" and threads > 1:
        return MultiThreadedExecutor(num_threads=threads)
    return SingleThreadedExecutor()


def run_node(make: Callable[[], Node], argv: list[str] | None = None, executor: str = "single",
             threads: int = 2) -> int:
    """Builds the node with ``make()`` after ``rclpy.init(args=argv)`` and spins it until SIGINT/SIGTERM; then
    calls its ``close()`` (if any), destroys it and shuts rclpy down. Returns the process exit code."""
    rclpy.init(args=sys.argv if argv is None else argv, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node = None
    try:
        node = make()
        ex = make_executor(executor, threads)
        ex.add_node(node)
        while not stop.is_set() and rclpy.ok():
            ex.spin_once(timeout_sec=0.1)
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
