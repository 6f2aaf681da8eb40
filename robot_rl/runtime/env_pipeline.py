"""The training env: the env pipeline's stages 1-3 (robot_rl.envs.make) followed by what only a training run adds,
in this order:

4. **reward override** - the learned reward classifier when ``reward.path`` is set;
5. **teleop** - the intervention wrapper when ``teleop.device`` is set;
6. **batching** - the actor's ``runtime.num_envs`` envs as one :class:`~robot_rl.envs.batched.BatchedEnv`.

These stages wrap envs in robot_rl.rewards and robot_rl.teleop, which sit above robot_rl.envs in the package layers
(docs/design/package-layers.md), so they are composed here rather than in envs. Every stage that fails raises
``ValueError`` naming the config field.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym

from robot_rl.envs.batched import BatchedEnv
from robot_rl.envs.config import EnvConfig
from robot_rl.envs.make import make_env
from robot_rl.rewards.wrapper import ClassifierReward, ClassifierRewardConfig
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.intervention import wrap_with_teleop


def make_training_env(cfg: EnvConfig, render_mode: str | None = None, *,
                      reward: ClassifierRewardConfig | None = None, teleop: TeleopConfig | None = None,
                      teleop_seed: int = 0) -> gym.Env:
    """One env through stages 1-5 (without ``reward`` and ``teleop``: the env :func:`make_env` makes)."""
    learned_reward = reward is not None and bool(reward.path)
    # A learned reward decides success: a robot_rl task must not end episodes on its own success check.
    extra = {"terminate_on_success": False} if learned_reward and cfg.id.startswith("robot_rl/") else {}
    env = make_env(cfg, render_mode, extra_kwargs=extra)
    if learned_reward:
        try:
            env = ClassifierReward(env, reward.path, reward)
        except (ValueError, FileNotFoundError, KeyError) as exc:
            raise ValueError(f"reward.path: {exc}") from exc
    if teleop is not None and teleop.device != "none":
        env = wrap_with_teleop(env, teleop, seed=teleop_seed)
    return env


def make_batched_env(cfg: EnvConfig, num_envs: int, *, reward: ClassifierRewardConfig | None = None,
                     teleop: TeleopConfig | None = None, teleop_seeds: Sequence[int] = ()) -> BatchedEnv:
    """Stage 6: ``num_envs`` training envs as one batched env (env i's scripted human seeded ``teleop_seeds[i]``)."""
    seeds = list(teleop_seeds) or list(range(num_envs))
    return BatchedEnv([lambda i=i: make_training_env(cfg, reward=reward, teleop=teleop, teleop_seed=seeds[i])
                       for i in range(num_envs)])
