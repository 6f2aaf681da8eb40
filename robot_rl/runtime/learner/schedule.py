"""When the learner logs, evaluates and checkpoints: each time the run's env steps cross a multiple of its
``*_every``, and a checkpoint also every ``checkpoint_every_s`` and when an actor's spool fills up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

SPOOL_CHECKPOINT_MIN_S = 5.0
"""Checkpoints for spool pressure (``runtime.spool_max_mb``) come at most this often."""


class Schedule:
    """The periodic tasks due now."""

    def __init__(self, cfg: Any, env_steps: int, spool_mb: Callable[[], float]) -> None:
        """``cfg``: the run's :class:`~robot_rl.training.config.TrainConfig`; ``env_steps``: where the run starts;
        ``spool_mb``: the fullest actor spool's size."""
        self.cfg, self.rt, self.spool_mb = cfg, cfg.runtime, spool_mb
        self._marks = {k: env_steps // max(1, getattr(cfg, f"{k}_every") or 1) for k in ("log", "eval", "checkpoint")}
        self.last_checkpoint = self._spool_checked = time.monotonic()

    def _crossed(self, key: str, every: int, env_steps: int) -> bool:
        if not every:
            return False
        mark = env_steps // every
        if mark > self._marks[key]:
            self._marks[key] = mark
            return True
        return False

    def due(self, env_steps: int) -> list[str]:
        """The tasks due at ``env_steps``, in order: ``log``, ``eval``, ``checkpoint``."""
        cfg, out = self.cfg, []
        if self._crossed("log", cfg.log_every, env_steps):
            out.append("log")
        if self._crossed("eval", cfg.eval_every, env_steps):
            out.append("eval")
        since = time.monotonic() - self.last_checkpoint
        by_time = cfg.checkpoint_every_s and since > cfg.checkpoint_every_s
        if self._crossed("checkpoint", cfg.checkpoint_every, env_steps) or (by_time and env_steps) \
                or (since > SPOOL_CHECKPOINT_MIN_S and self._spool_pressure()):
            out.append("checkpoint")
        return out

    def _spool_pressure(self) -> bool:
        """An actor's spool is at 80 % of ``runtime.spool_max_mb`` (checked at most once a second): a checkpoint
        trims it before a sim actor has to wait."""
        now = time.monotonic()
        if now - self._spool_checked < 1.0 or not self.rt.spool:
            return False
        self._spool_checked = now
        return self.spool_mb() >= 0.8 * self.rt.spool_max_mb
