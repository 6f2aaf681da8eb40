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
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn

from robot_rl.agents.base import Sampling, index_tree, keep_global_rng, obs_batch, seeded_generator, utd_batch
from robot_rl.agents.bc_loss import bc_term
from robot_rl.agents.critic import Critic
from robot_rl.agents.networks import init_parameters, mlp, phase_one_hot, squashed_gaussian
from robot_rl.agents.residual_config import OnBaseConfig, ResidualConfig
from robot_rl.spaces import ObsSpec

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer


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


class ResidualAgent:
    """See the module docstring and :class:`ResidualConfig`."""

    name: ClassVar[str] = "residual"
    config_class: ClassVar[type[ResidualConfig]] = ResidualConfig
    uses_base: ClassVar[bool] = True

    def __init__(self, obs_spec: ObsSpec, action_dim: int, cfg: OnBaseConfig | None = None, seed: int = 0) -> None:
        self.cfg = cfg = cfg or ResidualConfig()
        cfg.validate()
        self.check_spaces(obs_spec, action_dim, cfg)
        self.obs_spec, self.action_dim = obs_spec, action_dim
        self.device = torch.device(cfg.device)
        init = seeded_generator(seed)
        self.generator = seeded_generator(seed + 1, self.device)
        self.act_generator = seeded_generator(seed + 2, self.device)
        # the features x: the encoder's latent, the base's proposal, the step's phase in its chunk
        extra = action_dim + cfg.chunk_phases
        self.critic = Critic(cfg, obs_spec, action_dim, extra if cfg.critic_base_input else cfg.chunk_phases,
                             init=init, generator=self.generator, device=self.device)
        self.encoder = self.critic.encoder  # trained by the critics' loss; the actor reads its output (detached)
        actor_dim = self.encoder.out_dim + (extra if cfg.actor_base_input else cfg.chunk_phases)
        # the stochastic actor's first noise is exploration_std in action units, as the fixed noise is
        init_std = tuple(cfg.exploration_std / b for b in cfg.bounds(action_dim))
        with keep_global_rng():
            actor = ResidualActor(actor_dim, action_dim, cfg.hidden_dims, cfg.actor_layer_norm, cfg.stochastic,
                                  init_std)
        init_parameters(actor, init)
        actor.zero_output()
        self.actor = actor.to(self.device)
        self.critic.add_param_group(self.actor.parameters(), cfg.actor_lr, "actor")
        # the stochastic actor's entropy temperature (SAC's), tuned towards target_entropy
        self.log_alpha = torch.tensor(math.log(cfg.init_temperature), device=self.device, requires_grad=True)
        self.target_entropy = cfg.target_entropy if cfg.target_entropy is not None else -action_dim / 2
        if cfg.stochastic:
            self.critic.add_param_group([self.log_alpha], cfg.temperature_lr, "temperature")
        self._full_bound = torch.tensor(cfg.bounds(action_dim), dtype=torch.float32, device=self.device)
        self.update_step = 0
        self._set_bound()

    # ---------------------------------------------------------------- contract
    @classmethod
    def check_spaces(cls, obs_spec: ObsSpec, action_dim: int, cfg: OnBaseConfig) -> None:
        if action_dim < 1:
            raise ValueError(f"agent residual needs a continuous action of at least 1 dimension, got {action_dim}")
        if obs_spec.state_dim < 1 and not (cfg.use_cameras and obs_spec.cameras):
            raise ValueError("agent residual needs a state vector (or use_cameras with cameras in the observation)")

    @classmethod
    def sampling(cls, cfg: OnBaseConfig) -> Sampling:
        """``utd`` critic steps per update on n-step samples in the replay's mix (online vs prior data)."""
        return cfg.critic_sampling()

    def prepare(self, replay: ReplayBuffer) -> None:
        """Before the first update: fit the state standardisation on the replay's contents (then frozen)."""
        self.critic.prepare(replay)

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

    def _critic_input(self, x: torch.Tensor) -> torch.Tensor:
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
        return self.critic.target_value(self._critic_input(x_next), next_action, members)

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

    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """``utd`` critic steps on a ``[utd, B, ...]`` sample; the last also trains the residual actor (once the
        critic warm-up is over). Returns the last step's metrics."""
        if "base_action" not in batch:
            raise ValueError(f"agent {self.name!r} needs the base's proposals in replay samples "
                             "(ReplayBuffer.with_base)")
        self.critic.check_batch(batch, self.name)
        batch = {**batch, "obs": self.critic.seen(batch["obs"]), "next_obs": self.critic.seen(batch["next_obs"])}
        tb = utd_batch(batch, self.device)
        utd = tb["action"].shape[0]
        train_actor = self.update_step >= self.cfg.critic_warmup_updates
        metrics: dict[str, torch.Tensor] = {}
        for i in range(utd):
            metrics = self._train_step(index_tree(tb, i), update_actor=train_actor and i == utd - 1)
        self.update_step += 1
        self._set_bound()
        out = {k: float(v) for k, v in metrics.items()}
        out["residual_bound"] = self.bound
        return out

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

    def _train_step(self, mb: Mapping[str, Any], update_actor: bool) -> dict[str, torch.Tensor]:
        cfg, bound, critic = self.cfg, self.actor.bound, self.critic
        members = critic.members()
        x = self._features(critic.encode(mb["obs"]), mb["base_action"], mb["chunk_index"])
        with torch.no_grad():
            x_next = self._features(critic.encode(mb["next_obs"]), mb["next_base_action"], mb["next_chunk_index"])
            if cfg.stochastic:  # the policy's own noise in place of target smoothing (no entropy backup)
                residual_next = self.actor.sample(self._actor_input(x_next), self.generator)[0]
            else:
                noise = torch.randn(mb["action"].shape, device=self.device, generator=self.generator)
                clip = cfg.target_noise_clip * bound
                noise = (cfg.target_noise_std * bound * noise).clamp(-clip, clip)
                residual_next = (self.actor(self._actor_input(x_next)) + noise).clamp(-bound, bound)
            next_base = mb["next_base_action"].float()
            next_action = self._raw_action(next_base, residual_next).clamp(-1.0, 1.0)
            target = critic.td_target(mb, self._target_q(x_next, next_base, next_action, members))
        loss, q, metrics = critic.loss(self._critic_input(x), mb["action"].float(), target)
        if update_actor:
            xd = x.detach()
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
            q_all = critic.values(self._critic_input(xd), action, detach_params=True)
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
                loss = loss + self.log_alpha.exp() * (entropy - self.target_entropy)
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
            loss = loss + actor_loss
            metrics.update(actor_loss=actor_loss.detach(), residual_abs=residual.detach().abs().mean())
        critic.step(loss)
        return metrics

    # ------------------------------------------------------------ state / io
    def policy_state(self) -> dict[str, torch.Tensor]:
        """What an actor needs: the residual actor (with its current bound) and the encoder."""
        out = {f"actor.{k}": v for k, v in self.actor.state_dict().items()}
        out.update({f"encoder.{k}": v for k, v in self.encoder.state_dict().items()})
        return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in out.items()}

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        self.actor.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("actor.")})
        self.encoder.load_state_dict({k[8:]: v for k, v in state.items() if k.startswith("encoder.")})

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume learning exactly."""
        return {"actor": self.actor.state_dict(), **self.critic.state_dict(), "generator": self.generator.get_state(),
                "update_step": self.update_step, "log_alpha": self.log_alpha.detach().clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state)
        self.generator.set_state(state["generator"])
        self.update_step = int(state["update_step"])
        if "log_alpha" in state:  # (absent from checkpoints of deterministic agents made before it was saved)
            with torch.no_grad():
                self.log_alpha.copy_(state["log_alpha"])
