"""Observation encoders: proprioception MLP + one small conv net per camera, concatenated into one latent.

Images arrive as uint8 ``[B, H, W, 3]`` (the replay's storage format) and are converted to float on the
learner's device, in channels-last layout, so no float copy of a frame ever exists in the replay.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from robot_rl.agents.config import EncoderConfig
from robot_rl.agents.networks import init_parameters
from robot_rl.spaces import ObsSpec


class ConvEncoder(nn.Module):
    """DrQ-style conv stack for one camera: convs -> flatten -> Linear -> LayerNorm -> tanh."""

    def __init__(self, image_hw: tuple[int, int], channels: tuple[int, ...], strides: tuple[int, ...],
                 latent_dim: int) -> None:
        super().__init__()
        if len(channels) != len(strides):
            raise ValueError(f"encoder.conv_channels ({len(channels)}) and encoder.conv_strides "
                             f"({len(strides)}) must have the same length")
        layers: list[nn.Module] = []
        last = 3
        for ch, stride in zip(channels, strides):
            layers += [nn.Conv2d(last, ch, kernel_size=3, stride=stride), nn.ReLU()]
            last = ch
        self.convs = nn.Sequential(*layers)
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, 3, *image_hw)).numel()
        self.project = nn.Sequential(nn.Linear(flat, latent_dim), nn.LayerNorm(latent_dim), nn.Tanh())
        self.out_dim = latent_dim

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """``frames``: float ``[B, 3, H, W]`` in [-0.5, 0.5]."""
        return self.project(self.convs(frames).flatten(1))


def frames_to_float(frames: torch.Tensor) -> torch.Tensor:
    """uint8 ``[..., H, W, 3]`` -> float ``[N, 3, H, W]`` in [-0.5, 0.5], channels-last in memory."""
    x = frames.reshape(-1, *frames.shape[-3:]).permute(0, 3, 1, 2)  # a view: NHWC memory is channels-last
    return x.float().div_(255.0).sub_(0.5)


def random_shift(images: torch.Tensor, pad: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """DrQ random-shift augmentation on a batch ``[B, C, H, W]``: replicate-pad by ``pad`` then crop back at a
    random integer offset per image. One batched gather, no per-image Python."""
    if pad <= 0:
        return images
    b, c, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad), mode="replicate")
    dx = torch.randint(0, 2 * pad + 1, (b, 1, 1), device=images.device, generator=generator)
    dy = torch.randint(0, 2 * pad + 1, (b, 1, 1), device=images.device, generator=generator)
    rows = (torch.arange(h, device=images.device).view(1, h, 1) + dy).expand(b, h, w)
    cols = (torch.arange(w, device=images.device).view(1, 1, w) + dx).expand(b, h, w)
    flat_index = (rows * (w + 2 * pad) + cols).reshape(b, 1, h * w).expand(b, c, h * w)
    return padded.flatten(2).gather(2, flat_index).view(b, c, h, w).contiguous(memory_format=torch.channels_last)


def shift_frames(frames: torch.Tensor, pad: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """DrQ random shift on uint8 frames ``[..., H, W, C]`` as stored (flattened to ``[N, H, W, C]``): each frame
    translated by a random integer offset in ``[-pad, pad]`` per axis, the border replicated. The same images as
    :func:`random_shift` on their float conversion (replicate padding is a clamped index), at a quarter of the
    bytes and without building the padded copy: one row gather of whole pixels."""
    frames = frames.reshape(-1, *frames.shape[-3:])
    if pad <= 0:
        return frames
    n, h, w, c = frames.shape
    dx = torch.randint(0, 2 * pad + 1, (n, 1, 1), device=frames.device, generator=generator)
    dy = torch.randint(0, 2 * pad + 1, (n, 1, 1), device=frames.device, generator=generator)
    rows = (torch.arange(h, device=frames.device).view(1, h, 1) + dy - pad).clamp_(0, h - 1)
    cols = (torch.arange(w, device=frames.device).view(1, 1, w) + dx - pad).clamp_(0, w - 1)
    pixel = (torch.arange(n, device=frames.device).view(n, 1, 1) * (h * w) + rows * w + cols).reshape(-1)
    return frames.reshape(n * h * w, c).index_select(0, pixel).view(n, h, w, c)


def frames_to_input(frames: torch.Tensor, pad: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """uint8 frames -> the conv input: random-shifted by up to ``pad`` pixels (0: none), then float."""
    return frames_to_float(shift_frames(frames, pad, generator))


class ObservationEncoder(nn.Module):
    """Encodes a Dict observation ``{"state": [B, D], "pixels": {cam: [B, H, W, 3] uint8}, "instruction": [B, E]}``
    to ``[B, Z]``."""

    def __init__(self, spec: ObsSpec, cfg: EncoderConfig, generator: torch.Generator | None = None) -> None:
        """``generator``: draws the initial weights (see :func:`~robot_rl.agents.networks.init_parameters`);
        pretrained weights are loaded after that."""
        super().__init__()
        self.cfg = cfg
        self.cameras = tuple(sorted(spec.cameras))
        self.state = (nn.Sequential(*_state_mlp(spec.state_dim, cfg.state_hidden_dims))
                      if cfg.state_hidden_dims else nn.Identity())
        state_out = cfg.state_hidden_dims[-1] if cfg.state_hidden_dims else spec.state_dim
        self.convs = nn.ModuleDict({
            cam: ConvEncoder(spec.cameras[cam][:2], cfg.conv_channels, cfg.conv_strides, cfg.latent_dim)
            for cam in self.cameras
        })
        # A language-conditioned task's instruction embedding joins the features as it is (it is fixed per episode).
        self.instruction_dim = spec.instruction_dim
        self.out_dim = state_out + cfg.latent_dim * len(self.cameras) + self.instruction_dim
        # State standardisation (identity until fit_state_normalizer); buffers, so they travel with the policy.
        self.register_buffer("state_shift", torch.zeros(spec.state_dim))
        self.register_buffer("state_scale", torch.ones(spec.state_dim))
        self.register_buffer("state_fitted", torch.zeros(1))  # 1-D: the weight board has no 0-d slots
        if generator is not None:
            init_parameters(self, generator)
        if cfg.pretrained_path:
            self.load_pretrained(cfg.pretrained_path, freeze=cfg.freeze_pretrained)

    @property
    def has_pixels(self) -> bool:
        return bool(self.cameras)

    def forward(self, obs: dict, augment: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
        """``obs["state"]`` may have any leading shape; it is flattened to ``[N, D]`` and so is the output."""
        state = obs["state"]
        parts = [self.state(self.normalize(state.reshape(-1, state.shape[-1])))]
        for cam in self.cameras:
            x = frames_to_input(obs["pixels"][cam], self.cfg.augment_pad if augment else 0, generator)
            parts.append(self.convs[cam](x))
        if self.instruction_dim:
            parts.append(obs["instruction"].reshape(-1, self.instruction_dim).float())
        return torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]

    def normalize(self, state: torch.Tensor) -> torch.Tensor:
        """``(state - shift) * scale`` (identity before :meth:`fit_state_normalizer`)."""
        return (state.float() - self.state_shift) * self.state_scale

    @property
    def normalizer_fitted(self) -> bool:
        return bool(self.state_fitted)

    @torch.no_grad()
    def fit_state_normalizer(self, states: torch.Tensor | np.ndarray) -> None:
        """Fits the standardisation to ``states [N, D]`` (std floored at ``cfg.normalize_min_std``)."""
        x = torch.as_tensor(np.asarray(states), dtype=torch.float64)
        if x.ndim != 2 or x.shape[1] != self.state_shift.numel() or x.shape[0] < 2:
            raise ValueError(f"fit_state_normalizer needs states [N >= 2, {self.state_shift.numel()}], "
                             f"got {tuple(x.shape)}")
        if not torch.isfinite(x).all():
            raise ValueError("fit_state_normalizer: states contain NaN or inf")
        self.state_shift.copy_(x.mean(0))
        self.state_scale.copy_(1.0 / x.std(0).clamp_min(self.cfg.normalize_min_std))
        self.state_fitted.fill_(1.0)

    def load_pretrained(self, path: str | Path, freeze: bool) -> None:
        """Loads conv-encoder weights saved by :meth:`save_pretrained` (safetensors) and optionally freezes them.

        Keys are ``<camera>.<param>``; a file with a single camera ``"*"`` is applied to every camera.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"encoder.pretrained_path: no file at {path}")
        tensors = load_file(str(path))
        for cam in self.cameras:
            source = cam if any(k.startswith(f"{cam}.") for k in tensors) else "*"
            sub = {k.split(".", 1)[1]: v for k, v in tensors.items() if k.split(".", 1)[0] == source}
            if not sub:
                raise KeyError(f"{path} has no weights for camera {cam!r} (nor shared '*' weights)")
            own = self.convs[cam].state_dict()
            mismatched = sorted(k for k in set(own) | set(sub)
                                if k not in own or k not in sub or own[k].shape != sub[k].shape)
            if mismatched:
                detail = ", ".join(f"{k}: expected {tuple(own[k].shape) if k in own else 'absent'}, found "
                                   f"{tuple(sub[k].shape) if k in sub else 'absent'}" for k in mismatched[:4])
                raise ValueError(f"{path}: camera {cam!r} weights do not fit the encoder ({detail}); "
                                 "check the encoder.conv_* and encoder.latent_dim fields")
            self.convs[cam].load_state_dict(sub)
            if freeze:
                self.convs[cam].requires_grad_(False)

    def save_pretrained(self, path: str | Path) -> None:
        tensors = {f"{cam}.{k}": v.detach().cpu().contiguous()
                   for cam in self.cameras for k, v in self.convs[cam].state_dict().items()}
        save_file(tensors, str(path))


def _state_mlp(in_dim: int, dims: tuple[int, ...]) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for h in dims:
        layers += [nn.Linear(in_dim, h), nn.LayerNorm(h), nn.Tanh()]
        in_dim = h
    return layers
