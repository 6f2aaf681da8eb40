"""A small vision-language-action model: camera patches + proprioception + an instruction embedding -> a
transformer trunk -> an action-chunk head trained by flow matching (pi0-style; its initial noise is an input, which
latent-noise steering needs) and/or an L1 chunk head (ACT-style).

Tokens: one per instruction (the text encoder's embedding, projected), one for the standardised state, and a
4 x 4 grid of patch features per camera from a small strided conv stem (with a learned embedding per position and
camera). The trunk is a pre-norm transformer encoder over them. The flow head is an "action expert": ``H``
action tokens (the noisy chunk, projected, plus the flow time and the step index) attend to each other and to the
trunk's output through a small transformer decoder and predict the velocity. Inference integrates the velocity
field from the given noise (zero = the deterministic decode) to time 1 with ``flow_steps`` Euler steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class VLAConfig:
    """Architecture of the small VLA (every field is saved with the model)."""

    state_dim: int = 11
    """Proprioceptive state size."""
    action_dim: int = 4
    """Action size."""
    cameras: tuple[str, ...] = ("front", "wrist")
    """Camera names, in token order."""
    image_size: int = 64
    """Frames are resized to this square size before the conv stem."""
    chunk_length: int = 10
    """H: actions predicted per inference."""
    control_hz: float = 20.0
    """The control rate of the training data."""
    text_encoder: str = "hash"
    """The instruction encoder (robot_rl.text): ``hash`` or ``minilm``."""
    text_dim: int = 64
    """Its embedding size."""
    width: int = 128
    """Token width of trunk and head."""
    depth: int = 4
    """Trunk transformer layers."""
    head_depth: int = 2
    """Action-head transformer decoder layers."""
    heads: int = 4
    """Attention heads."""
    head: str = "both"
    """``flow`` (flow matching, takes noise), ``l1`` (regression) or ``both`` (the flow decodes; the L1 head's loss
    shapes the trunk too, which learns faster from few demos)."""
    flow_steps: int = 10
    """Euler steps of the flow decode."""
    dropout: float = 0.1
    """Dropout in the transformers during training."""
    absolute_dims: tuple[int, ...] = (3,)
    """Action dimensions that are absolute commands (the arm tasks' gripper)."""
    channels: tuple[int, ...] = field(default=(32, 64, 128))
    """Conv stem channels (each conv halves the resolution; a last conv maps to ``width``)."""

    def validate(self) -> None:
        if self.head not in ("flow", "l1", "both"):
            raise ValueError(f"vla.head must be flow, l1 or both, got {self.head!r}")
        if self.width % self.heads:
            raise ValueError(f"vla.width ({self.width}) must be a multiple of vla.heads ({self.heads})")
        if self.image_size % (2 ** (len(self.channels) + 1)):
            raise ValueError(f"vla.image_size must be a multiple of {2 ** (len(self.channels) + 1)}")

    @property
    def grid(self) -> int:
        return self.image_size // 2 ** (len(self.channels) + 1)


class ConvStem(nn.Module):
    """uint8-derived float ``[B, 3, S, S]`` -> patch tokens ``[B, g*g, width]``."""

    def __init__(self, channels: tuple[int, ...], width: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        last = 3
        for ch in (*channels, width):
            layers += [nn.Conv2d(last, ch, 3, stride=2, padding=1), nn.GroupNorm(8, ch), nn.GELU()]
            last = ch
        self.net = nn.Sequential(*layers)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images).flatten(2).transpose(1, 2)


def time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of flow times ``t`` in [0, 1], ``[B] -> [B, dim]``."""
    half = dim // 2
    freqs = 100.0 * torch.exp(-math.log(100.0) * torch.arange(half, device=t.device) / half)  # periods 0.06 - 6
    angles = t[:, None] * freqs[None]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class SmallVLA(nn.Module):
    """See the module docstring. Inputs are tensors already on the model's device:
    ``images`` camera -> float ``[B, 3, S, S]`` in [-0.5, 0.5], ``state`` ``[B, D]`` (standardised), ``text``
    ``[B, E]``."""

    def __init__(self, cfg: VLAConfig) -> None:
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        w = cfg.width
        self.stem = ConvStem(cfg.channels, w)
        n_patches = cfg.grid * cfg.grid
        self.patch_pos = nn.Parameter(torch.zeros(len(cfg.cameras), n_patches, w))
        self.state_in = nn.Linear(cfg.state_dim, w)
        self.text_in = nn.Linear(cfg.text_dim, w)
        self.kind = nn.Parameter(torch.zeros(2, w))  # text, state
        layer = nn.TransformerEncoderLayer(w, cfg.heads, 4 * w, cfg.dropout, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.trunk = nn.TransformerEncoder(layer, cfg.depth, enable_nested_tensor=False)
        self.trunk_norm = nn.LayerNorm(w)
        h, a = cfg.chunk_length, cfg.action_dim
        self.step_pos = nn.Parameter(torch.zeros(h, w))
        if cfg.head in ("flow", "both"):
            self.flow_in = nn.Linear(a, w)
            self.flow_time = nn.Sequential(nn.Linear(w, w), nn.GELU(), nn.Linear(w, w))
            self.flow_head = self._decoder()
            self.flow_out = nn.Linear(w, a)
        if cfg.head in ("l1", "both"):
            self.l1_queries = nn.Parameter(torch.zeros(h, w))
            self.l1_head = self._decoder()
            self.l1_out = nn.Linear(w, a)
        for p in (self.patch_pos, self.kind, self.step_pos, *([self.l1_queries] if cfg.head != "flow" else [])):
            nn.init.normal_(p, std=0.02)

    def _decoder(self) -> nn.TransformerDecoder:
        cfg = self.cfg
        layer = nn.TransformerDecoderLayer(cfg.width, cfg.heads, 4 * cfg.width, cfg.dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        return nn.TransformerDecoder(layer, cfg.head_depth, norm=nn.LayerNorm(cfg.width))

    def encode(self, images: dict[str, torch.Tensor], state: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """The trunk's output tokens ``[B, T, width]``."""
        tokens = [(self.text_in(text) + self.kind[0])[:, None], (self.state_in(state) + self.kind[1])[:, None]]
        for i, cam in enumerate(self.cfg.cameras):
            tokens.append(self.stem(images[cam]) + self.patch_pos[i])
        return self.trunk_norm(self.trunk(torch.cat(tokens, dim=1)))

    def velocity(self, context: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Flow velocity ``[B, H, A]`` at noisy chunk ``x`` and flow time ``t`` ``[B]``."""
        tok = self.flow_in(x) + self.step_pos + self.flow_time(time_embedding(t, self.cfg.width))[:, None]
        return self.flow_out(self.flow_head(tok, context))

    def l1_chunk(self, context: torch.Tensor) -> torch.Tensor:
        q = (self.l1_queries + self.step_pos).expand(context.shape[0], -1, -1)
        return self.l1_out(self.l1_head(q, context))

    def loss(self, context: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor,
             generator: torch.Generator | None = None,
             noise: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        """Training loss for target chunks ``actions [B, H, A]`` with ``mask [B, H]`` (steps past an episode's end
        are 0; other values weight the steps). ``noise``: the flow's starting points paired with the targets
        (default: fresh standard normal draws; fine-tuning pairs each chunk with the noise it was decoded from)."""
        weight = mask[..., None].float()
        denom = weight.sum().clamp_min(1.0) * actions.shape[-1]
        total = actions.new_zeros(())
        metrics: dict[str, float] = {}
        if self.cfg.head in ("flow", "both"):
            b = actions.shape[0]
            if noise is None:
                noise = torch.randn(actions.shape, device=actions.device, generator=generator)
            # Flow time (0 = noise, 1 = data) weighted towards the noisy end, as pi0 samples it: 1 - Beta(1.5, 1).
            u = torch.rand(b, device=actions.device, generator=generator)
            t = 0.999 * (1.0 - u ** (1 / 1.5))
            x_t = t[:, None, None] * actions + (1 - t[:, None, None]) * noise
            v = self.velocity(context, x_t, t)
            flow = (((v - (actions - noise)) ** 2) * weight).sum() / denom
            total = total + flow
            metrics["loss/flow"] = float(flow.detach())
        if self.cfg.head in ("l1", "both"):
            l1 = ((self.l1_chunk(context) - actions).abs() * weight).sum() / denom
            total = total + l1
            metrics["loss/l1"] = float(l1.detach())
        return total, metrics

    def decode(self, context: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Action chunks ``[B, H, A]``: the flow integrated from ``noise`` (default zeros: deterministic), or the
        L1 head's prediction when that is the only head."""
        if self.cfg.head == "l1":
            return self.l1_chunk(context)
        b = context.shape[0]
        x = noise if noise is not None else context.new_zeros(b, self.cfg.chunk_length, self.cfg.action_dim)
        steps = self.cfg.flow_steps
        for k in range(steps):
            t = torch.full((b,), k / steps, device=context.device)
            x = x + self.velocity(context, x, t) / steps
        return x


def images_to_input(frames: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 ``[B, H, W, 3]`` -> float ``[B, 3, size, size]`` in [-0.5, 0.5] (resized when needed)."""
    x = frames.permute(0, 3, 1, 2).float().div_(255.0).sub_(0.5)
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return x
