"""A wrapper that makes any env slow (for liveness tests): ``tests.runtime.slow_env:SlowStep``."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym


class SlowStep(gym.Wrapper):
    """Sleeps ``seconds`` in every step."""

    def __init__(self, env: gym.Env, seconds: float = 0.05) -> None:
        super().__init__(env)
        self.seconds = seconds

    def step(self, action: Any) -> tuple:
        time.sleep(self.seconds)
        return self.env.step(action)
