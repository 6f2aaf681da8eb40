"""The learner's side of the weight board: versioned weights, heartbeat and progress for the actors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from robot_rl.agents.base import Agent
from robot_rl.runtime.learner.counters import LearnerCounters
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import board_name
from robot_rl.training.config import TrainConfig


class Publisher:
    """The learner's side of the weight board: versioned weights, heartbeat and progress for the actors."""

    def __init__(self, run_dir: Path, agent: Agent, counters: LearnerCounters, cfg: TrainConfig) -> None:
        self.agent, self.counters, self.rt = agent, counters, cfg.runtime
        name, template = board_name(run_dir), agent.policy_state()
        try:
            self.board = shm.WeightBoard(name, template)  # a restarted learner keeps the board its actors hold
        except FileNotFoundError:
            self.board = shm.WeightBoard(name, template, create=True)
        # Versions only grow, also across restarts: actors ignore anything not newer than what they hold.
        counters.version = max(counters.version, self.board.version)
        self.published_at: dict[int, int] = {}
        """Policy version -> env steps taken in when it was published, for weights trained by at least one update
        (the policy lag in env steps)."""
        self._last_time, self._last_updates = 0.0, -1
        self._beat_lock = threading.Lock()
        self.beat()

    def publish(self) -> None:
        """Publishes the policy (what ``agent.policy_state`` returns) under the next version number."""
        self.counters.version += 1
        self.board.publish(self.agent.policy_state(), self.counters.version)
        if self.counters.updates:  # trained weights: the data they act on has a policy lag (the first have none)
            self.published_at[self.counters.version] = self.counters.env_steps
            self.published_at.pop(self.counters.version - 10_000, None)  # actors act on recent versions only
        self._last_time, self._last_updates = time.perf_counter(), self.counters.updates

    def after_step(self, updated: bool) -> None:
        if (self.counters.updates - self._last_updates >= self.rt.publish_every_updates
                or (updated and time.perf_counter() - self._last_time > self.rt.publish_every_seconds)):
            self.publish()
        self.beat()

    def beat(self) -> None:
        with self._beat_lock:
            self.board.beat(self.counters.updates, self.counters.env_steps)

    @contextmanager
    def keep_alive(self, period: float = 0.25) -> Iterator[None]:
        """Heartbeats from a thread while the body runs (an evaluation or a checkpoint longer than
        ``runtime.heartbeat_timeout`` must not look like a dead learner)."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(period):
                self.beat()
        thread = threading.Thread(target=beat, name="learner-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.beat()

    def stop_actors(self) -> None:
        self.board.request_stop()

    def close(self, unlink: bool = False) -> None:
        self.board.close(unlink=unlink)
