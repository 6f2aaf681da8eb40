"""A tiny pixel env and a scripted teleop device for the reward tests (no MuJoCo, instant)."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from robot_rl.teleop.base import TeleopReading


class BrightnessEnv(gym.Env):
    """Frames are uniform images whose brightness is ``levels[t]`` at step ``t`` (so a stub classifier can read
    a scripted probability from them); ``info["is_success"]`` is ``env_success[t]``; ends after the levels."""

    def __init__(self, levels: Sequence[int], env_success: Sequence[bool] | None = None, size: int = 8,
                 cameras: Sequence[str] = ("front",), terminate_at: int | None = None) -> None:
        self.levels = list(levels)
        self.env_success = list(env_success) if env_success is not None else [False] * len(self.levels)
        self.size, self.cameras, self.terminate_at = size, tuple(cameras), terminate_at
        box = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.observation_space = gym.spaces.Dict({
            "state": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
            "pixels": gym.spaces.Dict({c: box for c in self.cameras})})
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.t = 0
        self.actions: list[np.ndarray] = []
        self.resets = 0

    def _obs(self) -> dict:
        level = self.levels[min(self.t, len(self.levels) - 1)]
        frame = np.full((self.size, self.size, 3), level, np.uint8)
        return {"state": np.zeros(2, np.float32), "pixels": {c: frame.copy() for c in self.cameras}}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.resets += 1
        return self._obs(), {"is_success": False}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        self.actions.append(np.asarray(action))
        self.t += 1
        success = bool(self.env_success[min(self.t, len(self.env_success) - 1)])
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        truncated = self.t >= len(self.levels) - 1 and not terminated
        return self._obs(), float(success), terminated, truncated, {"is_success": success}

    def hold_action(self) -> np.ndarray:
        return np.zeros(2, np.float32)


class StubClassifier:
    """Duck-types RewardClassifier: the success probability of a frame is its brightness / 255."""

    def __init__(self, size: int = 8, cameras: Sequence[str] = ("front",), threshold: float = 0.5) -> None:
        self.camera_shapes = {c: (size, size, 3) for c in cameras}
        self.threshold = threshold

    def eval(self) -> StubClassifier:
        return self

    def predict_proba(self, pixels: dict) -> np.ndarray:
        frame = np.asarray(pixels[next(iter(self.camera_shapes))])
        return np.array([frame.reshape(-1)[0] / 255.0])


class ScriptedKeys:
    """A TeleopDevice replaying a list of readings (events per control period), then idle."""

    action_dim = 2

    def __init__(self, script: Sequence[tuple[bool, Sequence[str]]], interrupt_after: int | None = None) -> None:
        self.script = list(script)
        self.calls = 0
        self.interrupt_after = interrupt_after
        self.closed = False

    def read(self) -> TeleopReading:
        if self.interrupt_after is not None and self.calls >= self.interrupt_after:
            raise KeyboardInterrupt
        active, events = self.script[self.calls] if self.calls < len(self.script) else (False, ())
        self.calls += 1
        return TeleopReading(np.full(2, 0.5, np.float32), active=active, events=frozenset(events))

    def close(self) -> None:
        self.closed = True
