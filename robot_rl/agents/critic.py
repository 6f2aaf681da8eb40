"""The critic ensemble of every off-policy agent here (SAC/RLPD, residual, ibrl, critic-guided), written once.

A :class:`Critic` owns the observation encoder the critics train, the ensemble (``EnsembleCritic``: every member's
weights stacked, one batched matmul), its Polyak-averaged target copy, the Adam optimizer of both, the HL-Gauss
head when the critic is categorical, and the one critic update:

    members = critic.members()                              # a fresh random subset of the target critics
    next_value = critic.target_value(x_next, a_next, members)   # their min (RLPD's subset-min)
    target = critic.td_target(batch, next_value)            # r + gamma^k (1 - terminated) next_value (n-step)
    loss, q, metrics = critic.loss(x, batch["action"], target)  # MSE, or HL-Gauss cross-entropy
    critic.step(loss)                                       # one Adam step, then the Polyak update of the target

An agent keeps what makes it different: what the critics read (``x``: the encoder's latent plus, e.g., a base's
proposal and the chunk phase), which next action the target is taken at (the policy's, a base's, the better of both)
and what joins the critics' loss in the same backward pass (an actor's loss; the actor's parameter groups then join
the optimizer, :meth:`Critic.add_param_group`, so one fused Adam step covers both). The pieces above are separate
calls, not one, so an agent can run them under its own autocast or ``torch.compile`` and add its terms between them.

Usable alone, on any ``{"obs", "action", "reward", "terminated", "next_obs"}`` batch (``discount`` too for n-step
samples): see ``tests/agents/test_critic.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from robot_rl.agents.base import keep_global_rng
from robot_rl.agents.config import CriticConfig
from robot_rl.agents.encoders import ObservationEncoder
from robot_rl.agents.fused_adam import FusedAdamStep
from robot_rl.agents.hl_gauss import HLGauss
from robot_rl.agents.networks import EnsembleCritic, init_parameters
from robot_rl.agents.torch_compat import foreach_lerp_
from robot_rl.spaces import ObsSpec

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer

__all__ = ["Critic", "CriticConfig", "seen_spec"]


def seen_spec(obs_spec: ObsSpec, cfg: CriticConfig) -> ObsSpec:
    """What the encoder reads of ``obs_spec``: all of it, or without the cameras (``use_cameras`` off)."""
    return obs_spec if cfg.use_cameras else ObsSpec(obs_spec.state_dim, {}, obs_spec.instruction_dim)


class Critic:
    """The encoder, critic ensemble, target and optimizer of an off-policy agent, and its one critic update.

    ``extra_dim``: features the agent appends to the encoder's latent before the critics read it (the critics' input
    is ``encoder.out_dim + extra_dim`` features and the action). ``init`` draws the initial weights (encoder first,
    then the critics: an agent builds its actor after this, from the same generator); ``generator`` draws the
    update's randomness (target subsets, image augmentation) and is the agent's, shared with its other draws.
    """

    def __init__(self, cfg: CriticConfig, obs_spec: ObsSpec, action_dim: int, extra_dim: int = 0, *,
                 init: torch.Generator, generator: torch.Generator, device: torch.device | str = "cpu") -> None:
        self.cfg = cfg
        self.device = torch.device(device)
        self.generator = generator
        out = cfg.hl_gauss_bins if cfg.hl_gauss else 1
        with keep_global_rng():
            self.encoder = ObservationEncoder(seen_spec(obs_spec, cfg), cfg.encoder, generator=init).to(self.device)
            self.in_dim = self.encoder.out_dim + extra_dim
            net = EnsembleCritic(cfg.num_critics, self.in_dim + action_dim, cfg.hidden_dims, out, cfg.critic_layer_norm)
        init_parameters(net, init)
        self.net = net.to(self.device)
        self.target = copy.deepcopy(self.net).requires_grad_(False)
        self.hl = (HLGauss(*cfg.hl_gauss_range, cfg.hl_gauss_bins, cfg.hl_gauss_sigma_ratio).to(self.device)
                   if cfg.hl_gauss else None)
        if self.encoder.has_pixels:
            self.encoder.to(memory_format=torch.channels_last)
        trained = list(self.net.parameters()) + [p for p in self.encoder.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam([{"params": trained, "lr": cfg.critic_lr, "name": "critic"}],
                                          fused=self.device.type in ("cpu", "cuda"))
        self.fused_step = FusedAdamStep(self.optimizer)
        self._online, self._target = list(self.net.parameters()), list(self.target.parameters())
        self.steps = 0
        """Critic updates made (:meth:`step`, :meth:`step_grads`)."""

    def add_param_group(self, params: Iterable[torch.Tensor], lr: float, name: str) -> int:
        """Adds parameters trained in the same backward pass as the critics (an actor, a temperature) to the
        optimizer, as a group of their own; returns its index (group 0 is the critics')."""
        self.optimizer.add_param_group({"params": list(params), "lr": lr, "name": name})
        return len(self.optimizer.param_groups) - 1

    # ----------------------------------------------------------------- inputs
    def seen(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """The observation without its camera frames when the encoder does not read them (no copy of the frames)."""
        return dict(obs) if self.cfg.use_cameras else {k: v for k, v in obs.items() if k != "pixels"}

    def encode(self, obs: Mapping[str, Any], augment: bool = True) -> torch.Tensor:
        """The encoder's latent ``[B, Z]``; camera frames random-shifted (``encoder.augment_pad``) with ``augment``."""
        shift = augment and self.encoder.has_pixels and self.cfg.encoder.augment_pad > 0
        return self.encoder(obs, shift, self.generator)

    def prepare(self, replay: ReplayBuffer) -> None:
        """Fits the encoder's state standardisation once on the replay's contents (then frozen, checkpointed)."""
        if self.cfg.encoder.normalize_state and not self.encoder.normalizer_fitted:
            self.encoder.fit_state_normalizer(replay.valid_states())

    # ----------------------------------------------------------------- values
    def scalar(self, out: torch.Tensor) -> torch.Tensor:
        """Critic outputs ``[E, B, 1 | bins]`` -> Q values ``[E, B]``."""
        return self.hl.to_scalar(out) if self.hl is not None else out.squeeze(-1).float()

    def values(self, x: torch.Tensor, action: torch.Tensor, detach_params: bool = False,
               members: torch.Tensor | None = None) -> torch.Tensor:
        """Every online critic's Q ``[E, B]`` (or the ``members``'); ``detach_params`` lets gradients reach ``x`` and
        the action but not the critics (an actor's loss)."""
        return self.scalar(self.net(x, action, detach_params, members))

    def members(self) -> torch.Tensor:
        """A random subset of ``num_min_critics`` target critics (drawn from the agent's generator)."""
        perm = torch.randperm(self.cfg.num_critics, device=self.device, generator=self.generator)
        return perm[: self.cfg.num_min_critics]

    def target_value(self, x: torch.Tensor, action: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        """The min over the ``members`` target critics of Q at ``(x, action)``, ``[B]`` (RLPD's subset-min)."""
        return self.scalar(self.target(x, action, members=members)).min(0).values

    def td_target(self, batch: Mapping[str, torch.Tensor], next_value: torch.Tensor) -> torch.Tensor:
        """``reward + discount * (1 - terminated) * next_value`` ``[B]``; ``discount`` is the sample's own
        (``gamma^k`` for the ``k`` transitions an n-step sample sums) where it has one, else ``cfg.discount``."""
        discount = batch["discount"].float() if "discount" in batch else self.cfg.discount
        return batch["reward"].float() + discount * (1.0 - batch["terminated"].float()) * next_value

    def check_batch(self, batch: Mapping[str, Any], agent: str) -> None:
        """Raises ValueError when n-step targets are configured and ``batch`` is not an n-step sample."""
        if self.cfg.n_step > 1 and "discount" not in batch:
            raise ValueError(f"agent {agent!r} (n_step {self.cfg.n_step}) needs n-step samples: call "
                             "replay.set_n_step(s.n_step, s.discount) with s = the agent class's sampling(cfg)")

    # ----------------------------------------------------------------- update
    def loss(self, x: torch.Tensor, action: torch.Tensor,
             target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The critics' loss on ``(x, action)`` against ``target`` ``[B]`` (mean over members and rows of the squared
        error, or HL-Gauss cross-entropy), the critics' values there ``[E, B]`` (detached) and the metrics."""
        out = self.net(x, action)
        if self.hl is not None:
            loss = self.hl.loss(out, target)
        else:
            loss = (out.squeeze(-1).float() - target).pow(2).mean()
        q = self.scalar(out.detach())
        return loss, q, {"critic_loss": loss.detach(), "q_mean": q.mean()}

    def step(self, loss: torch.Tensor) -> None:
        """One optimizer step on ``loss`` (the critics' loss, plus whatever the agent trains with it), then the
        Polyak update of the target critics."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.update_target()

    def step_grads(self, groups: tuple[int, ...]) -> None:
        """One fused Adam step of the parameter groups ``groups`` from the gradients already in their ``.grad``
        (hand-derived: robot_rl.agents.manual_grad), then the Polyak update of the target critics."""
        self.fused_step.step(groups)
        self.update_target()

    def update_target(self) -> None:
        """``target += tau * (online - target)`` and one more critic step counted."""
        with torch.no_grad():
            foreach_lerp_(self._target, self._online, self.cfg.tau)
        self.steps += 1

    # ------------------------------------------------------------ state / io
    def state_dict(self) -> dict[str, Any]:
        """The critics, their target, the encoder, the optimizer and the step count, under the keys agents' checkpoints
        have always used (``critic``, ``target_critic``, ``encoder``, ``optimizer``, ``critic_step``)."""
        return {"critic": self.net.state_dict(), "target_critic": self.target.state_dict(),
                "encoder": self.encoder.state_dict(), "optimizer": self.optimizer.state_dict(),
                "critic_step": self.steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.net.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target_critic"])
        self.encoder.load_state_dict(state["encoder"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["critic_step"])
