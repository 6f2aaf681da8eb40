"""What the supervisor knows of its children beyond their exit codes: whether each one's heartbeat is fresh
(:class:`Heartbeats`), and how many restarts a kind of process has left in a sliding window (:class:`RestartBudget`).

A learner beats on the run's weight board (with its pid), an actor on its ring's header (its ring is named in its
registration, ``<run>/actors/<uid>.json``, with its pid). A process counts as hung when its newest beat is older than
``runtime.heartbeat_timeout``, or when it has not beaten at all ``runtime.startup_timeout`` after it was started.
"""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path

from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, board_name

MAX_BACKOFF_S = 30.0


class RestartBudget:
    """At most ``limit`` restarts within any ``window_s`` seconds; the n-th restart inside the window waits
    ``backoff_s * 2 ** (n - 1)`` seconds (at most :data:`MAX_BACKOFF_S`)."""

    def __init__(self, limit: int, window_s: float, backoff_s: float) -> None:
        self.limit, self.window_s, self.backoff_s = limit, window_s, backoff_s
        self.times: deque[float] = deque()

    def take(self, now: float | None = None) -> float | None:
        """Spends one restart: the seconds to wait before it, or None when the window's budget is spent."""
        now = time.monotonic() if now is None else now
        while self.times and now - self.times[0] > self.window_s:
            self.times.popleft()
        if len(self.times) >= self.limit:
            return None
        delay = min(MAX_BACKOFF_S, self.backoff_s * 2 ** len(self.times)) if self.backoff_s else 0.0
        self.times.append(now)
        return delay


class Heartbeats:
    """Heartbeat ages of a run's learner and actors, found by pid (a process of an earlier life, with another pid,
    never stands in for the one being watched)."""

    def __init__(self, run_dir: Path, timeout_s: float, startup_s: float) -> None:
        self.run_dir, self.timeout_s, self.startup_s = run_dir, timeout_s, startup_s
        self.started: dict[int, float] = {}
        """pid -> when the supervisor started it (``time.monotonic``)."""

    def watch(self, pid: int) -> None:
        self.started[pid] = time.monotonic()

    def learner_age(self, pid: int) -> float | None:
        """Seconds since learner ``pid`` last beat; None before its first beat."""
        status = shm.peek_learner_status(board_name(self.run_dir))
        if status is None or status.pid != pid or status.beat_ns <= 0:
            return None
        return status.beat_age_s

    def actor_age(self, pid: int) -> float | None:
        """Seconds since actor ``pid`` last beat on its ring; None before it registered and beat."""
        folder = actor_dir(self.run_dir)
        for path in folder.glob("*.json") if folder.is_dir() else ():
            try:
                info = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if int(info.get("pid", -1)) != pid:
                continue
            status = shm.ring_status(info["ring"])
            if status is None or status.heartbeat_ns <= 0:
                return None
            return (time.time_ns() - status.heartbeat_ns) / 1e9
        return None

    def hung(self, pid: int, age: float | None) -> str | None:
        """Why process ``pid`` (heartbeat age ``age``) counts as hung, or None while it is alive."""
        if age is not None:
            return f"no heartbeat for {age:.0f} s (runtime.heartbeat_timeout {self.timeout_s:g})" \
                if age > self.timeout_s else None
        waited = time.monotonic() - self.started.get(pid, time.monotonic())
        if waited > self.startup_s:
            return f"no first heartbeat {waited:.0f} s after start (runtime.startup_timeout {self.startup_s:g})"
        return None
