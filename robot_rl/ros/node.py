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

from robot_rl.utils.process import set_realtime


def make_executor(kind: str = "single", threads: int = 2) -> Executor:
    """``single`` / ``multi``: rclpy's Python executors. (rclpy.experimental's EventsExecutor delivered no
    messages to a node whose other thread publishes at 500 Hz with the Jazzy wheels here, so it is not offered.)"""
    if kind == "multi" and threads > 1:
        return MultiThreadedExecutor(num_threads=threads)
    return SingleThreadedExecutor()


def pop_rt_priority(argv: list[str]) -> tuple[int, list[str]]:
    """``--rt-priority N`` (before ``--ros-args``) taken out of a node's command line: (N or 0, the rest).
    N is 1-99, or 0 for normal scheduling (what a launch file's default passes)."""
    end = argv.index("--ros-args") if "--ros-args" in argv else len(argv)
    if "--rt-priority" not in argv[:end]:
        return 0, argv
    i = argv.index("--rt-priority")
    if i + 1 >= end or not argv[i + 1].isdigit() or not 0 <= int(argv[i + 1]) <= 99:
        raise SystemExit("--rt-priority needs a priority 1-99 (0 = normal scheduling)")
    return int(argv[i + 1]), argv[:i] + argv[i + 2:]


def run_node(make: Callable[[], Node | list[Node]], argv: list[str] | None = None, executor: str = "single",
             threads: int = 2) -> int:
    """Builds the node (or the nodes of a composed process) with ``make()`` after ``rclpy.init(args=argv)`` and
    spins it until SIGINT/SIGTERM; then calls each node's ``close()`` (if any), destroys it and shuts rclpy down.
    Returns the process exit code. A node's ``stopping()`` (if any) is called when the stop is requested, before
    the executor shuts down: it ends callbacks that run long (an action's execution). ``--rt-priority N`` on the
    command line: SCHED_FIFO N for the process, set before rclpy starts so every thread started later (Fast DDS's,
    the physics loop, the receive threads) has it, as a ros2_control controller manager runs its loop; refused
    without root/CAP_SYS_NICE (a warning)."""
    priority, args = pop_rt_priority(list(sys.argv if argv is None else argv))
    if priority:
        set_realtime(priority, "--rt-priority")
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    nodes: list[Node] = []
    ex: Executor | None = None
    try:
        made = make()
        nodes = made if isinstance(made, list) else [made]
        ex = make_executor(executor, threads)
        for node in nodes:
            ex.add_node(node)
        while not stop.is_set() and rclpy.ok():
            ex.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        for node in nodes:  # long-running callbacks (an action's execution) end before the executor stops
            stopping = getattr(node, "stopping", None)
            if stopping is not None:
                stopping()
        if ex is not None:  # before rclpy shuts down: a later garbage collection of it raised in __del__ at exit
            ex.shutdown(timeout_sec=1.0)
        for node in nodes:  # in the given order: a composed process lists the node owning the loop first
            close = getattr(node, "close", None)
            if close is not None:
                close()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
