"""The learner's rate limiter: one ``agent.update`` owed per env step past ``learning_starts``, and the
update-to-data ratio over the last ``runtime.utd_window`` env steps."""

from __future__ import annotations

from collections import deque
from typing import Any

from robot_rl.runtime.learner.counters import LearnerCounters


class UpdateRate:
    """Updates owed, whether to hold the intake, and the windowed ratio."""

    def __init__(self, cfg: Any, counters: LearnerCounters, utd: int) -> None:
        """``cfg``: the run's :class:`~robot_rl.training.config.TrainConfig`; ``utd``: gradient steps per update."""
        self.cfg, self.rt, self.counters, self.utd = cfg, cfg.runtime, counters, utd
        # (env steps, updates done by the time the next env step came in): the windowed update-to-data ratio
        self._trace: deque[tuple[int, int]] = deque([(counters.env_steps, counters.updates)])

    def owed(self) -> int:
        due = max(0, self.counters.env_steps - self.cfg.learning_starts)
        return due - self.counters.updates

    def owes_too_much(self) -> bool:
        """Taking in more now would leave the learner more than the lag bound behind the data: a spool read back
        after a restart arrives all at once, and its updates come first, so every window's ratio holds. A robot's
        actor is never blocked (bound 0): what it sends is taken as it comes."""
        bound = self.rt.update_lag_bound()
        return bool(bound) and self.owed() > bound

    def trace(self) -> None:
        """Records where the counters stand (after each learner step)."""
        c, trace = self.counters, self._trace
        if trace[-1][0] == c.env_steps:
            trace[-1] = (c.env_steps, c.updates)
        else:
            trace.append((c.env_steps, c.updates))
        while len(trace) > 2 and trace[1][0] <= c.env_steps - self.rt.utd_window:
            trace.popleft()

    def windowed(self) -> float:
        """The update-to-data ratio over the last ``runtime.utd_window`` env steps (at least that many: from the
        newest trace point that far back); NaN until ``learning_starts`` + the window."""
        (e0, u0), (e1, u1) = self._trace[0], self._trace[-1]
        if e0 < self.cfg.learning_starts or e1 - e0 < self.rt.utd_window:
            return float("nan")
        return (u1 - u0) * self.utd / (e1 - e0)
