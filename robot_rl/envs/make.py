"""Builds the env a run trains on from its config: any gymnasium id, adapted to the robot_rl contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.envs.wrappers import StateDictObservation


@dataclass
class EnvConfig:
    """Which environment to run and how."""

    id: str = "Pendulum-v1"
    """A gymnasium id (robot_rl/<Task>-v0 for the sim tasks, or any registered id such as HalfCheetah-v5)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments passed to gymnasium.make."""
    max_episode_steps: int | None = None
    """Override the env's time limit (None keeps the registered one)."""


def make_env(cfg: EnvConfig, render_mode: str | None = None) -> gym.Env:
    """``gymnasium.make`` + action rescaled to [-1, 1] + Box observations wrapped as ``{"state": ...}``."""
    if cfg.id.startswith("robot_rl/"):
        import robot_rl_sim  # noqa: F401  (registers the sim tasks)
    try:
        env = gym.make(cfg.id, max_episode_steps=cfg.max_episode_steps, render_mode=render_mode, **cfg.kwargs)
    except gym.error.Error as exc:
        raise ValueError(f"env.id: cannot make {cfg.id!r}: {exc}") from exc
    if not isinstance(env.action_space, gym.spaces.Box):
        raise ValueError(f"env.id: {cfg.id!r} has a {type(env.action_space).__name__} action space; "
                         "robot_rl needs continuous (Box) actions")
    space = env.action_space
    if not (np.all(space.low == -1) and np.all(space.high == 1)):
        ones = np.ones(space.shape, np.float32)
        env = gym.wrappers.RescaleAction(env, -ones, ones)
    if env.action_space.dtype != np.float32:
        env = gym.wrappers.TransformAction(
            env, lambda a: a, gym.spaces.Box(-1.0, 1.0, env.action_space.shape, np.float32))
    if isinstance(env.observation_space, gym.spaces.Box):
        env = StateDictObservation(env)
    return env
