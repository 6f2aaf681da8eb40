"""Residual off-policy RL on a frozen base policy (``agent.name: residual``; ResFiT, Policy Decorator).

The base (a generalist policy run by the actor's chunk executor, local or behind a policy server) proposes an
action each control step; this agent adds a bounded residual:

    executed = clip(base + residual, -1, 1),   residual = bound * tanh(f(state, instruction, base, phase))

``f``'s output layer starts at zero, so the untrained agent executes the base exactly. The critics
(robot_rl.agents.critic: a LayerNorm ensemble, RLPD's subset-min target) score the executed action next to the base's
proposal and the step's phase in its chunk, trained on n-step returns; the residual actor is deterministic (TD3-style)
with small fixed exploration noise (or, ``stochastic``, a squashed Gaussian with SAC's tuned entropy bonus), trained
after a critic-only warm-up, with its bound optionally annealed in (``straight_through_clip`` lets its gradients pass
the clip to [-1, 1], with a penalty on the excess, so a residual past a saturated base's edge can come back). Its
objective is ``-Q`` plus behaviour cloning on the demo and intervention rows' residuals (which holds the early residual
near what the demonstrator did), or, with a residual_penalty, ``-Q / mean|Q| + residual_penalty * |residual / bound|^2``
(the residual then grows only where the critics' gradient holds it; without demos a plain ``-Q`` can follow an
extrapolating critic to the bound and make a working base fail). Demo and intervention rows enter as they are (the
executed action); the base's proposals on demo observations are labelled when the run starts
(robot_rl.policies.relabel), so their residual is ``a - base``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from robot_rl.agents.base import keep_global_rng, obs_batch
from robot_rl.agents.bc_loss import bc_term
from robot_rl.agents.networks import init_parameters, mlp, phase_one_hot, squashed_gaussian
from robot_rl.agents.off_policy import ActorCriticAgent
from robot_rl.agents.residual_config import OnBaseConfig, ResidualConfig
from robot_rl.spaces import ObsSpec


class ResidualActor(nn.Module):
    """``bound * tanh(mlp(x))`` with a zero-initialised output layer; the bound (one per action dimension) is a
    buffer: it ships with the policy, so actors use the annealed bound of the weights they run. A stochastic actor
    also outputs a log-std (before the tanh; initially ``init_std`` per dimension) and samples
    ``bound * tanh(mu + std * eps)``."""

    LOG_STD_RANGE = (-5.0, 1.0)

    def __init__(self, in_dim: int, action_dim: int, hidden_dims: tuple[int, ...], layer_norm: bool,
                 stochastic: bool = False, init_std: tuple[float, ...] = ()) -> None:
        super().__init__()
        self.action_dim, self.stochastic, self.init_std = action_dim, stochastic, init_std
        self.net = mlp(in_dim, hidden_dims, action_dim * (2 if stochastic else 1), layer_norm)
        self.register_buffer("bound", torch.zeros(action_dim))

    def _load_from_state_dict(self, state: dict, prefix: str, *args: Any) -> None:
        # policies saved with one bound for every dimension (shape [1]) load as that bound per dimension
        key = prefix + "bound"
        if key in state and state[key].shape == (1,) and self.bound.shape != (1,):
            state[key] = state[key].expand_as(self.bound).clone()
        super()._load_from_state_dict(state, prefix, *args)

    def zero_output(self) -> None:
        with torch.no_grad():
            self.net[-1].weight.zero_()
            self.net[-1].bias.zero_()
            if self.stochastic:  # the raw log-std whose soft clamp is log(init_std)
                low, high = self.LOG_STD_RANGE
                for i, std in enumerate(self.init_std):
                    share = (math.log(max(std, 1e-6)) - low) / (high - low)
                    self.net[-1].bias[self.action_dim + i] = math.atanh(min(max(2 * share - 1, -0.999), 0.999))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The mean residual (the stochastic actor's deterministic one)."""
        return self.bound * torch.tanh(self.net(x)[..., : self.action_dim])

    def sample(self, x: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """A stochastic actor's sampled residual, its log-probability (of the squashed sample in [-1, 1]) and the
        mean residual (the deterministic one), from one pass of the network."""
        mu, raw_log_std = self.net(x).chunk(2, dim=-1)
        squashed, log_prob = squashed_gaussian(mu, raw_log_std, *self.LOG_STD_RANGE, generator)
        return self.bound * squashed, log_prob, self.bound * torch.tanh(mu)


class ResidualAgent(ActorCriticAgent):
    """See the module docstring and :class:`ResidualConfig`."""

    name: ClassVar[str] = "residual"
    config_class: ClassVar[type[ResidualConfig]] = ResidualConfig
    uses_base: ClassVar[bool] = True
    cfg: OnBaseConfig

    def critic_extra_dim(self) -> int:
        """The features beside the encoder's latent: the base's proposal (critic_base_input) and the chunk phase."""
        return (self.action_dim if self.cfg.critic_base_input else 0) + self.cfg.chunk_phases

    def build(self, obs_spec: ObsSpec, init: torch.Generator) -> None:
        super().build(obs_spec, init)
        self._full_bound = torch.tensor(self.cfg.bounds(self.action_dim), dtype=torch.float32, device=self.device)
        self._set_bound()

    def make_actor(self, init: torch.Generator) -> nn.Module:
        """The bounded residual actor on the latent, the base's proposal (actor_base_input) and the chunk phase; its
        output layer starts at zero (the untrained agent executes the base)."""
        cfg, action_dim = self.cfg, self.action_dim
        actor_dim = self.encoder.out_dim + (action_dim if cfg.actor_base_input else 0) + cfg.chunk_phases
        # the stochastic actor's first noise is exploration_std in action units, as the fixed noise is
        init_std = tuple(cfg.exploration_std / b for b in cfg.bounds(action_dim))
        with keep_global_rng():
            actor = ResidualActor(actor_dim, action_dim, cfg.hidden_dims, cfg.actor_layer_norm, cfg.stochastic,
                                  init_std)
        init_parameters(actor, init)
        actor.zero_output()
        return actor

    def tunes_temperature(self) -> bool:
        """The stochastic actor's entropy temperature (SAC's), tuned towards target_entropy."""
        return self.cfg.stochastic

    # ------------------------------------------------------------------ acting
    @property
    def bound(self) -> float:
        """The residual's current bound, the largest over the action's dimensions (0 during the critic warm-up)."""
        return float(self.actor.bound.max())

    def _features(self, z: torch.Tensor, base: torch.Tensor, chunk_index: torch.Tensor) -> torch.Tensor:
        parts = [z, base.reshape(z.shape[0], -1).float()]
        if self.cfg.chunk_phases:
            parts.append(phase_one_hot(chunk_index, self.cfg.chunk_phases))
        return torch.cat(parts, dim=-1)

    def features(self, mb: Mapping[str, Any], next_step: bool = False) -> torch.Tensor:
        """The encoder's latent, the base's proposal and the step's phase in its chunk."""
        pre = "next_" if next_step else ""
        return self._features(self.critic.encode(mb[pre + "obs"]), mb[pre + "base_action"], mb[pre + "chunk_index"])

    def critic_input(self, x: torch.Tensor) -> torch.Tensor:
        """The critics' part of the features: all of them, or without the base's proposal (critic_base_input)."""
        return x if self.cfg.critic_base_input else self._without_base(x)

    def _actor_input(self, x: torch.Tensor) -> torch.Tensor:
        """The actor's part of the features: all of them, or without the base's proposal (actor_base_input)."""
        return x if self.cfg.actor_base_input else self._without_base(x)

    def _without_base(self, x: torch.Tensor) -> torch.Tensor:
        z_dim = self.encoder.out_dim
        return torch.cat([x[:, :z_dim], x[:, z_dim + self.action_dim:]], dim=-1)

    @torch.no_grad()
    def act(self, obs: Mapping[str, Any], deterministic: bool = False) -> np.ndarray:
        """``clip(base + residual)`` for one observation or a batch; needs ``base_action`` and ``chunk_index``
        (the actor and evaluation add them: see robot_rl.agents.base)."""
        if "base_action" not in obs:
            raise ValueError(f"agent {self.name!r} acts on a base policy's proposal: set base_policy.path")
        index = obs.get("chunk_index")
        if index is None:  # no phase known: a held step's encoding
            index = np.full(np.shape(obs["state"])[:-1], -1, np.int64)
        tobs, single = obs_batch({**self.critic.seen(obs), "chunk_index": np.asarray(index)}, self.device)
        x = self._features(self.encoder(tobs), tobs["base_action"], tobs["chunk_index"])
        if self.cfg.stochastic and not deterministic:
            residual = self.actor.sample(self._actor_input(x), self.act_generator)[0]
        else:
            residual = self.actor(self._actor_input(x))
            if not deterministic and self.cfg.exploration_std > 0:  # the fixed exploration noise
                noise = torch.randn(residual.shape, device=self.device, generator=self.act_generator)
                residual = (residual + self.cfg.exploration_std * noise).clamp(-self.actor.bound, self.actor.bound)
        base = tobs["base_action"].reshape(residual.shape).float()
        action = self._choose(x, base, self._raw_action(base, residual).clamp(-1.0, 1.0), tobs["chunk_index"],
                              deterministic)
        action = action.cpu().numpy()
        return action[0] if single else action

    # the hooks a variant on the same actor, critics and data overrides (robot_rl.agents.ibrl)
    def _raw_action(self, base: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The action the actor's output stands for, before the clip to [-1, 1]: ``base + residual``."""
        return base + out

    def _choose(self, x: torch.Tensor, base: torch.Tensor, action: torch.Tensor, chunk_index: torch.Tensor,
                deterministic: bool = False) -> torch.Tensor:
        """The executed action, given the base's proposal, the agent's action, the step's index in the base's chunk
        and whether the agent acts without exploring: the agent's."""
        return action

    def _target_q(self, x_next: torch.Tensor, next_base: torch.Tensor, next_action: torch.Tensor,
                  members: torch.Tensor) -> torch.Tensor:
        """The critics' target value of the next step: the subset-min of the target critics at the next action."""
        return self.critic.target_value(self.critic_input(x_next), next_action, members)

    def _bc_target(self, base: torch.Tensor, action: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
        """A demo or intervention action as the actor can reproduce it: the base plus the bounded residual."""
        return (base + (action - base).clamp(-bound, bound)).clamp(-1, 1)

    # ---------------------------------------------------------------- learning
    def _set_bound(self) -> None:
        cfg = self.cfg
        past = self.update_step - cfg.critic_warmup_updates
        if past < 0:
            share = 0.0
        else:
            share = 1.0 if cfg.scale_anneal_updates == 0 else min(1.0, past / cfg.scale_anneal_updates)
        self.actor.bound.copy_(self._full_bound * share)

    def check_batch(self, batch: Mapping[str, Any]) -> Mapping[str, Any]:
        if "base_action" not in batch:
            raise ValueError(f"agent {self.name!r} needs the base's proposals in replay samples "
                             "(ReplayBuffer.with_base)")
        return super().check_batch(batch)

    def actor_trains(self) -> bool:
        """After the critic warm-up."""
        return self.update_step >= self.cfg.critic_warmup_updates

    def after_update(self) -> dict[str, float]:
        out = super().after_update()
        self._set_bound()
        return {**out, "residual_bound": self.bound}

    def _faded(self, weight: float, decay_updates: int) -> float:
        """``weight``, decayed linearly to 0 over ``decay_updates`` after the critic warm-up (0: constant)."""
        if decay_updates == 0:
            return weight
        past = max(0, self.update_step - self.cfg.critic_warmup_updates)
        return weight * max(0.0, 1.0 - past / decay_updates)

    def _base_anchor_weight(self) -> float:
        """Weight of the squared distance between the actor's (mean) executed action and the base's proposal in the
        actor's loss; 0 here (a residual's size has residual_penalty), IBRLAgent's pull towards the base."""
        return 0.0

    def next_value(self, mb: Mapping[str, Any], members: torch.Tensor) -> torch.Tensor:
        """The target critics at the next step's executed action: the base's proposal plus the actor's residual
        (target smoothing noise on a deterministic actor; the policy's own noise on a stochastic one, no entropy
        backup)."""
        cfg, bound = self.cfg, self.actor.bound
        x_next = self.features(mb, next_step=True)
        if cfg.stochastic:
            residual_next = self.actor.sample(self._actor_input(x_next), self.generator)[0]
        else:
            noise = torch.randn(mb["action"].shape, device=self.device, generator=self.generator)
            clip = cfg.target_noise_clip * bound
            noise = (cfg.target_noise_std * bound * noise).clamp(-clip, clip)
            residual_next = (self.actor(self._actor_input(x_next)) + noise).clamp(-bound, bound)
        next_base = mb["next_base_action"].float()
        next_action = self._raw_action(next_base, residual_next).clamp(-1.0, 1.0)
        return self._target_q(x_next, next_base, next_action, members)

    def actor_loss(self, xd: torch.Tensor, mb: Mapping[str, Any],
                   q: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``-Q`` (or its scale-free form against a residual penalty), the entropy bonus of a stochastic actor,
        behaviour cloning on demo and intervention rows, a pull towards the base (ibrl) and the clip-excess penalty."""
        cfg, bound, critic = self.cfg, self.actor.bound, self.critic
        metrics: dict[str, torch.Tensor] = {}
        temperature_loss: torch.Tensor | float = 0.0  # a stochastic actor's (not part of the reported actor loss)
        xa = self._actor_input(xd)
        base = mb["base_action"].float()
        if cfg.stochastic:
            residual, log_prob, mean_residual = self.actor.sample(xa, self.generator)
        else:
            residual = self.actor(xa)
        raw = self._raw_action(base, residual)
        action = raw.clamp(-1.0, 1.0)
        through, excess_weight = cfg.straight_through()
        if through:  # the clipped value, the gradient as if unclipped
            action = raw + (action - raw).detach()
        q_all = critic.values(self.critic_input(xd), action, detach_params=True)
        q_pi = q_mean = q_all.mean(0)
        if cfg.actor_pessimism > 0:  # a lower confidence bound: where the critics disagree, they extrapolate
            spread = q_all.std(0)
            q_pi = q_mean - cfg.actor_pessimism * spread
            metrics["q_pi_std"] = spread.detach().mean()
        if cfg.residual_penalty > 0:  # scale-free Q term against a penalty on the residual's size
            scale = q_pi.detach().abs().mean().clamp_min(1e-6)
            penalty = (residual / bound.clamp_min(1e-8)).square().sum(-1).mean()
            actor_loss = -q_pi.mean() / scale + cfg.residual_penalty * penalty
            metrics["residual_penalty"] = penalty.detach()
        else:
            actor_loss = -q_pi.mean()
        if cfg.stochastic:
            alpha = self.log_alpha.detach().exp()
            actor_loss = actor_loss + alpha * log_prob.mean()
            entropy = -log_prob.detach().mean()
            temperature_loss = self.temperature_loss(entropy)
            metrics.update(entropy=entropy, alpha=alpha)
        bc_weight = self._faded(cfg.bc_weight, cfg.bc_decay_updates)
        anchor_weight = self._base_anchor_weight()
        if bc_weight > 0 or anchor_weight > 0:  # the stochastic actor imitates with its mean action
            imitating = self._raw_action(base, mean_residual).clamp(-1.0, 1.0) if cfg.stochastic else action
        if bc_weight > 0:
            relabelled = {**mb, "action": self._bc_target(base, mb["action"].float(), bound)}
            bc_loss, bc_rows, _ = bc_term(imitating, relabelled, q.mean(0), q_mean.detach(), cfg.bc_q_filter)
            actor_loss = actor_loss + bc_weight * bc_loss
            metrics.update(bc_loss=bc_loss.detach(), bc_rows=bc_rows)
        if anchor_weight > 0:
            anchor = (imitating - base).square().sum(-1).mean()
            actor_loss = actor_loss + anchor_weight * anchor
            metrics["base_anchor"] = anchor.detach()
        if through and excess_weight > 0:
            excess = (raw.abs() - 1.0).clamp_min(0.0).square().sum(-1).mean()
            actor_loss = actor_loss + excess_weight * excess
            metrics["clip_excess"] = excess.detach()
        metrics.update(actor_loss=actor_loss.detach(), residual_abs=residual.detach().abs().mean())
        return actor_loss + temperature_loss, metrics
