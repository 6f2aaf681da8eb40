"""The conv encoder trained by behaviour cloning on the demos, then its conv layers frozen (``encoder.pretrain_steps``).

SERL and HIL-SERL update only small heads over a frozen pretrained encoder; on a CPU that removes the convolutions'
backward pass, most of a pixel update. Here the encoder is pre-trained on the run's own demonstrations (what a
person records on the robot before training; no outside weights): the encoder and a throw-away action head regress
the demos' actions from their frames (random-shifted) and proprioception. Then the conv layers are frozen and the RL
updates train the rest (each camera's projection, the critics, the actor). The frames keep their random shift in
the RL updates (the frozen convolutions read each shifted crop), so the augmentation stays valid.

The steps run in slices, one per learner step (:meth:`EncoderPretraining.run`), so the learner keeps its heartbeat,
takes in the actors' data and publishes while it pre-trains.
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
STEPS_PER_CALL = 20
"""Pre-training steps per learner step (a second or two of a 2-core CPU: far inside the heartbeat timeout)."""


class EncoderPretraining:
    """``steps`` behaviour-cloning steps of ``encoder`` on the replay's demos, then :func:`freeze_convs`."""

    def __init__(self, encoder: ObservationEncoder, action_dim: int, steps: int, batch_size: int, lr: float,
                 generator: torch.Generator, device: torch.device,
                 autocast: Callable[[], AbstractContextManager] = nullcontext) -> None:
        self.encoder, self.action_dim, self.steps, self.batch_size, self.lr = encoder, action_dim, steps, batch_size, lr
        self.generator, self.device, self.autocast = generator, device, autocast
        self.done = 0
        self.losses: list[float] = []
        self.seconds = 0.0
        self._head: nn.Module | None = None
        self._optimizer: torch.optim.Optimizer | None = None

    @property
    def finished(self) -> bool:
        return self.done >= self.steps

    def run(self, replay: ReplayBuffer, max_steps: int = STEPS_PER_CALL) -> None:
        """The next ``max_steps`` steps; after the last, the conv layers frozen (also on a resumed agent)."""
        if self.finished:
            freeze_convs(self.encoder)
            return
        if not replay.can_sample(DEMOS):
            raise ValueError("encoder.pretrain_steps: the replay holds no demos to pre-train the encoder on (add "
                             "demos, or set encoder.pretrain_steps 0)")
        if self._optimizer is None:
            self._head = nn.Sequential(nn.Linear(self.encoder.out_dim, 256), nn.ReLU(),
                                       nn.Linear(256, self.action_dim)).to(self.device)
            trained = [p for p in self.encoder.parameters() if p.requires_grad] + list(self._head.parameters())
            self._optimizer = torch.optim.Adam(trained, lr=self.lr)
        t0, shift = time.perf_counter(), self.encoder.cfg.augment_pad > 0
        for _ in range(min(max_steps, self.steps - self.done)):
            batch = to_torch(replay.sample(self.batch_size, mix=DEMOS), self.device)
            with self.autocast():
                predicted = torch.tanh(self._head(self.encoder(batch["obs"], shift, self.generator)).float())
            loss = F.mse_loss(predicted, batch["action"].reshape(predicted.shape))
            self._optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self._optimizer.step()
            self.losses.append(float(loss.detach()))
            self.done += 1
        self.seconds += time.perf_counter() - t0
        if self.finished:
            self._optimizer.zero_grad(set_to_none=True)
            self._head = self._optimizer = None
            freeze_convs(self.encoder)
            log.info("encoder pre-trained on the demos: %d steps in %.0f s, action MSE %.3f -> %.3f; its conv "
                     "layers are frozen from here on", self.done, self.seconds, self.losses[0],
                     self.metrics()["encoder_pretrain_loss"])

    def skip(self) -> None:
        """Counts the pre-training as done and freezes the conv layers (timing an RL update: any weights do)."""
        self.done = self.steps
        freeze_convs(self.encoder)

    def metrics(self) -> dict[str, float]:
        recent = self.losses[-20:]
        return {"encoder_pretrain_steps": float(self.done),
                **({"encoder_pretrain_loss": sum(recent) / len(recent)} if recent else {})}


def freeze_convs(encoder: ObservationEncoder) -> None:
    """No gradient into the camera encoders' conv layers from here on (the RL updates skip their backward pass);
    each camera's projection to its latent (Linear, LayerNorm) stays trained, as HIL-SERL's bottleneck does."""
    for conv in encoder.convs.values():
        conv.convs.requires_grad_(False)
