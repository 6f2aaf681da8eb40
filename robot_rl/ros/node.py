"""Running a node process: ``rclpy.init`` with the process's ``--ros-args`` (parameters, remaps, node name and
namespace given by a launch file), a spinning executor, and a clean stop on SIGINT/SIGTERM.

rclpy's own signal handler is not installed: it shuts the context down under callbacks still running (a take on
a destroyed subscription then raises at exit). Here a signal only sets a flag; the spin loop sees it within
0.1 s, the node's ``close()`` stops its threads, then the node is destroyed and rclpy shut down.

A node that refuses its configuration while it is made (a :class:`~robot_rl.config.ConfigError`, a ``ValueError``
from a config's validation, a parameter of the wrong type) fails as a ``robot-rl`` command does: one line
``<node>: <message>`` and exit code 2 (the traceback at ``--log-level debug``). Under ``robot-rl launch`` the line
goes to the file the launcher names in ``ROBOT_RL_ERROR_FILE`` instead of stderr, and the launcher repeats it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from robot_rl.ros.launch import CONFIG_ERROR, ERROR_FILE
from robot_rl.utils.log import get_logger, setup_logging
from robot_rl.utils.process import set_realtime

log = get_logger(__name__)


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
    Returns the process exit code: 0, or 2 when ``make()`` raised a ``ValueError`` (a ``ConfigError``) or a
    parameter error (one line ``<node>: <message>``, see the module docstring). A node's ``stopping()`` (if any)
    is called when the stop is requested, before the executor shuts down: it ends callbacks that run long (an
    action's execution). ``--rt-priority N`` on the command line: SCHED_FIFO N for the process, set before rclpy
    starts so every thread started later (Fast DDS's, the physics loop, the receive threads) has it, as a
    ros2_control controller manager runs its loop; refused without root/CAP_SYS_NICE (a warning)."""
    priority, args = pop_rt_priority(list(sys.argv if argv is None else argv))
    if priority:
        set_realtime(priority, "--rt-priority")
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    error_file = os.environ.pop(ERROR_FILE, None)  # for this process only: not for any process a node starts
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    before = set(threading.enumerate())
    try:
        made = make()
    except BaseException as exc:
        name = _abandon(exc, before) or (Path(args[0]).name if args else "node")
        if not isinstance(exc, (ValueError, ParameterException)):  # a bug: its traceback
            raise
        _report(name, exc, error_file)  # ConfigError is a ValueError
        return CONFIG_ERROR
    nodes: list[Node] = made if isinstance(made, list) else [made]
    ex: Executor | None = None
    try:
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


def _abandon(exc: BaseException, before: set[threading.Thread]) -> str | None:
    """After ``make()`` raised ``exc``: rclpy shut down, the threads started since ``before`` waited for (2 s at
    most), the half-made node destroyed; returns its name (None if no node was made yet).

    A half-made node may already run threads (a :class:`~robot_rl.ros.fast_sub.FastSubscription` made before the
    profile is read). Left running into interpreter exit, such a daemon thread coming back from a wait in rclpy's
    C++ (which released the GIL) is ended by Python with ``pthread_exit``, whose unwinding through a C++
    destructor calls ``std::terminate``: "terminate called without an active exception" and SIGABRT. So rclpy is
    shut down first (robot_rl's node threads loop while ``context.ok()``) and they are waited for before exit."""
    node = _node_in(exc.__traceback__)
    rclpy.try_shutdown()
    deadline = time.monotonic() + 2.0
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    if node is None:
        return None
    name = node.get_name()
    node.destroy_node()
    return name


def _report(name: str, exc: BaseException, error_file: str | None) -> None:
    """``<name>: <message>``: to ``error_file`` (the launcher's) if given, else to stderr; the traceback at
    ``--log-level debug``."""
    setup_logging()
    log.debug("%s: refused its configuration", name, exc_info=exc)
    line = f"{name}: {exc}"
    if error_file:
        Path(error_file).write_text(line + "\n")
    else:
        print(line, file=sys.stderr, flush=True)


def _node_in(tb: TracebackType | None) -> Node | None:
    """The node whose construction raised: the ``self`` of the outermost frame of the traceback that is a node's
    (``make()`` did not return it, so its constructor's frames are the only reference to it)."""
    while tb is not None:
        node = tb.tb_frame.f_locals.get("self")
        if isinstance(node, Node):
            return node
        tb = tb.tb_next
    return None
