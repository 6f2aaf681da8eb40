"""A TF buffer: the transforms of ``/tf`` and ``/tf_static`` kept for a few seconds, and looked up between any
two frames of the tree at a time, interpolated between the stamps that bracket it (what tf2's ``Buffer`` does;
tf2_ros has no PyPI wheel, so robot_rl keeps its own).

A lookup never extrapolates: a time after the newest transform on the chain (or before the oldest kept) raises
:class:`TfError` naming the edge, and so does a frame the tree does not have. :meth:`TfBuffer.subscribe` feeds the
buffer from a node; :meth:`TfBuffer.on_update` calls back after every ``/tf`` message (the robot env takes its
end-effector pose stream from it).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from robot_rl.robots.transforms import IDENTITY, compose, interpolate, invert

Pose = tuple[np.ndarray, np.ndarray]


class TfError(LookupError):
    """A transform that cannot be looked up (unknown frame, disconnected trees, a time outside the buffer)."""


class _Edge:
    """One parent -> child transform over time (static: one value for all time)."""

    def __init__(self, parent: str, static: bool) -> None:
        self.parent, self.static = parent, static
        self.times: list[float] = []
        self.poses: list[Pose] = []

    def add(self, t: float, pose: Pose, keep: float) -> None:
        if self.static:
            self.times, self.poses = [t], [pose]
            return
        if self.times and t <= self.times[-1]:
            i = bisect.bisect_left(self.times, t)
            if i < len(self.times) and self.times[i] == t:
                self.poses[i] = pose
                return
            self.times.insert(i, t)
            self.poses.insert(i, pose)
        else:
            self.times.append(t)
            self.poses.append(pose)
        cut = bisect.bisect_left(self.times, self.times[-1] - keep)
        if cut > 0:
            del self.times[:cut], self.poses[:cut]

    def at(self, t: float | None, child: str) -> tuple[Pose, float]:
        """(pose, stamp used) at ``t`` (None: the newest)."""
        if self.static:
            return self.poses[0], np.inf
        if t is None:
            return self.poses[-1], self.times[-1]
        if t > self.times[-1] + 1e-9 or t < self.times[0] - 1e-9:
            raise TfError(f"{self.parent} -> {child}: no transform at {t:.4f} (buffer holds "
                          f"{self.times[0]:.4f} .. {self.times[-1]:.4f}; lookups never extrapolate)")
        i = bisect.bisect_left(self.times, t)
        if self.times[i] == t or i == 0:
            return self.poses[i], t
        t0, t1 = self.times[i - 1], self.times[i]
        return interpolate(self.poses[i - 1], self.poses[i], (t - t0) / (t1 - t0)), t


class TfBuffer:
    """See the module docstring. ``keep``: seconds of history per edge."""

    def __init__(self, keep: float = 10.0) -> None:
        self.keep = keep
        self.edges: dict[str, _Edge] = {}
        self.lock = threading.Lock()
        self._listeners: list[Callable[[float], None]] = []

    # ------------------------------------------------------------------ input
    def set_transform(self, parent: str, child: str, t: float, pos: Any, quat_wxyz: Any, static: bool = False) -> None:
        with self.lock:
            edge = self.edges.get(child)
            if edge is None or edge.parent != parent or edge.static != static:
                edge = self.edges[child] = _Edge(parent, static)
            edge.add(t, (np.asarray(pos, np.float64), np.asarray(quat_wxyz, np.float64)), self.keep)

    def add_message(self, msg: Any, static: bool = False) -> None:
        """A ``tf2_msgs/TFMessage``."""
        newest = -np.inf
        for tr in msg.transforms:
            t = tr.header.stamp.sec + tr.header.stamp.nanosec * 1e-9
            v, r = tr.transform.translation, tr.transform.rotation
            self.set_transform(tr.header.frame_id.lstrip("/"), tr.child_frame_id.lstrip("/"), t, (v.x, v.y, v.z),
                               (r.w, r.x, r.y, r.z), static)
            newest = max(newest, t)
        if not static:
            for listener in list(self._listeners):
                listener(newest)

    def on_update(self, callback: Callable[[float], None]) -> None:
        """``callback(newest stamp)`` after every ``/tf`` message (on the subscription's thread)."""
        self._listeners.append(callback)

    def subscribe(self, node: Any) -> None:
        """Feeds the buffer from ``/tf`` and ``/tf_static`` (transient local, as tf2_ros listens) on ``node``."""
        from rclpy.qos import DurabilityPolicy, QoSProfile  # optional: ros2
        from tf2_msgs.msg import TFMessage  # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)

        static_qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        node.create_subscription(TFMessage, "/tf", lambda m: self.add_message(m), 100)
        node.create_subscription(TFMessage, "/tf_static", lambda m: self.add_message(m, static=True), static_qos)

    # ------------------------------------------------------------------ lookup
    def frames(self) -> set[str]:
        with self.lock:
            return set(self.edges) | {e.parent for e in self.edges.values()}

    def _chain(self, frame: str) -> list[str]:
        chain = [frame]
        while chain[-1] in self.edges:
            chain.append(self.edges[chain[-1]].parent)
            if len(chain) > 256:
                raise TfError(f"the TF tree has a loop through {frame!r}")
        return chain

    def _to_root(self, chain: list[str], upto: str, t: float | None) -> tuple[Pose, float]:
        """Pose of ``chain[0]`` in ``upto`` (an ancestor on the chain), and the oldest stamp used."""
        pose, oldest = IDENTITY, np.inf
        for child in chain:
            if child == upto:
                break
            edge_pose, stamp = self.edges[child].at(t, child)
            pose = compose(edge_pose, pose)
            oldest = min(oldest, stamp)
        return pose, oldest

    def lookup(self, target: str, source: str, t: float | None = None) -> tuple[np.ndarray, np.ndarray, float]:
        """Pose of frame ``source`` in frame ``target`` at time ``t`` (None: the newest on every edge): (position,
        quaternion w-x-y-z, stamp: ``t``, or the oldest newest-stamp used; ``inf`` when all edges are static)."""
        with self.lock:
            known = set(self.edges) | {e.parent for e in self.edges.values()}
            for frame in (target, source):
                if frame not in known:
                    raise TfError(f"frame {frame!r} is not in the TF tree (frames: {sorted(known)})")
            up_source, up_target = self._chain(source), self._chain(target)
            common = next((f for f in up_source if f in set(up_target)), None)
            if common is None:
                raise TfError(f"frames {target!r} and {source!r} are in unconnected TF trees")
            src, s_time = self._to_root(up_source, common, t)
            tgt, t_time = self._to_root(up_target, common, t)
        pos, quat = compose(invert(tgt), src)
        return pos, quat, (t if t is not None else min(s_time, t_time))

    def wait_lookup(self, target: str, source: str, timeout: float) -> tuple[np.ndarray, np.ndarray, float]:
        """:meth:`lookup` of the newest pose, retried until both frames are connected: a static transform reaches a
        new subscription some time after it starts. After ``timeout`` s, the lookup's own TfError."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.lookup(target, source)
            except TfError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def newest(self, frame: str) -> float:
        """Stamp of the newest transform of ``frame``'s edge to its parent (``-inf`` if none, ``inf`` if static)."""
        with self.lock:
            edge = self.edges.get(frame)
            if edge is None or not edge.times:
                return -np.inf
            return np.inf if edge.static else edge.times[-1]
