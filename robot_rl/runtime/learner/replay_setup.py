"""The learner's replay at start-up: from the checkpoint it resumes, or fresh with the run's demonstrations (those
of ``scripted:N`` recorded on first use, and labelled with a base policy's proposals when the agent acts on one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.agents.registry import uses_base
from robot_rl.datasets.record import ensure_demos
from robot_rl.policies.loader import load_policy
from robot_rl.policies.relabel import dataset_instructions, label_base_proposals
from robot_rl.replay.buffer import ReplayBuffer
from robot_rl.replay.store import add_dataset
from robot_rl.runtime.checkpoint import load_checkpoint
from robot_rl.runtime.learner.counters import LearnerCounters
from robot_rl.spaces import ObsSpec
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


def learner_replay(cfg: Any, start: Path | None, agent: Any, spec: ObsSpec, action_dim: int,
                   seed: int) -> tuple[ReplayBuffer, LearnerCounters]:
    """The replay and the counters: the checkpoint ``start``'s (its agent state loaded into ``agent``), or fresh;
    ``seed``: the sampler's."""
    if start is not None:
        replay, saved = load_checkpoint(start, agent, cfg.replay, spec, action_dim)
        return replay or ReplayBuffer(spec, action_dim, cfg.replay, seed=seed), LearnerCounters.from_json(saved)
    replay = ReplayBuffer(spec, action_dim, cfg.replay, seed=seed)
    added = []
    for entry in cfg.demos:
        path, before = str(demo_path(cfg, entry)), replay.partitions["demos"].size
        add_dataset(replay, path, "demos")
        added.append((path, np.arange(before, replay.partitions["demos"].size)))
    if added and uses_base(cfg.agent):
        label_demos(cfg, replay, added)
    return replay, LearnerCounters()


def label_demos(cfg: Any, replay: ReplayBuffer, added: list[tuple[str, np.ndarray]]) -> None:
    """The base policy's proposals on every demo step (what it would have done there; ``added``: each dataset's
    rows), for agents acting on a base (robot_rl.policies.relabel). Checkpoints keep the labels."""
    policy = load_policy(cfg.base_policy)
    try:
        labelled = sum(label_base_proposals(replay.partitions["demos"], policy, rows, dataset_instructions(path),
                                            cfg.execution.execute_steps)
                       for path, rows in added)
    finally:
        policy.close()
    log.info("labelled %d demo transitions with the base policy's proposals", labelled)


def demo_path(cfg: Any, entry: str) -> Path:
    """A demo dataset path, or ``scripted:N``: N scripted-expert demos of this task, recorded on first use."""
    if not entry.startswith("scripted:"):
        return Path(entry)
    try:
        n = int(entry.split(":", 1)[1])
    except ValueError:
        raise ValueError(f"demos: {entry!r} is neither a path nor 'scripted:<number of episodes>'") from None
    return ensure_demos(cfg.env.id, n, seed=cfg.seed, env_kwargs=cfg.env.kwargs)
