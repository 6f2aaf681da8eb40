"""The ROS 2 side of a robot env: its own rclpy context and node spinning in a background executor thread,
subscriptions that keep a short buffer of timestamped messages, and synchronised snapshots across topics.

Nothing here blocks the executor: callbacks only append to buffers under a lock; the env thread reads them.
"""

from __future__ import annotations

import atexit
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy._rclpy_pybind11 import InvalidHandle
from rclpy.context import Context
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from robot_rl.ros.clock import use_sim_time_override
from robot_rl.ros.fast_sub import FastSubscription
from robot_rl.ros.msgs import from_stamp
from robot_rl.ros.profile_check import ProfileCheck


class Stream:
    """Buffer of ``(stamp seconds, value)`` for one topic; ``value = convert(msg)`` (a message converted to None is
    dropped: e.g. a joint state that lacks the joints wanted); ``stamp`` from the message header (or the arrival
    time for header-less messages). :meth:`put` adds a value computed elsewhere (a TF lookup)."""

    def __init__(self, convert: Callable[[Any], Any], depth: int = 64, stamped: bool = True) -> None:
        self.convert, self.stamped = convert, stamped
        self.items: deque[tuple[float, Any]] = deque(maxlen=depth)
        self.received = 0
        self.cond = threading.Condition()

    def __call__(self, msg: Any) -> None:
        t = from_stamp(msg.header.stamp) if self.stamped else time.time()
        value = self.convert(msg)
        if value is not None:
            self.put(t, value)

    def put(self, t: float, value: Any) -> None:
        with self.cond:
            self.items.append((t, value))
            self.received += 1
            self.cond.notify_all()

    def latest(self) -> tuple[float, Any] | None:
        with self.cond:
            return self.items[-1] if self.items else None

    def nearest(self, t: float) -> tuple[float, Any] | None:
        """The buffered item whose stamp is closest to ``t``."""
        with self.cond:
            if not self.items:
                return None
            return min(self.items, key=lambda item: abs(item[0] - t))

    def wait_newer(self, t: float, timeout: float, than: float = -math.inf) -> bool:
        """Waits until an item stamped at or after ``t`` and strictly after ``than`` is buffered (``than``: the
        stamp an observation already used, so a late step never gets the same message twice); False on timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not (self.items and self.items[-1][0] >= t and self.items[-1][0] > than):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def clear(self) -> None:
        with self.cond:
            self.items.clear()


def snapshot(streams: dict[str, Stream], keys: list[str], reference: str, slack: float = 0.0,
             timeout: float = 0.0, unsynced: tuple[str, ...] = ()) -> tuple[dict[str, tuple[float, Any]], float]:
    """Synchronised values: the newest ``reference`` item, and for every other key the buffered item nearest to
    its stamp. Returns ``({key: (stamp, value)}, max |stamp - reference stamp|)``.

    Topics are delivered independently, so the reference can come in before the other topics of its instant: with
    ``timeout`` > 0 every other key is first waited for (up to ``timeout`` s) until it has an item stamped at least
    the reference's stamp minus ``slack``; TimeoutError if one does not come. Keys in ``unsynced`` (a sensor at a
    lower rate of its own, e.g. a tracker's TF frame beside joint states at the hardware rate) are not waited for:
    their nearest item as it is (waiting would delay every observation by up to their period)."""
    ref = streams[reference].latest()
    if ref is None:
        raise RuntimeError(f"no {reference} message yet")
    out, skew = {reference: ref}, 0.0
    for k in keys:
        if k == reference:
            continue
        if timeout > 0 and k not in unsynced and not streams[k].wait_newer(ref[0] - slack, timeout):
            raise TimeoutError(f"no {k} stamped {ref[0] - slack:.3f} or later within {timeout} s")
        item = streams[k].nearest(ref[0])
        if item is None:
            raise RuntimeError(f"no {k} message yet")
        out[k] = item
        skew = max(skew, abs(item[0] - ref[0]))
    return out, skew


class RosLink:
    """An rclpy node of its own (own context: several envs or tests in one process do not interfere) spun by a
    single-threaded executor in a daemon thread."""

    def __init__(self, name: str, namespace: str = "", args: list[str] | None = None,
                 use_sim_time: bool = False) -> None:
        self.context = Context()
        rclpy.init(args=args, context=self.context)
        self.node = Node(name, namespace=namespace, context=self.context,
                         parameter_overrides=use_sim_time_override(use_sim_time))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.streams: dict[str, Stream] = {}
        self.publishers: dict[str, Any] = {}
        self.subscriptions: dict[str, Any] = {}
        self._fast: list[FastSubscription] = []
        self._thread = threading.Thread(target=self._spin, name=f"{name}-executor", daemon=True)
        self._thread.start()
        self._closed = False
        # An env nobody closes (e.g. a learner's evaluation env) must still stop its executor before the
        # interpreter tears down, or the C++ side aborts the process at exit.
        atexit.register(self.close)

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except (ExternalShutdownException, rclpy.executors.ShutdownException):
            pass
        except InvalidHandle:  # closed while the executor still waited (close() timed out on the join)
            pass

    def subscribe(self, key: str, msg_type: type, topic: str, convert: Callable[[Any], Any],
                  stamped: bool = True, latched: bool = False, depth: int = 64, fast: bool = False,
                  best_effort: bool = False) -> Stream:
        """Buffers ``convert(msg)`` of ``topic`` in ``streams[key]`` (the last ``depth``). ``fast``: served by a
        thread of its own (:class:`robot_rl.ros.fast_sub.FastSubscription`: no executor latency; only the newest
        message when several are waiting) — for latency-critical streams. ``best_effort``: a best-effort
        subscription (matches best-effort publishers, e.g. franka_robot_state_broadcaster's, and reliable ones)."""
        stream = Stream(convert, depth, stamped)
        if fast:
            sub = FastSubscription(self.node, msg_type, topic, stream)
            self._fast.append(sub)
            self.subscriptions[key] = sub.sub
        else:
            qos: QoSProfile | int = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL) if latched else 10
            if best_effort:
                qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
            self.subscriptions[key] = self.node.create_subscription(msg_type, topic, stream, qos)
        self.streams[key] = stream
        return stream

    def wait_matched(self, keys: list[str], timeout: float) -> list[str]:
        """Waits until every subscription in ``keys`` has discovered a publisher (DDS discovery takes from
        milliseconds to seconds on a loaded machine; messages sent before it completes are lost to this node).
        Returns the keys still unmatched."""
        return self._wait(keys, lambda k: self.subscriptions[k].get_publisher_count() > 0, timeout)

    def wait_subscribed(self, keys: list[str], timeout: float) -> list[str]:
        """Waits until every publisher in ``keys`` has a matched subscriber; returns the keys still unmatched."""
        return self._wait(keys, lambda k: self.publishers[k].get_subscription_count() > 0, timeout)

    @staticmethod
    def _wait(keys: list[str], ready: Callable[[str], bool], timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        missing = keys
        while time.monotonic() < deadline:
            missing = [k for k in keys if not ready(k)]
            if not missing:
                return []
            time.sleep(0.01)
        return missing

    def publisher(self, key: str, msg_type: type, topic: str) -> Any:
        self.publishers[key] = self.node.create_publisher(msg_type, topic, 10)
        return self.publishers[key]

    def call(self, srv_type: type, name: str, timeout: float = 5.0) -> Any:
        """Calls a service (waiting up to ``timeout`` for it); returns the response or raises TimeoutError."""
        client = self.node.create_client(srv_type, name)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"service {name} not available")
            future = client.call_async(srv_type.Request())
            done = threading.Event()
            future.add_done_callback(lambda _: done.set())
            if not done.wait(timeout):
                raise TimeoutError(f"service {name} did not answer in {timeout} s")
            return future.result()
        finally:
            self.node.destroy_client(client)

    def wait_for(self, keys: list[str], timeout: float) -> list[str]:
        """Waits until every stream in ``keys`` has a message; returns the ones still missing."""
        return self._wait(keys, lambda k: self.streams[k].latest() is not None, timeout)

    def snapshot(self, keys: list[str], reference: str, slack: float = 0.0, timeout: float = 0.0,
                 unsynced: tuple[str, ...] = ()) -> tuple[dict[str, tuple[float, Any]], float]:
        """See :func:`snapshot`."""
        return snapshot(self.streams, keys, reference, slack, timeout, unsynced)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            for sub in self._fast:
                sub.close()
            self.executor.shutdown(timeout_sec=1.0)
            self._thread.join(timeout=2.0)  # the spin thread is out of the wait set before the node goes
            self.node.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.context)
            self._thread.join(timeout=2.0)


def check_live(profile: Any, namespace: str = "", use_sim_time: bool = False, timeout: float = 10.0,
               safety: bool = True) -> None:
    """All checks of ``profile`` (arm or car) and, with ``safety``, of the safety node in front of its driver, from
    a short-lived node of its own (``robot-rl train``'s preflight, ``robot-rl robot check``); one ``ConfigError``
    with a line per problem, each naming the profile field."""
    link = RosLink("profile_check", namespace, use_sim_time=use_sim_time)
    try:
        check = ProfileCheck(link.node, profile, timeout)
        if safety:
            check.with_safety()
        elif profile.kind == "car":
            check.car()
        else:
            check.arm()
    finally:
        link.close()
