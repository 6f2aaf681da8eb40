"""Behaviour cloning as an agent: regress the demonstrated (and human-intervention) actions.

It shows the algorithm contract at its smallest: the runtime, replay, checkpoints and evaluation are the ones SAC
uses, only the agent differs (``agent.name: bc``). The learner samples only the ``prior`` group (demos +
interventions) for it, so online rows the actor collects are stored but not learned from; interventions made
during a run are learned at once (DAgger-style when a person corrects the policy).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from robot_rl.agents.base import AgentConfig, Sampling, keep_global_rng, obs_batch
from robot_rl.agents.config import EncoderConfig
from robot_rl.agents.encoders import ObservationEncoder
from robot_rl.agents.networks import EncodedPolicy, init_parameters, mlp
from robot_rl.agents.off_policy import GradientAgent
from robot_rl.spaces import ObsSpec

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer


@dataclass(frozen=True)
class BCConfig(AgentConfig):
    """Behaviour cloning: an MLP policy trained with a mean-squared error on demonstrated actions."""

    name: str = "bc"
    """Which agent (``bc`` here; see AgentConfig)."""
    hidden_dims: tuple[int, ...] = (256, 256)
    """Hidden layer sizes of the policy MLP."""
    layer_norm: bool = False
    """LayerNorm in the policy's hidden layers."""
    lr: float = 1e-3
    """Adam learning rate."""
    weight_decay: float = 0.0
    """Adam weight decay (L2)."""
    batch_size: int = 256
    """Demonstration rows per gradient step."""
    utd: int = 1
    """Gradient steps per env step the actor takes (the learner's rate limiter paces updates by env steps)."""
    explore_std: float = 0.0
    """Std of Gaussian noise added to the action when acting stochastically (training); 0 = always the mean."""
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    """Observation encoder (cameras, state standardisation)."""

    def validate(self) -> None:
        for name in ("batch_size", "utd"):
            if getattr(self, name) < 1:
                raise ValueError(f"agent.{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0 or self.weight_decay < 0 or self.explore_std < 0:
            raise ValueError("agent.lr must be > 0, agent.weight_decay and agent.explore_std >= 0")


class BCAgent(GradientAgent):
    """Deterministic policy ``a = tanh(MLP(encoder(obs)))`` fitted to the prior data's actions."""

    name: ClassVar[str] = "bc"
    config_class: ClassVar[type[BCConfig]] = BCConfig
    exportable: ClassVar[bool] = True
    cfg: BCConfig

    def build(self, obs_spec: ObsSpec, init: torch.Generator) -> None:
        cfg = self.cfg
        with keep_global_rng():
            self.encoder = ObservationEncoder(obs_spec, cfg.encoder, generator=init).to(self.device)
            self.policy = mlp(self.encoder.out_dim, cfg.hidden_dims, self.action_dim, cfg.layer_norm)
        init_parameters(self.policy, init)
        self.policy = self.policy.to(self.device)
        params = list(self.policy.parameters()) + [p for p in self.encoder.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)

    # ---------------------------------------------------------------- contract
    @classmethod
    def sampling(cls, cfg: BCConfig) -> Sampling:
        """Demonstrations and interventions only; a run needs demos (or a teleop device) to start."""
        return Sampling(batch_size=cfg.batch_size, utd=cfg.utd, mix={"prior": 1.0}, needs=("prior",))

    def prepare(self, replay: ReplayBuffer) -> None:
        """Fits the state standardisation once, on the demonstrations the policy imitates."""
        if self.cfg.encoder.normalize_state and not self.encoder.normalizer_fitted:
            self.encoder.fit_state_normalizer(replay.valid_states("prior"))

    def _forward(self, obs: Mapping[str, Any], augment: bool = False) -> torch.Tensor:
        z = self.encoder(obs, augment and self.cfg.encoder.augment_pad > 0, self.generator)
        return torch.tanh(self.policy(z))

    def deterministic_module(self) -> torch.nn.Module:
        """The deterministic action as one module of ``obs -> action`` (for export: robot_rl.deploy)."""
        parts = copy.deepcopy((self.encoder, self.policy))  # the agent's own modules stay where they are
        return EncodedPolicy(*parts, self.action_dim).float().cpu().eval()

    @torch.no_grad()
    def act(self, obs: Mapping[str, Any], deterministic: bool = False) -> np.ndarray:
        tobs, single = obs_batch(obs, self.device)
        action = self._forward(tobs)
        if not deterministic and self.cfg.explore_std > 0:
            noise = torch.randn(action.shape, generator=self.act_generator, device=self.device)
            action = (action + self.cfg.explore_std * noise).clamp_(-1.0, 1.0)
        out = action.cpu().numpy()
        return out[0] if single else out

    def train_step(self, mb: Mapping[str, Any], update_actor: bool) -> dict[str, torch.Tensor]:
        """One gradient step of the MSE between the policy's and the stored actions."""
        pred = self._forward(mb["obs"], augment=self.encoder.has_pixels)
        loss = (pred - mb["action"]).square().sum(-1).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return {"bc_loss": loss.detach()}

    # ------------------------------------------------------------ state / io
    def policy_modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy, "encoder": self.encoder}

    def learned_state(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "encoder": self.encoder.state_dict(),
                "optimizer": self.optimizer.state_dict()}

    def load_learned_state(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.encoder.load_state_dict(state["encoder"])
        self.optimizer.load_state_dict(state["optimizer"])
