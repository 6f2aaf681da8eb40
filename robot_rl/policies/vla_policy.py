"""The small VLA as a base policy, and its folder on disk.

A saved policy is a folder: ``policy.json`` (``format: robot_rl.policy``, ``kind: vla``, the model config, the
state normalisation, the :class:`~robot_rl.policies.base.PolicyMetadata`, the tasks it was trained on and how) and
``model.safetensors`` (the weights). Nothing is pickled.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from robot_rl.policies.base import PolicyMetadata, check_chunk, check_noise
from robot_rl.policies.vla_model import SmallVLA, VLAConfig, images_to_input
from robot_rl.spaces import ObsSpec
from robot_rl.text import make_text_encoder
from robot_rl.utils.state_io import atomic_write

FORMAT = "robot_rl.policy"


def metadata_of(cfg: VLAConfig) -> PolicyMetadata:
    size = (cfg.image_size, cfg.image_size, 3)
    return PolicyMetadata(action_dim=cfg.action_dim, chunk_length=cfg.chunk_length, control_hz=cfg.control_hz,
                          state_dim=cfg.state_dim, cameras={c: size for c in cfg.cameras},
                          accepts_noise=cfg.head != "l1", absolute_dims=cfg.absolute_dims, name="robot_rl small VLA")


class VLAPolicy:
    """A :class:`SmallVLA` with its state normalisation and text encoder; ``infer`` decodes one chunk."""

    def __init__(self, model: SmallVLA, state_mean: np.ndarray, state_std: np.ndarray, device: str = "cpu",
                 info: Mapping[str, Any] | None = None) -> None:
        self.model = model.to(device).eval()
        self.cfg = model.cfg
        self.device = torch.device(device)
        self.state_mean = torch.as_tensor(state_mean, dtype=torch.float32, device=self.device)
        self.state_std = torch.as_tensor(state_std, dtype=torch.float32, device=self.device)
        self.text = make_text_encoder(self.cfg.text_encoder)
        self.metadata = metadata_of(self.cfg)
        self.info = dict(info or {})
        self._empty_text: torch.Tensor | None = None  # the empty instruction's embedding (batch_inputs)
        self._lock = threading.Lock()  # an inference thread decodes while new weights may arrive (load_weights)

    def inputs(self, obs: Mapping[str, Any], instruction: str) -> tuple[dict, torch.Tensor, torch.Tensor]:
        """Model inputs (a batch of one) from an observation and an instruction."""
        images = {c: images_to_input(torch.as_tensor(np.asarray(obs["pixels"][c]))[None].to(self.device),
                                     self.cfg.image_size) for c in self.cfg.cameras}
        state = (torch.as_tensor(np.asarray(obs["state"], np.float32), device=self.device)[None] - self.state_mean)
        text = torch.tensor(self.text.encode(instruction), device=self.device)[None]
        return images, state / self.state_std, text

    def batch_inputs(self, obs: Mapping[str, torch.Tensor]) -> tuple[dict, torch.Tensor, torch.Tensor]:
        """Model inputs from a batch of observations as tensors (``pixels``, ``state``, optional ``instruction``
        embeddings; none: the empty instruction's)."""
        images = {c: images_to_input(obs["pixels"][c], self.cfg.image_size) for c in self.cfg.cameras}
        state = (obs["state"].float() - self.state_mean) / self.state_std
        if "instruction" in obs:
            return images, state, obs["instruction"].float()
        if self._empty_text is None:
            self._empty_text = torch.tensor(self.text.encode(""), device=self.device)
        return images, state, self._empty_text.expand(state.shape[0], -1)

    def trainable_parameters(self, trunk: bool) -> list[torch.nn.Parameter]:
        """The parameters fine-tuning changes: all (``trunk``), or the action head's only."""
        model = self.model
        if trunk:
            return list(model.parameters())
        frozen = {id(p) for m in (model.stem, model.state_in, model.text_in, model.trunk, model.trunk_norm)
                  for p in m.parameters()} | {id(model.patch_pos), id(model.kind)}
        return [p for p in model.parameters() if id(p) not in frozen]

    def misfit(self, obs_spec: ObsSpec, action_dim: int) -> str:
        """Why this policy cannot act in an env with these spaces ("" where it can)."""
        cfg = self.cfg
        missing = [c for c in cfg.cameras if c not in obs_spec.cameras]
        if missing:
            return f"the base reads cameras {missing} that the env does not have (it has {sorted(obs_spec.cameras)})"
        if cfg.action_dim != action_dim or cfg.state_dim != obs_spec.state_dim:
            return (f"the base acts in {cfg.action_dim} dims on a {cfg.state_dim}-d state; the env has {action_dim} "
                    f"and {obs_spec.state_dim}")
        if obs_spec.instruction_dim not in (0, cfg.text_dim):
            return (f"the env's instruction embedding has {obs_spec.instruction_dim} dims, the base's text encoder "
                    f"{cfg.text_encoder!r} {cfg.text_dim}: set env.instruction_encoder to {cfg.text_encoder!r}")
        return ""

    @torch.no_grad()
    def infer(self, obs: Mapping[str, Any], instruction: str = "", noise: np.ndarray | None = None) -> np.ndarray:
        noise = check_noise(noise, self.metadata, "small VLA")
        x0 = None if noise is None else torch.as_tensor(noise, device=self.device)[None]
        with self._lock:
            context = self.model.encode(*self.inputs(obs, instruction))
            chunk = self.model.decode(context, x0)[0].float().cpu().numpy()
        return check_chunk(chunk, self.metadata, "small VLA")

    def load_weights(self, state: Mapping[str, torch.Tensor]) -> None:
        """New model weights (e.g. from a learner that fine-tunes this policy), applied between two inferences."""
        with self._lock:
            self.model.load_state_dict(state)

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass

    def save(self, folder: str | Path) -> Path:
        """Writes ``policy.json`` + ``model.safetensors`` (each atomically)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with self._lock:
            weights = {k: v.detach().cpu().clone().contiguous() for k, v in self.model.state_dict().items()}
        tmp = folder / ".model.safetensors.tmp"
        save_file(weights, str(tmp))
        tmp.replace(folder / "model.safetensors")
        meta = {"format": FORMAT, "kind": "vla", "config": dataclasses.asdict(self.cfg),
                "state_mean": self.state_mean.cpu().tolist(), "state_std": self.state_std.cpu().tolist(),
                "metadata": self.metadata.to_dict(), **self.info}
        atomic_write(folder / "policy.json", lambda f: f.write_text(json.dumps(meta, indent=1)))
        return folder


def read_policy_json(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / "policy.json"
    if not path.is_file():
        raise ValueError(f"{folder} is not a saved policy: no policy.json")
    meta = json.loads(path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a robot_rl policy (format {meta.get('format')!r})")
    return meta


def load_vla(folder: str | Path, device: str = "cpu") -> VLAPolicy:
    meta = read_policy_json(folder)
    if meta.get("kind") != "vla":
        raise ValueError(f"{folder}: policy kind {meta.get('kind')!r} is not 'vla'")
    fields = {f.name for f in dataclasses.fields(VLAConfig)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["config"].items() if k in fields}
    model = SmallVLA(VLAConfig(**values))
    model.load_state_dict(load_file(str(Path(folder) / "model.safetensors")))
    info = {k: v for k, v in meta.items() if k not in ("format", "kind", "config", "state_mean", "state_std",
                                                       "metadata")}
    return VLAPolicy(model, np.asarray(meta["state_mean"]), np.asarray(meta["state_std"]), device, info)
