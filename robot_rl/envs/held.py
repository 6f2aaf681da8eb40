"""A held control period on a robot: the robot is commanded to hold still (the person has not started the episode
yet, paused it, or let go of the device) and the period is not one of the episode's steps.

A robot cannot simply be left alone while held (its command stream must go on, or the controller's watchdog stops
it), so the hold runs through the whole wrapper chain like any step; but an episode's time limit counts the
episode's own steps: a person who waits longer than the episode lasts before pressing start must still get the
episode, and a pause must not use it up. So the robot env is told the period is held (its ``holding`` attribute:
no step counted, no end of episode), every gymnasium ``TimeLimit`` in the chain gets the period back, and whatever
else the period said about the episode's end (a reward classifier's success on a frame nobody played) is dropped.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def held_step(env: gym.Env, action: np.ndarray) -> tuple[Any, float, dict]:
    """Steps ``env`` (a robot env, possibly wrapped) one held period with ``action`` (its hold action); returns the
    observation, the reward and the info. The episode neither advances nor ends."""
    base = env.unwrapped
    marks = hasattr(base, "holding")
    if marks:
        base.holding = True
    try:
        obs, reward, _terminated, _truncated, info = env.step(action)
    finally:
        if marks:
            base.holding = False
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, gym.wrappers.TimeLimit):
            layer._elapsed_steps = max(0, layer._elapsed_steps - 1)  # gymnasium keeps the episode's count there
        layer = layer.env
    return obs, float(reward), dict(info)
