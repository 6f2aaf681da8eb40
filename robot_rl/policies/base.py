"""The base-policy contract: a generalist (vision-language-action) policy as robot_rl runs it.

A base policy maps one observation (the robot_rl contract: ``state`` float32 ``[D]``, ``pixels`` camera -> uint8
``[H, W, 3]``) and a language instruction to an **action chunk** float32 ``[H, A]`` in the env's normalised
action units ([-1, 1]), the next ``H`` control steps. What a runtime needs to know to run it is its
:class:`PolicyMetadata`. Implementations: the built-in VLA (:mod:`robot_rl.vla`, loaded by
:func:`robot_rl.policies.load_policy`), a policy server speaking openpi's websocket protocol
(:class:`~robot_rl.policies.client.RemotePolicy`) and LeRobot policies
(:class:`~robot_rl.policies.lerobot.LeRobotPolicy`).

Chunks are executed by :class:`~robot_rl.policies.executor.ChunkExecutor` (sync, async, future-state-aware
async), off the control thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class PolicyMetadata:
    """What a runtime needs to know about a base policy."""

    action_dim: int
    """A: size of one action (the env's action space, normalised to [-1, 1])."""
    chunk_length: int
    """H: actions per inference."""
    control_hz: float = 20.0
    """The control rate the policy was trained for (its actions are per step at this rate)."""
    state_dim: int = 0
    """D: size of the proprioceptive state it expects (0 = it takes none)."""
    cameras: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    """Camera name -> (H, W, 3) it expects; an observation's frames of another size are resized by the policy."""
    accepts_noise: bool = False
    """It takes the initial noise of its flow/diffusion head as an input (latent-noise steering needs this)."""
    noise_shape: tuple[int, ...] = ()
    """Shape of that noise (default ``(chunk_length, action_dim)``)."""
    action_low: tuple[float, ...] = ()
    """Raw action bounds of a policy whose outputs are not normalised: ``[low, high]`` maps to [-1, 1]. Empty =
    the outputs already are in [-1, 1]."""
    action_high: tuple[float, ...] = ()
    absolute_dims: tuple[int, ...] = ()
    """Action dimensions that are absolute commands (e.g. a gripper); the others are deltas. Holding the robot
    repeats the last absolute command and zeroes the deltas."""
    name: str = ""
    """What it is (shown in logs)."""

    def __post_init__(self) -> None:
        if self.action_dim < 1 or self.chunk_length < 1:
            raise ValueError(f"policy metadata: action_dim and chunk_length must be >= 1 (got {self.action_dim}, "
                             f"{self.chunk_length})")
        if self.control_hz <= 0:
            raise ValueError(f"policy metadata: control_hz must be > 0, got {self.control_hz}")
        bounds = (len(self.action_low), len(self.action_high))
        if bounds[0] != bounds[1] or bounds[0] not in (0, self.action_dim):
            raise ValueError("policy metadata: action_low and action_high must both be empty or have action_dim "
                             "entries")
        if any(not 0 <= d < self.action_dim for d in self.absolute_dims):
            raise ValueError(f"policy metadata: absolute_dims {self.absolute_dims} outside [0, {self.action_dim})")
        if self.accepts_noise and not self.noise_shape:
            object.__setattr__(self, "noise_shape", (self.chunk_length, self.action_dim))
        object.__setattr__(self, "cameras", {str(k): tuple(int(x) for x in v) for k, v in self.cameras.items()})

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cameras"] = {k: list(v) for k, v in self.cameras.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyMetadata:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"policy metadata: unknown field(s) {sorted(unknown)}")
        missing = {"action_dim", "chunk_length"} - set(data)
        if missing:
            raise ValueError(f"policy metadata lacks {sorted(missing)}")
        values = dict(data)
        for key in ("noise_shape", "action_low", "action_high", "absolute_dims"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)

    def to_normalised(self, actions: np.ndarray) -> np.ndarray:
        """A raw chunk ``[H, A]`` in the policy's units -> [-1, 1] (clipped)."""
        if not self.action_low:
            return np.clip(actions, -1.0, 1.0)
        low, high = np.asarray(self.action_low, np.float64), np.asarray(self.action_high, np.float64)
        return np.clip(2.0 * (actions - low) / (high - low) - 1.0, -1.0, 1.0).astype(np.float32)

    def hold_action(self, last: np.ndarray | None) -> np.ndarray:
        """The action that keeps the robot where it is: zero deltas, the last absolute commands."""
        hold = np.zeros(self.action_dim, np.float32)
        if last is not None and self.absolute_dims:
            dims = list(self.absolute_dims)
            hold[dims] = np.asarray(last, np.float32)[dims]
        return hold


@runtime_checkable
class BasePolicy(Protocol):
    """``metadata`` plus ``infer``, ``reset`` and ``close``."""

    metadata: PolicyMetadata

    def infer(self, obs: Mapping[str, Any], instruction: str = "", noise: np.ndarray | None = None) -> np.ndarray:
        """Action chunk float32 ``[H, A]`` in [-1, 1] for one observation. ``noise`` (``metadata.noise_shape``)
        replaces the policy's own initial noise where ``metadata.accepts_noise``; a zero noise is the policy's
        deterministic decode."""
        ...

    def reset(self) -> None:
        """A new episode starts (policies with internal state clear it)."""
        ...

    def close(self) -> None:
        ...


class PolicyError(RuntimeError):
    """A base policy failed to produce a chunk (the message says why and what to do)."""


POLICY_FAILED = 4
"""Exit code of an actor stopped by a base policy that kept failing (the supervisor ends the run: a restarted actor
would ask the same policy)."""


def check_chunk(actions: Any, meta: PolicyMetadata, where: str) -> np.ndarray:
    """A policy's output as a finite float32 ``[H, A]`` chunk in [-1, 1], or :class:`PolicyError`."""
    arr = np.asarray(actions)
    if arr.ndim == 3 and arr.shape[0] == 1:  # a batch of one
        arr = arr[0]
    if arr.ndim != 2 or arr.shape[1] != meta.action_dim or arr.shape[0] < 1:
        raise PolicyError(f"{where}: expected an action chunk [H, {meta.action_dim}], got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number):
        raise PolicyError(f"{where}: actions must be numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float32)
    if not np.all(np.isfinite(arr)):
        raise PolicyError(f"{where}: the action chunk holds NaN or inf")
    return meta.to_normalised(arr)


def misfit(meta: PolicyMetadata, state_dim: int, cameras: Mapping[str, Any], action_dim: int) -> str | None:
    """Why a policy with ``meta`` cannot act in an env with this state size, these cameras and this action size
    (one sentence), or None when it fits. Frames of another size fit: the policy resizes them."""
    if meta.action_dim != action_dim:
        return f"acts in {meta.action_dim} dimensions, the env in {action_dim}"
    missing = sorted(set(meta.cameras) - set(cameras))
    if missing:
        return (f"needs camera(s) {missing}; the env has {sorted(cameras) or 'none'} (env.kwargs image_size / "
                "cameras)")
    if meta.state_dim and meta.state_dim != state_dim:
        return f"takes a state of {meta.state_dim}, the env gives {state_dim} (e.g. env.kwargs object_state: false)"
    return None


def check_noise(noise: np.ndarray | None, meta: PolicyMetadata, where: str) -> np.ndarray | None:
    if noise is None:
        return None
    if not meta.accepts_noise:
        raise PolicyError(f"{where}: this policy takes no noise input (metadata.accepts_noise is false)")
    noise = np.asarray(noise, np.float32)
    if noise.shape != tuple(meta.noise_shape) or not np.all(np.isfinite(noise)):
        raise PolicyError(f"{where}: noise must be finite float32 {tuple(meta.noise_shape)}, got {noise.shape}")
    return noise
