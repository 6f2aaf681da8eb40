"""Latent-noise steering of a frozen base policy (DSRL, Wagenmaker et al. 2025) as an env wrapper.

For a base whose flow/diffusion head takes its initial noise as an input (``metadata.accepts_noise``; the small
VLA does), the wrapper turns an env into the *latent-action* env: an action is a noise ``w`` in ``[-1, 1]^(H*A)``
(scaled by ``noise_scale``), one step decodes the base's chunk from the current observation with that noise and
executes its first ``execute_steps`` actions. The reward is the sum of theirs; the step ends early where the episode
does. Any off-policy agent (``agent.name: sac``, the RLPD recipe) then learns in the noise space: the base stays
frozen and no gradient goes through it, and a base behind a policy server works too (the noise travels in the
request). A zero noise is the base's deterministic decode.

    robot-rl train --agent.name sac \\
        --env.wrappers '[{"target": "robot_rl.policies.steering:LatentSteering",
                          "kwargs": {"path": "policies/vla_bench"}}]' ...

It sits where ``env.wrappers`` go (right after the env is made), so the env's observation must already be robot_rl's
contract (``state``, ``pixels``; the instruction text under ``instruction``), as robot_rl's own tasks are. One step of
this env is one chunk: ``total_env_steps`` and ``max_episode_steps`` of the inner env count control steps, the run's
counters count chunks. Teleoperation does not apply (a human cannot act in noise space).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.policies.config import BasePolicyConfig
from robot_rl.policies.loader import load_policy


class LatentSteering(gym.Wrapper):
    """See the module docstring. ``path``: the base (a saved policy folder or ``ws://HOST:PORT``); ``noise_scale``:
    the noise an action of 1 stands for; ``execute_steps``: actions of each chunk executed (0 = the whole chunk)."""

    def __init__(self, env: gym.Env, path: str, noise_scale: float = 1.5, execute_steps: int = 0,
                 timeout_s: float = 5.0) -> None:
        super().__init__(env)

        if noise_scale <= 0 or execute_steps < 0:
            raise ValueError(f"LatentSteering: noise_scale must be > 0 and execute_steps >= 0, got {noise_scale}, "
                             f"{execute_steps}")
        self.base = load_policy(BasePolicyConfig(path=path, timeout_s=timeout_s))
        meta = self.base.metadata
        if not meta.accepts_noise:
            self.base.close()
            raise ValueError(f"LatentSteering: the base policy at {path} takes no noise input "
                             "(metadata.accepts_noise is false); steer a flow or diffusion policy, or fine-tune with "
                             "agent.name residual")
        inner = env.action_space
        if not (isinstance(inner, gym.spaces.Box) and inner.shape == (meta.action_dim,)):
            raise ValueError(f"LatentSteering: the env's action space {inner} is not the base's [{meta.action_dim}]")
        self.noise_shape, self.noise_scale = tuple(meta.noise_shape), float(noise_scale)
        self.execute = min(execute_steps or meta.chunk_length, meta.chunk_length)
        size = int(np.prod(self.noise_shape))
        self.action_space = gym.spaces.Box(-1.0, 1.0, (size,), np.float32)
        self._low, self._high = inner.low.astype(np.float32), inner.high.astype(np.float32)
        self._normalised = bool(np.all(self._low == -1.0) and np.all(self._high == 1.0))
        self._obs: Any = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._obs = obs
        self.base.reset()
        return obs, info

    def decode(self, action: np.ndarray) -> np.ndarray:
        """The base's chunk ``[H, A]`` (normalised to [-1, 1]) for the current observation under this action."""
        noise = self.noise_scale * np.clip(np.asarray(action, np.float32), -1.0, 1.0).reshape(self.noise_shape)
        text = self._obs.get("instruction", "") if isinstance(self._obs, dict) else ""
        return self.base.infer(self._obs, text if isinstance(text, str) else "", noise)

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict]:
        chunk = self.decode(action)
        total, terminated, truncated, info, obs = 0.0, False, False, {}, self._obs
        for k in range(self.execute):
            raw = chunk[k] if self._normalised else self._low + (chunk[k] + 1.0) * 0.5 * (self._high - self._low)
            obs, reward, terminated, truncated, info = self.env.step(np.asarray(raw, np.float32))
            total += float(reward)
            if terminated or truncated:
                break
        self._obs = obs
        return obs, total, terminated, truncated, {**info, "steering_steps": k + 1}

    def close(self) -> None:
        self.base.close()
        super().close()
