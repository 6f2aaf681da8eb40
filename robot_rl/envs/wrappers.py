"""Wrappers adapting plain gymnasium envs to the observation contract (``{"state": float32 [D]}``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class StateDictObservation(gym.ObservationWrapper):
    """A flat ``Box`` observation becomes ``{"state": float32 [D]}``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise TypeError(f"StateDictObservation needs a 1-D Box observation space, got {space}")
        self.observation_space = gym.spaces.Dict({
            "state": gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32),
                                    space.shape, np.float32)})

    def observation(self, observation: Any) -> dict[str, np.ndarray]:
        return {"state": np.asarray(observation, dtype=np.float32)}
