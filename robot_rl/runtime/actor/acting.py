"""What the actor does each period: warm-up actions (random, scripted, or a base policy's rollouts) until
``random_steps``, then the policy's; with a base policy, every env's chunk executor advances one step."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_rl.policies.evaluate import state_predictor
from robot_rl.policies.executor import ChunkExecutor
from robot_rl.policies.loader import load_policy


def row(tree: Any, i: int) -> Any:
    """Env ``i``'s observation out of a batched observation tree."""
    if isinstance(tree, dict):
        return {k: row(v, i) for k, v in tree.items()}
    return tree[i]


@dataclass(frozen=True)
class BaseSteps:
    """One control step of the base policy in every env: what runs (``action [N, A]``) and its index in its chunk
    (``index [N]``, -1 where the robot held because the next chunk was late)."""

    action: np.ndarray
    index: np.ndarray


class Acting:
    """Chooses every env's action for one control period."""

    def __init__(self, cfg: Any, env: Any, random_steps: int, rng: np.random.Generator) -> None:
        """``cfg``: the run's :class:`~robot_rl.training.config.TrainConfig`; ``random_steps``: the warm-up."""
        self.cfg, self.env, self.random_steps, self.rng = cfg, env, random_steps, rng
        self.n, self.action_dim = env.num_envs, env.single_action_space.shape[0]
        self.random_actions = 0  # uniformly random actions taken (warm-up)
        self.inference: deque[float] = deque(maxlen=2000)  # seconds per policy call
        self.base, self.executors = None, []
        if cfg.base_policy.path:
            self.base = load_policy(cfg.base_policy)
            rt = cfg.runtime
            period = 1.0 / rt.control_hz if rt.control_hz else None
            future = cfg.execution.mode == "future"
            self.executors = [ChunkExecutor(self.base, cfg.execution, period, state_predictor(e) if future else None)
                              for e in env.envs]

    def base_steps(self, obs: Any) -> BaseSteps | None:
        """Every env's base-policy step (its executor advances one control step), or None without a base."""
        if not self.executors:
            return None
        steps = [ex.step(row(obs, i), self.env.instructions[i]) for i, ex in enumerate(self.executors)]
        return BaseSteps(np.stack([s.action for s in steps]), np.array([s.chunk_index for s in steps], np.int64))

    def choose(self, obs: Any, steps: int, policy: Any, version: int) -> tuple[np.ndarray, int, BaseSteps | None]:
        """(actions, the policy version that chose them (0: warm-up; -1: none, wait for weights), base steps)."""
        warmup = steps < self.random_steps
        if warmup or version == 0:
            if not warmup:  # past warm-up without weights: wait for the learner rather than act randomly
                return np.empty(0), -1, None
            base = self.base_steps(obs)
            if base is not None:  # warm-up with a base policy: its rollouts, not random motion
                return self._warmup_with_base(base.action), 0, base
            if self.cfg.runtime.warmup == "scripted":
                return self.env.expert_actions(0.1), 0, None
            self.random_actions += self.n
            return self.rng.uniform(-1, 1, (self.n, self.action_dim)).astype(np.float32), 0, None
        base = self.base_steps(obs)
        if base is not None:
            obs = {**obs, "base_action": base.action, "chunk_index": base.index}
        t0 = time.perf_counter()
        actions = policy.act(obs)
        self.inference.append(time.perf_counter() - t0)
        return actions.astype(np.float32, copy=False), version, base

    def _warmup_with_base(self, proposals: np.ndarray) -> np.ndarray:
        """The base's proposals, each env's replaced by a uniform random action with probability
        warmup_random_share."""
        share = self.cfg.warmup_random_share
        if share <= 0.0:
            return proposals
        swap = self.rng.random(self.n) < share
        random = self.rng.uniform(-1, 1, (self.n, self.action_dim)).astype(np.float32)
        return np.where(swap[:, None], random, proposals).astype(np.float32, copy=False)

    def episode_ended(self, i: int) -> None:
        if self.executors:
            self.executors[i].reset()

    def base_stats(self) -> dict[str, int]:
        """The base policy's missed steps, late chunks and median inference (empty without a base)."""
        if not self.executors:
            return {}
        lat = [x for ex in self.executors for x in list(ex.latencies)]
        return {"base_missed": sum(ex.missed_steps for ex in self.executors),
                "base_late": sum(ex.late_chunks for ex in self.executors),
                "base_infer_us": int(np.median(lat) * 1e6) if lat else 0}

    def close(self) -> None:
        for ex in self.executors:
            ex.close()
        if self.base is not None:
            self.base.close()
