"""The observation/action contract shared by envs, replay and agents.

Observation: ``{"state": float32 [D], "pixels": {camera: uint8 [H, W, 3]}}``; action: float32 ``[A]`` in [-1, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class ObsSpec:
    """Shapes of one observation: proprioception size and camera name -> ``(H, W, 3)``."""

    state_dim: int
    cameras: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    @classmethod
    def from_space(cls, space: gym.Space) -> ObsSpec:
        if not isinstance(space, gym.spaces.Dict) or "state" not in space.spaces:
            raise TypeError(f"observation space must be a Dict with a 'state' Box (got {space}); "
                            "make envs through robot_rl.envs.make_env, whose adapter maps them (env.obs_map)")
        state = space["state"]
        if not isinstance(state, gym.spaces.Box) or len(state.shape) != 1:
            raise TypeError(f"observation 'state' must be a 1-D Box, got {state}")
        cameras: dict[str, tuple[int, int, int]] = {}
        if "pixels" in space.spaces:
            for name, cam in space["pixels"].spaces.items():
                if not (isinstance(cam, gym.spaces.Box) and cam.dtype == np.uint8 and len(cam.shape) == 3
                        and cam.shape[2] == 3):
                    raise TypeError(f"camera {name!r} must be a uint8 Box [H, W, 3], got {cam}")
                cameras[name] = tuple(int(s) for s in cam.shape)  # type: ignore[assignment]
        return cls(state_dim=int(state.shape[0]), cameras=cameras)

    def to_space(self) -> gym.spaces.Dict:
        spaces: dict[str, gym.Space] = {
            "state": gym.spaces.Box(-np.inf, np.inf, (self.state_dim,), np.float32)}
        if self.cameras:
            spaces["pixels"] = gym.spaces.Dict(
                {k: gym.spaces.Box(0, 255, shape, np.uint8) for k, shape in self.cameras.items()})
        return gym.spaces.Dict(spaces)


def action_dim_of(space: gym.Space) -> int:
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise TypeError(f"action space must be a 1-D Box, got {space}")
    if not (np.all(space.low == -1) and np.all(space.high == 1)):
        raise ValueError(f"action space must be normalised to [-1, 1] (got low={space.low}, high={space.high}); "
                         "make envs through robot_rl.envs.make_env, whose adapter scales actions")
    return int(space.shape[0])
