"""The observation/action contract shared by envs, replay and agents.

Observation: ``{"state": float32 [D], "pixels": {camera: uint8 [H, W, 3]}, "instruction": float32 [E]}`` (``pixels``
only with cameras, ``instruction`` only for language-conditioned tasks: the embedding of the episode's instruction,
see :mod:`robot_rl.text`); action: float32 ``[A]`` in [-1, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class ObsSpec:
    """Shapes of one observation: proprioception size, camera name -> ``(H, W, 3)`` and the instruction
    embedding's size (0 = no instruction)."""

    state_dim: int
    cameras: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    instruction_dim: int = 0

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
        instruction = space.spaces.get("instruction")
        if instruction is not None and not (isinstance(instruction, gym.spaces.Box) and len(instruction.shape) == 1
                                            and instruction.dtype == np.float32):
            raise TypeError(f"observation 'instruction' must be a float32 embedding Box [E], got {instruction} (the "
                            "env pipeline's adapter embeds an env's instruction text: env.instruction_encoder)")
        return cls(state_dim=int(state.shape[0]), cameras=cameras,
                   instruction_dim=int(instruction.shape[0]) if instruction is not None else 0)

    def to_space(self) -> gym.spaces.Dict:
        spaces: dict[str, gym.Space] = {
            "state": gym.spaces.Box(-np.inf, np.inf, (self.state_dim,), np.float32)}
        if self.cameras:
            spaces["pixels"] = gym.spaces.Dict(
                {k: gym.spaces.Box(0, 255, shape, np.uint8) for k, shape in self.cameras.items()})
        if self.instruction_dim:
            spaces["instruction"] = gym.spaces.Box(-np.inf, np.inf, (self.instruction_dim,), np.float32)
        return gym.spaces.Dict(spaces)

    def obs_arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The observation's arrays by flat name (``state``, ``instruction``, ``pixels/<cam>``) -> (shape, dtype):
        how the replay, chunks and stores lay an observation out."""
        out: dict[str, tuple[tuple[int, ...], np.dtype]] = {"state": ((self.state_dim,), np.dtype(np.float32))}
        if self.instruction_dim:
            out["instruction"] = ((self.instruction_dim,), np.dtype(np.float32))
        for cam, shape in sorted(self.cameras.items()):
            out[f"pixels/{cam}"] = (tuple(shape), np.dtype(np.uint8))
        return out


def obs_row(arrays: Any, names: tuple[str, ...], row: int) -> dict[str, Any]:
    """Row ``row`` of flat observation arrays (``state``, ``pixels/<cam>``, ... as :meth:`ObsSpec.obs_arrays`
    names them) as a nested observation."""
    obs: dict[str, Any] = {}
    for name in names:
        *parents, leaf = name.split("/")
        node = obs
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = arrays[name][row]
    return obs


def obs_leaf(obs: Any, name: str) -> Any:
    """``obs_leaf(obs, "pixels/front")`` = ``obs["pixels"]["front"]`` (a flat name of :meth:`ObsSpec.obs_arrays`)."""
    for part in name.split("/"):
        obs = obs[part]
    return obs


def action_dim_of(space: gym.Space) -> int:
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise TypeError(f"action space must be a 1-D Box, got {space}")
    if not (np.all(space.low == -1) and np.all(space.high == 1)):
        raise ValueError(f"action space must be normalised to [-1, 1] (got low={space.low}, high={space.high}); "
                         "make envs through robot_rl.envs.make_env, whose adapter scales actions")
    return int(space.shape[0])
