"""Deterministic evaluation episodes with success rate, return and cycle time."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.runtime.stats import bootstrap_ci


def evaluate(agent: Any, env: gym.Env, episodes: int, seed: int = 10_000) -> dict[str, float]:
    """Runs ``episodes`` deterministic episodes. Success is ``info["is_success"]`` at the episode's end
    (NaN when the env does not report it); cycle time is the mean length of successful episodes. Each figure
    comes with a 95 % percentile-bootstrap interval (``*_ci_low`` / ``*_ci_high``)."""
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
    has_success = not np.all(np.isnan(succ))
    _, ret_lo, ret_hi = bootstrap_ci(np.array(returns))
    rate, rate_lo, rate_hi = bootstrap_ci(succ) if has_success else (float("nan"),) * 3
    cycle, cycle_lo, cycle_hi = bootstrap_ci(np.array(lengths)[ok]) if ok.any() else (float("nan"),) * 3
    return {
        "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)),
        "return_ci_low": ret_lo, "return_ci_high": ret_hi,
        "success_rate": rate, "success_ci_low": rate_lo, "success_ci_high": rate_hi,
        "episode_length": float(np.mean(lengths)),
        "cycle_time": cycle, "cycle_time_ci_low": cycle_lo, "cycle_time_ci_high": cycle_hi,
    }
