"""The operator view of an actor's env 0 (``view.enabled``): its control periods, episode by episode."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.envs.contract import BatchStep
from robot_rl.view.live import OperatorView, ViewFrame, copy_cameras


class ActorView:
    """Env 0's periods to an :class:`~robot_rl.view.live.OperatorView` (recordings in ``<run>/view``)."""

    def __init__(self, cfg: Any, run_dir: Path) -> None:
        """``cfg``: the run's :class:`~robot_rl.view.live.ViewConfig`."""
        folder = Path(cfg.save_dir) if cfg.save_dir else run_dir / "view"
        self.view = OperatorView(cfg, "robot_rl train", folder)
        self.view.begin_episode("episode_00000")
        self._began = time.monotonic()

    def show(self, actions: np.ndarray, b: BatchStep, step: int, progress: dict[str, int]) -> None:
        """One control period (copies only: the view logs on its own thread); ``step``: env 0's step in its
        episode; ``progress``: env steps, episodes, policy version."""
        view, op, done = self.view, b.operator[0] if b.operator else None, bool(b.done[0])
        now = time.monotonic()
        control = op.control if op is not None else ("held" if b.paused[0] else "policy")
        view.frame(ViewFrame(
            control=control, episode_s=now - self._began, step=-1 if b.paused[0] else step,
            cameras=copy_cameras(b.final_obs if done else b.obs, 0), policy_action=np.array(actions[0]),
            person_action=None if op is None else op.action, reward=float(b.reward[0]), success=bool(b.success[0]),
            seconds_left=None if op is None else op.seconds_left, progress=progress))
        if done:
            episode = progress["episodes"]
            outcome = "success" if b.success[0] else ("truncated" if b.truncated[0] else "failure")
            by = " (labelled by the operator)" if op is not None and op.label else ""
            view.end_episode(f"episode {episode} ended: {outcome}{by}")
            view.begin_episode(f"episode_{episode + 1:05d}")
            self._began = now

    def close(self) -> None:
        self.view.close()
