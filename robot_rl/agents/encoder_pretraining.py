"""The conv encoder trained once by behaviour cloning on the demos, then frozen (``encoder.pretrain_steps``).

SERL and HIL-SERL update only small heads over a frozen pretrained encoder; on a CPU that removes the convolutions'
backward pass, most of a pixel update. Here the encoder is pre-trained on the run's own demonstrations (what a
person records on the robot before training, no outside weights): the encoder and a small action head regress the
demos' actions from their frames (random-shifted) and proprioception, then the convolutions are frozen and the RL
updates train the rest. The frames keep their random shift in the RL updates (the frozen convolutions read each
shifted crop), so the augmentation stays valid.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from robot_rl.agents.base import to_torch
from robot_rl.agents.encoders import ObservationEncoder
from robot_rl.utils.log import get_logger

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer

log = get_logger(__name__)
DEMOS = {"demos": 1.0}


def pretrain_encoder(encoder: ObservationEncoder, replay: ReplayBuffer, action_dim: int, steps: int,
                     batch_size: int, lr: float, generator: torch.Generator, device: torch.device,
                     autocast: Callable[[], AbstractContextManager] = nullcontext) -> dict[str, float]:
    """``steps`` behaviour-cloning steps of ``encoder`` (and a throw-away head) on the replay's demos; returns the
    first and last losses and the seconds taken. :func:`freeze_convs` then freezes the convolutions."""
    if not replay.can_sample(DEMOS):
        raise ValueError("encoder.pretrain_steps: the replay holds no demos to pre-train the encoder on (add demos, "
                         "or set encoder.pretrain_steps 0)")
    head = nn.Sequential(nn.Linear(encoder.out_dim, 256), nn.ReLU(), nn.Linear(256, action_dim)).to(device)
    trained = [p for p in encoder.parameters() if p.requires_grad] + list(head.parameters())
    optimizer = torch.optim.Adam(trained, lr=lr)
    pad = encoder.cfg.augment_pad > 0
    losses, t0 = [], time.perf_counter()
    for _ in range(steps):
        batch = to_torch(replay.sample(batch_size, mix=DEMOS), device)
        with autocast():
            predicted = torch.tanh(head(encoder(batch["obs"], pad, generator)).float())
        loss = F.mse_loss(predicted, batch["action"].reshape(predicted.shape))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    for p in trained:
        p.grad = None
    out = {"first_loss": losses[0], "last_loss": sum(losses[-20:]) / len(losses[-20:]),
           "seconds": time.perf_counter() - t0}
    log.info("encoder pre-trained on the demos: %d steps in %.0f s, action MSE %.3f -> %.3f; its convolutions are "
             "frozen from here on", steps, out["seconds"], out["first_loss"], out["last_loss"])
    return out


def freeze_convs(encoder: ObservationEncoder) -> None:
    """No gradient into the camera encoders' conv layers from here on (the RL updates skip their backward pass);
    each camera's projection to its latent (Linear, LayerNorm) stays trained, as HIL-SERL's bottleneck does."""
    for conv in encoder.convs.values():
        conv.convs.requires_grad_(False)
