"""Whether the actor steps now: the run's env steps against the learner's updates (the update-to-data bound), and
the learner's heartbeat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robot_rl.runtime.progress import run_progress
from robot_rl.runtime.transport import shm
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


class LearnerPace:
    """The actor's view of the learner: the run's env steps, the updates owed, and whether to hold."""

    def __init__(self, cfg: Any, run_dir: Path, uid: str) -> None:
        """``cfg``: the run's :class:`~robot_rl.training.config.TrainConfig`."""
        self.cfg, self.rt, self.uid = cfg, cfg.runtime, uid
        # the run's steps and updates before this actor (its folder: checkpoint + spools), while no learner is up
        self.before = run_progress(run_dir)
        self.held = False  # the last period held for the learner (max_update_lag, catching up, spool full)
        # an episode ended (catch_up_between_episodes), or a never-blocked actor resumes a run: hold, robot at rest
        # after its reset, until the learner caught up (the update-to-data ratio holds from the first window)
        self.catching_up = self.before.env_steps > 0 and not self.rt.update_lag_bound()
        self._silent = False

    def run_steps(self, board: shm.WeightBoard | None, own: int, taken: tuple[int, int]) -> tuple[Any, int]:
        """The learner's status (None before there is one) and this run's env steps: the learner's count plus what
        this actor sent (``own``) that the learner has not taken in yet (``taken``: the outbox's ``not_taken``)."""
        learner = board.status() if board is not None else None
        on_disk = self.before.env_steps + own  # what a learner not up yet (or not through the spools) does not count
        if learner is None:
            return None, on_disk
        return learner, max(on_disk, learner.env_steps + own - taken[1])

    def owed_updates(self, learner: Any, steps: int) -> int:
        """Updates the learner owes: one per env step past learning_starts. No learner yet = the updates of the
        run's latest checkpoint, so a sim actor that starts before its learner stops at the same bound as one beside
        a slow learner, on a resumed run too."""
        due = max(0, steps - self.cfg.learning_starts)
        return due - (learner.updates if learner is not None else self.before.updates)

    def update(self, learner: Any, steps: int) -> bool:
        """Whether to hold this period for the learner (sets :attr:`held`)."""
        silent = learner is not None and learner.beat_ns > 0 and learner.beat_age_s > self.rt.heartbeat_timeout
        if silent and not self._silent:
            log.warning("actor %s: no learner heartbeat for %.0f s", self.uid, learner.beat_age_s)
        self._silent = silent
        bound = self.rt.update_lag_bound()
        owed = self.owed_updates(learner, steps)
        self.held = bool(bound) and owed > bound
        if self.catching_up:
            self.catching_up = owed > self.rt.derived_lag_bound()
            self.held |= self.catching_up
        return self.held

    def episode_ended(self) -> None:
        self.catching_up = self.rt.catch_up_between_episodes
