"""Configs of the base-policy components: which base policy (:class:`BasePolicyConfig`), how a request to a policy
server names the observation's parts (:class:`RequestKeys`) and how chunks are executed (:class:`ExecutionConfig`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

try:  # tyro reads the field as JSON on robot-rl's command line
    from robot_rl.config import JsonDict
except ImportError:  # an environment without robot_rl's dependencies (python -m robot_rl.policies.serve): no CLI
    JsonDict = dict[str, Any]  # type: ignore[misc]


@dataclass(frozen=True)
class RequestKeys:
    """How an observation is laid out in a policy-server request (and read back by ``robot-rl serve-policy``).

    The defaults are robot_rl's own; an openpi server expects its robot's names, e.g. LIBERO's
    ``state: observation/state``, ``cameras: {front: observation/image, wrist: observation/wrist_image}``."""

    state: str = "observation/state"
    """Key of the proprioceptive state (float32 [D])."""
    camera: str = "observation/images/{camera}"
    """Key of each camera's frame (uint8 [H, W, 3]); ``{camera}`` is replaced by the camera's name."""
    cameras: JsonDict = field(default_factory=dict)
    """Per-camera keys that override ``camera`` (camera name -> key)."""
    prompt: str = "prompt"
    """Key of the instruction text."""
    noise: str = "noise"
    """Key of the initial flow/diffusion noise (sent only when given)."""
    actions: str = "actions"
    """Key of the action chunk in the reply."""

    def camera_key(self, name: str) -> str:
        return str(self.cameras.get(name, self.camera.format(camera=name)))

    def request(self, obs: Mapping[str, Any], instruction: str, noise: np.ndarray | None) -> dict[str, Any]:
        """The request map for one observation."""
        out: dict[str, Any] = {self.state: np.asarray(obs["state"], np.float32), self.prompt: instruction}
        for cam, frame in (obs.get("pixels") or {}).items():
            out[self.camera_key(cam)] = np.asarray(frame, np.uint8)
        if noise is not None:
            out[self.noise] = np.asarray(noise, np.float32)
        return out

    def observation(self, request: Mapping[str, Any], cameras: Mapping[str, Any]) -> tuple[dict, str, Any]:
        """(observation, instruction, noise) from a request map; ValueError naming what is missing or wrong."""
        if not isinstance(request, Mapping):
            raise ValueError(f"a request must be a map, got {type(request).__name__}")
        if self.state not in request:
            raise ValueError(f"request lacks {self.state!r}")
        state = np.asarray(request[self.state])
        if state.ndim != 1 or not np.issubdtype(state.dtype, np.number):
            raise ValueError(f"{self.state!r} must be a 1-D numeric array, got {state.dtype} {state.shape}")
        obs: dict[str, Any] = {"state": state.astype(np.float32)}
        pixels = {}
        for cam in cameras:
            key = self.camera_key(cam)
            if key not in request:
                raise ValueError(f"request lacks camera {cam!r} ({key!r})")
            frame = np.asarray(request[key])
            if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
                raise ValueError(f"{key!r} must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
            pixels[cam] = frame
        if pixels:
            obs["pixels"] = pixels
        instruction = request.get(self.prompt, "")
        if not isinstance(instruction, str):
            raise ValueError(f"{self.prompt!r} must be text, got {type(instruction).__name__}")
        return obs, instruction, request.get(self.noise)


@dataclass(frozen=True)
class BasePolicyConfig:
    """Which base (generalist) policy the actor runs, and where it lives."""

    path: str = ""
    """A saved policy folder (``policy.json`` + ``model.safetensors``, e.g. ``robot-rl train-bc``'s output),
    ``ws://HOST:PORT`` of a policy server (openpi's protocol; ``robot-rl serve-policy`` speaks it), or
    ``lerobot:<type>:<folder>`` (a LeRobot policy saved with ``save_pretrained``; needs lerobot installed).
    Empty = none."""
    token_env: str = "ROBOT_RL_POLICY_TOKEN"
    """Environment variable holding the server's token (sent as ``Authorization: Api-Key <token>``); unset = none.
    Tokens never go into configs or run folders."""
    timeout_s: float = 5.0
    """A server reply later than this fails the inference (the executor holds the robot meanwhile)."""
    keys: RequestKeys = field(default_factory=RequestKeys)
    """How requests name the observation's parts (servers that are not robot_rl's)."""
    metadata: JsonDict = field(default_factory=dict)
    """Metadata fields a server does not send (e.g. ``{"chunk_length": 50, "control_hz": 15}``) or overrides."""
    device: str = "cpu"
    """Torch device of a local policy."""
    latency_s: float = 0.0
    """Extra latency added to every inference (benchmarks: a remote GPU policy's delay on a local one)."""
    made_by: str = ""
    """The command that makes the policy folder ``path`` (e.g. ``robot-rl train-bc ... --out <path>``), said when
    that folder does not exist. The bundled fine-tuning configs name their base's; empty = none."""

    def validate(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError(f"base_policy.timeout_s must be > 0, got {self.timeout_s}")
        if self.latency_s < 0:
            raise ValueError(f"base_policy.latency_s must be >= 0, got {self.latency_s}")


@dataclass(frozen=True)
class ExecutionConfig:
    """How the actor executes a base policy's action chunks."""

    mode: Literal["sync", "async", "future"] = "sync"
    """sync: at the end of a chunk the robot waits for the next inference. async: the next chunk is inferred while
    the current one runs, conditioned on the observation at launch. future: as async, but conditioned on the state
    the robot will be in when the new chunk starts (the controller target rolled forward by the actions still to
    run; VLASH)."""
    execute_steps: int = 0
    """Actions of each chunk executed before the next chunk takes over (0 = the whole chunk)."""
    lead_steps: int = -1
    """async/future: launch the next inference this many steps before the current chunk's end; -1 = from the
    measured inference latency (+1 step of margin)."""
    on_miss: Literal["hold", "continue"] = "hold"
    """When the next chunk is late: hold (zero deltas, last absolute commands) or continue with the current
    chunk's remaining actions (then hold)."""
    temporal_ensemble: float = 0.0
    """ACT's temporal ensembling: > 0 averages every chunk's prediction for the current step with weights
    exp(-m * i) (i = 0 the oldest chunk); 0 = off."""
    max_failed_inferences: int = 10
    """Inferences failing in a row after which the base policy counts as broken: the actor, ``robot-rl eval`` and
    ``robot-rl train`` stop with the count and the first error, never a quiet 0 % success. Fewer (a server gone for
    a moment) hold the robot and are logged."""

    def validate(self) -> None:
        if self.execute_steps < 0 or self.lead_steps < -1 or self.temporal_ensemble < 0:
            raise ValueError("execution: execute_steps >= 0, lead_steps >= -1 and temporal_ensemble >= 0 required")
        if self.max_failed_inferences < 1:
            raise ValueError(f"execution.max_failed_inferences must be >= 1, got {self.max_failed_inferences}")
