"""``runtime.processes: false``: the actor and the learner take turns in one process (debugging, small tests)."""

from __future__ import annotations

from pathlib import Path

from robot_rl.runtime.status_line import status_line
from robot_rl.training.config import TrainConfig
from robot_rl.utils.progress import progress_bar


def run_inprocess(cfg: TrainConfig, run_dir: Path, resume: bool) -> dict[str, float]:
    """Runs the whole training in this process; the final evaluation."""
    from robot_rl.runtime.actor import Actor  # lazy: in-process mode only
    from robot_rl.runtime.learner import Learner  # lazy: in-process mode only (keeps matplotlib out of the supervisor)

    learner = Learner(cfg, run_dir, resume=resume)
    actor = Actor(cfg, run_dir)
    try:
        with progress_bar(cfg.progress, info=True, every_s=cfg.progress_every_s) as progress:
            task = progress.add_task("train", total=cfg.total_env_steps, info="")
            while True:
                actor.step()
                actor.publish_stats()
                if not learner.step():
                    break
                progress.update(task, completed=learner.counters.env_steps, info=status_line(run_dir))
    finally:
        actor.close()
        actor.outbox.ring.close(unlink=True)
        learner.close(unlink=True)
    return learner.last_eval
