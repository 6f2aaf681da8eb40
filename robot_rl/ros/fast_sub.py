"""A subscription served by its own thread instead of the executor: for the 500 Hz control topics.

rclpy's Python executors spend a few hundred microseconds of Python per callback (wait-set rebuild, task
machinery); at 500 Hz, on a loaded 2-core machine, that made the impedance loop fall to ~100-250 Hz with gaps
of 50+ ms (measured here; the arm went unstable). This thread waits on a wait set holding only this
subscription, takes the newest message and calls the callback directly. The subscription is hidden from the
node's executor (it is not in the node's subscription list), so messages are never taken twice.

Built on rclpy's own primitives (``_rclpy.WaitSet``, ``Subscription.handle.take_message``), the same calls
``rclpy.wait_for_message`` makes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy


def hidden_subscription(node: Node, msg_type: type, topic: str, best_effort: bool = False) -> Any:
    """A depth-1 subscription the node's executor never sees (messages are taken by its owner only);
    ``best_effort``: it also matches best-effort publishers (a sensor stream such as a Franka's wrench)."""
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE)
    sub = node.create_subscription(msg_type, topic, lambda _: None, qos)
    node._subscriptions.remove(sub)
    for handler in sub.event_handlers:  # QoS events (e.g. message lost at depth 1) would wake the executor
        node.remove_waitable(handler)
    return sub


def take_newest(sub: Any) -> Any | None:
    """The newest waiting message of ``sub`` (older ones are dropped), or None; never blocks."""
    newest = None
    with sub.handle:
        while (taken := sub.handle.take_message(sub.msg_type, sub.raw)) is not None:
            newest = taken[0]
    return newest


class PolledSubscription:
    """A subscription taken by its owner's own loop: ``poll()`` returns the newest message or None without
    waiting — no thread, no wake-up, no GIL hand-over (the composed arm stack polls its command topic once per
    physics step, as a ros2_control loop reads its command buffer)."""

    def __init__(self, node: Node, msg_type: type, topic: str) -> None:
        self.sub = hidden_subscription(node, msg_type, topic)

    def poll(self) -> Any | None:
        return take_newest(self.sub)

    def close(self) -> None:
        self.sub.destroy()


class FastSubscription:
    """``FastSubscription(node, msg_type, topic, callback)``: ``callback(msg)`` runs on this object's thread with
    the newest message (older queued ones are dropped: depth 1). ``close()`` stops the thread."""

    def __init__(self, node: Node, msg_type: type, topic: str, callback: Callable[[Any], None],
                 poll: float = 0.05, best_effort: bool = False) -> None:
        self.sub = hidden_subscription(node, msg_type, topic, best_effort)
        self.callback, self.context, self.poll_ns = callback, node.context, int(poll * 1e9)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sub:{topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sub = self.sub
        wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, self.context.handle)
        while not self._stop.is_set() and self.context.ok():
            wait_set.clear_entities()
            with sub.handle:
                wait_set.add_subscription(sub.handle)
                wait_set.wait(self.poll_ns)
                if sub.handle.pointer not in wait_set.get_ready_entities("subscription"):
                    continue
            newest = take_newest(sub)
            if newest is not None:
                self.callback(newest)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        self.sub.destroy()
