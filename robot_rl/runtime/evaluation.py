"""Deterministic evaluation episodes with success rate, return and cycle time."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def evaluate(agent: Any, env: gym.Env, episodes: int, seed: int = 10_000) -> dict[str, float]:
    """Runs ``episodes`` deterministic episodes. Success is ``info["is_success"]`` at the episode's end
    (NaN when the env does not report it); cycle time is the mean length of successful episodes."""
    returns, lengths, successes = [], [], []
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        done, ret, length = False, 0.0, 0
        while not done:
            obs, reward, terminated, truncated, info = env.step(agent.act(obs, deterministic=True))
            ret += float(reward)
            length += 1
            done = terminated or truncated
        returns.append(ret)
        lengths.append(length)
        successes.append(float(info["is_success"]) if "is_success" in info else np.nan)
    succ = np.array(successes)
    ok = ~np.isnan(succ) & (succ > 0)
    return {
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "success_rate": float(np.nanmean(succ)) if not np.all(np.isnan(succ)) else float("nan"),
        "episode_length": float(np.mean(lengths)),
        "cycle_time": float(np.mean(np.array(lengths)[ok])) if ok.any() else float("nan"),
    }
