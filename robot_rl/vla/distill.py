"""RL -> generalist distillation (RLDG, Xu et al. 2024): ``robot-rl distill RUN``.

A run that fine-tuned a specialist on one task (e.g. ``agent.name: residual`` on the small VLA) holds a policy that
succeeds more often than the generalist it started from. Distillation

1. rolls out the specialist (the run's latest policy, composed with its base as evaluation runs it) and keeps its
   successful episodes as a demo dataset (with each episode's instruction: ``<out>/specialist.zarr``);
2. re-trains the generalist by behaviour cloning on them mixed with its original data (``train.datasets``),
   starting from its weights (``train.init``, default: the run's base policy);
3. evaluates the generalist before and after on every task of that data (the same episodes for both), so a gain on
   the fine-tuned task and what the other tasks lost are measured side by side (``<out>/distill.json``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.torch import load_file

from robot_rl.agents.base import capabilities
from robot_rl.config import load_yaml
from robot_rl.datasets.record import record_demos
from robot_rl.datasets.sources import Step
from robot_rl.envs.make import make_env
from robot_rl.policies.vla_policy import load_vla
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.agents import build_agent
from robot_rl.training.config import TrainConfig
from robot_rl.training.evaluation import evaluation_agent
from robot_rl.utils.log import get_logger
from robot_rl.utils.run_dir import latest_checkpoint
from robot_rl.vla.data import ChunkDataset
from robot_rl.vla.train import TrainBCConfig, evaluate_tasks, resolve_datasets, train_bc

log = get_logger(__name__)


@dataclass(frozen=True)
class DistillConfig:
    """``robot-rl distill``: the specialist's successes into the generalist."""

    run: str = ""
    """The fine-tuning run folder (its config.yaml and latest checkpoint)."""
    episodes: int = 50
    """Successful specialist episodes to collect."""
    max_attempts: int = 0
    """Give up after this many episodes (0 = 4 x episodes)."""
    seed: int = 20_000
    """Episode i of the collection resets with seed + i (evaluation uses 10_000 + i: other placements)."""
    out: str = "policies/distilled"
    """Output folder: the re-trained generalist, the collected dataset and distill.json."""
    train: TrainBCConfig = field(default_factory=lambda: TrainBCConfig(steps=2000, lr=1e-4, warmup_steps=50))
    """Behaviour cloning: ``datasets`` is the generalist's original data (the collected episodes are added);
    ``init`` empty = the run's base policy; ``out`` is replaced by ``out`` above."""
    progress: bool = True
    """Show progress bars."""

    def validate(self) -> None:
        if not self.run:
            raise ValueError("distill: give the fine-tuning run folder (--run RUN)")
        if self.episodes < 1 or self.max_attempts < 0:
            raise ValueError("distill: episodes must be >= 1 and max_attempts >= 0")


class PolicyDevice:
    """A trained policy as a demo source for :func:`robot_rl.datasets.record.record_demos` (deterministic)."""

    name = "policy"
    human = False

    def __init__(self, actor: Any) -> None:
        self.actor, self.obs = actor, None

    def start(self, env: Any) -> None:
        pass

    def reset(self) -> None:
        pass

    def observe(self, obs: Any, info: dict[str, Any], first: bool) -> None:
        if first and capabilities(type(self.actor)).episodic:
            self.actor.begin_episode(info)
        self.obs = obs

    def step(self, env: Any) -> Step:
        return Step(np.asarray(self.actor.act(self.obs, deterministic=True), np.float32))

    def close(self) -> None:
        if hasattr(self.actor, "close"):
            self.actor.close()


def specialist(run: str | Path, env: Any) -> Any:
    """The run's latest policy acting in ``env``, composed with its base policy when it acts on one."""
    cfg = load_yaml(TrainConfig, Path(run) / "config.yaml")
    agent = build_agent(cfg, ObsSpec.from_space(env.observation_space), action_dim_of(env.action_space))
    agent.load_policy_state(load_file(str(latest_checkpoint(run) / "policy.safetensors")))
    return evaluation_agent(cfg, agent, env)


def collect(cfg: DistillConfig, path: Path) -> dict[str, Any]:
    """The specialist's successful episodes, recorded as a demo dataset at ``path``."""
    run_cfg = load_yaml(TrainConfig, Path(cfg.run) / "config.yaml")
    probe = make_env(run_cfg.env)
    try:
        device = PolicyDevice(specialist(cfg.run, probe))
    finally:
        probe.close()
    stats = record_demos(run_cfg.env.id, cfg.episodes, path, seed=cfg.seed, env_kwargs=run_cfg.env.kwargs,
                         progress=cfg.progress, device=device, max_attempts=cfg.max_attempts or 4 * cfg.episodes,
                         overwrite=True)
    return {"kept": cfg.episodes, "attempts": stats.attempts, "success_rate": cfg.episodes / max(1, stats.attempts)}


def distill(cfg: DistillConfig) -> dict[str, Any]:
    """Collect, re-train, evaluate before and after; writes ``<out>/distill.json`` and returns it."""
    cfg.validate()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    init = cfg.train.init or load_yaml(TrainConfig, Path(cfg.run) / "config.yaml").base_policy.path
    if not init or init.startswith("ws://"):
        raise ValueError(f"distill: the generalist to re-train must be a local small-VLA folder (train.init), got "
                         f"{init!r}")
    data = out / "specialist.zarr"
    collected = collect(cfg, data)
    log.info("collected %d successful specialist episodes in %d attempts", collected["kept"], collected["attempts"])
    train = dataclasses.replace(cfg.train, datasets=(*cfg.train.datasets, str(data)), init=init, out=str(out),
                                progress=cfg.progress)
    before_policy = load_vla(init)
    tasks = ChunkDataset(resolve_datasets(train, False), before_policy.cfg.chunk_length,
                         before_policy.cfg.text_encoder, before_policy.cfg.cameras).tasks()
    episodes = train.eval_episodes
    before = evaluate_tasks(before_policy, tasks, episodes, train.execution) if episodes else {}
    after = train_bc(train)["tasks"]
    summary = {"run": cfg.run, "init": init, "collected": collected, "episodes_per_task": episodes,
               "before": {k: v["success_rate"] for k, v in before.items()},
               "after": {k: v["success_rate"] for k, v in after.items()}}
    (out / "distill.json").write_text(json.dumps(summary, indent=1))
    return summary
