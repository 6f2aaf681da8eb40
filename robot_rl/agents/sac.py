"""SAC with the RLPD recipe. Usable on its own: no process, transport or replay is needed to act or update.

One ``update`` call takes a ``[utd, batch]`` sample and performs ``utd`` critic steps (robot_rl.agents.critic: the
encoder, the critic ensemble and its subset-min target); the last step also updates the actor and the temperature in
the same backward pass (critic, actor and temperature losses touch disjoint parameters, so summing them and stepping
one optimizer, the critic's with the actor's and temperature's groups added, is exact).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from robot_rl.agents.base import (
    Batch,
    Sampling,
    index_tree,
    keep_global_rng,
    obs_batch,
    seeded_generator,
    to_torch,
    utd_batch,
)
from robot_rl.agents.bc_loss import bc_term
from robot_rl.agents.config import SACConfig
from robot_rl.agents.critic import Critic, seen_spec
from robot_rl.agents.manual_grad import ManualSACStep, supports
from robot_rl.agents.networks import EncodedPolicy, TanhGaussianActor, init_parameters
from robot_rl.spaces import ObsSpec

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer

__all__ = ["Batch", "SACAgent", "index_tree", "to_torch"]


class SACAgent:
    """Soft actor-critic agent (RLPD defaults). See :class:`SACConfig` for every knob.

    ``seed`` draws the initial weights and the update's randomness (critic subsets, augmentation, policy noise);
    acting draws from a generator of its own (:meth:`act`), so an actor's exploration depends only on its seed.
    """

    name: ClassVar[str] = "sac"
    config_class: ClassVar[type[SACConfig]] = SACConfig
    exportable: ClassVar[bool] = True

    def __init__(self, obs_spec: ObsSpec, action_dim: int, cfg: SACConfig | None = None, seed: int = 0) -> None:
        self.cfg = cfg = cfg or SACConfig()
        cfg.validate()
        self.check_spaces(obs_spec, action_dim, cfg)
        # what the agent reads (export takes the same): without use_cameras, the state and instruction only
        self.obs_spec = seen_spec(obs_spec, cfg)
        self.action_dim = action_dim
        self.device = torch.device(cfg.device)
        init = seeded_generator(seed)
        self.generator = seeded_generator(seed + 1, self.device)
        self.act_generator = seeded_generator(seed + 2, self.device)
        self.critic = Critic(cfg, obs_spec, action_dim, init=init, generator=self.generator, device=self.device)
        self.encoder = self.critic.encoder  # trained by the critics' loss; the actor reads its output (detached)
        with keep_global_rng():
            actor = TanhGaussianActor(self.encoder.out_dim, action_dim, cfg.hidden_dims,
                                      layer_norm=cfg.actor_layer_norm)
        init_parameters(actor, init)
        self.actor = actor.to(self.device)
        self.log_alpha = torch.tensor(float(np.log(cfg.init_temperature)), device=self.device, requires_grad=True)
        self.target_entropy = cfg.target_entropy if cfg.target_entropy is not None else -action_dim / 2
        # actor and temperature step with the critics: their losses touch disjoint parameters, one backward pass
        self.critic.add_param_group(self.actor.parameters(), cfg.actor_lr, "actor")
        self.critic.add_param_group([self.log_alpha], cfg.temperature_lr, "temperature")
        self.update_step = 0
        self._losses = torch.compile(self._compute_losses) if cfg.compile else self._compute_losses
        manual = cfg.manual_grad if cfg.manual_grad is not None else self.device.type == "cpu"
        self._manual = ManualSACStep(self) if manual and not cfg.compile and supports(self) else None

    # ---------------------------------------------------------------- contract
    @classmethod
    def check_spaces(cls, obs_spec: ObsSpec, action_dim: int, cfg: SACConfig) -> None:
        """SAC takes any proprioception size and any cameras; it needs at least one action dimension."""
        if action_dim < 1:
            raise ValueError(f"agent sac needs a continuous action of at least 1 dimension, got {action_dim}")
        if obs_spec.state_dim < 1 and not (cfg.use_cameras and obs_spec.cameras):
            raise ValueError("agent sac needs a state vector or at least one camera in the observation (and "
                             "use_cameras on)")

    @classmethod
    def sampling(cls, cfg: SACConfig) -> Sampling:
        """One update = ``utd`` critic steps on a ``[utd, batch_size]`` sample in the replay's mix."""
        return cfg.critic_sampling()

    def prepare(self, replay: ReplayBuffer) -> None:
        """Before the first update: fit the state standardisation on everything in the replay (demos and warm-up
        data); it is then frozen (and restored from checkpoints, never refitted)."""
        self.critic.prepare(replay)

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: Mapping[str, Any], deterministic: bool = False) -> np.ndarray:
        """Action(s) in [-1, 1] for one observation (``state [D]``) or a batch (``state [N, D]``)."""
        tobs, single = obs_batch(self.critic.seen(obs), self.device)  # no copy of frames the agent does not read
        with self._autocast():
            action, _ = self.actor(self.encoder(tobs), deterministic, self.act_generator)
        action = action.float().cpu().numpy()
        return action[0] if single else action

    # ---------------------------------------------------------------- learning
    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def update(self, batch: Batch) -> dict[str, float]:
        """One RLPD update over a ``[utd, B, ...]`` batch: ``utd`` critic steps, the last with actor + alpha.

        A ``[B, ...]`` batch (no utd axis) is treated as ``utd = 1``. Returns the last step's metrics.
        """
        self.critic.check_batch(batch, self.name)
        tb = utd_batch(batch, self.device)
        utd = tb["action"].shape[0]
        metrics: dict[str, torch.Tensor] = {}
        for i in range(utd):
            metrics = self._train_step(index_tree(tb, i), update_actor=(i == utd - 1))
        self.update_step += 1
        out = {k: float(v) for k, v in metrics.items()}
        out["alpha"] = self.alpha
        return out

    def _train_step(self, mb: Batch, update_actor: bool) -> dict[str, torch.Tensor]:
        members = self.critic.members()
        alpha = self.log_alpha.detach().exp()
        if self._manual is not None:
            metrics = self._manual.compute_grads(mb, alpha, members, update_actor)
            self.critic.step_grads((0, 1, 2) if update_actor else (0,))
        else:
            with self._autocast():
                loss, metrics = self._losses(mb, alpha, members, update_actor)
            self.critic.step(loss)
        return metrics

    def _compute_losses(self, mb: Batch, alpha: torch.Tensor, members: torch.Tensor,
                        update_actor: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg, critic = self.cfg, self.critic
        z = critic.encode(mb["obs"])
        with torch.no_grad():
            # DrQ-v2 style: the online encoder (no grad) feeds both the next action and the target critics.
            z_next = critic.encode(mb["next_obs"])
            next_action, next_logp = self.actor(z_next, generator=self.generator)
            q_next = critic.target_value(z_next, next_action, members)
            if cfg.backup_entropy:
                q_next = q_next - alpha * next_logp.float()
            target = critic.td_target(mb, q_next)
        loss, q_data, metrics = critic.loss(z, mb["action"], target)
        if update_actor:
            zd = z.detach()  # actor gradients are stopped into the shared encoder (SERL/DrQ)
            action, logp = self.actor(zd, generator=self.generator)
            logp = logp.float()
            q_pi = critic.values(zd, action, detach_params=True).mean(0)
            actor_loss = (alpha * logp - q_pi).mean()
            if cfg.bc_weight > 0:
                mean_action, _ = self.actor(zd, deterministic=True)
                bc_loss, bc_rows, _ = bc_term(mean_action.float(), mb, q_data.mean(0), q_pi.detach(), cfg.bc_q_filter)
                actor_loss = actor_loss + cfg.bc_weight * bc_loss
                metrics.update(bc_loss=bc_loss.detach(), bc_rows=bc_rows)
            entropy = -logp.detach().mean()
            temperature_loss = self.log_alpha.exp() * (entropy - self.target_entropy)
            loss = loss + actor_loss + temperature_loss
            metrics.update(actor_loss=actor_loss.detach(), entropy=entropy)
        return loss, metrics

    def _autocast(self):
        if not self.cfg.bf16:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    # ------------------------------------------------------------ state / io
    def deterministic_module(self) -> torch.nn.Module:
        """The deterministic action as one module of ``obs -> action`` (for export: robot_rl.deploy)."""
        parts = copy.deepcopy((self.encoder, self.actor.net))  # the agent's own modules stay where they are
        return EncodedPolicy(*parts, self.action_dim).float().cpu().eval()

    def policy_state(self) -> dict[str, torch.Tensor]:
        """What an actor needs to act: actor and the shared encoder, as flat CPU tensors."""
        out = {f"actor.{k}": v for k, v in self.actor.state_dict().items()}
        out.update({f"encoder.{k}": v for k, v in self.encoder.state_dict().items()})
        return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in out.items()}

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        actor = {k[6:]: v for k, v in state.items() if k.startswith("actor.")}
        encoder = {k[8:]: v for k, v in state.items() if k.startswith("encoder.")}
        self.actor.load_state_dict(actor)
        self.encoder.load_state_dict(encoder)

    def save_policy(self, path: str | Path) -> None:
        save_file(self.policy_state(), str(path))

    def load_policy(self, path: str | Path) -> None:
        self.load_policy_state(load_file(str(path)))

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume learning exactly: networks, targets, alpha, optimizer, RNG, counters."""
        return {"actor": self.actor.state_dict(), **self.critic.state_dict(),
                "log_alpha": self.log_alpha.detach().clone(), "generator": self.generator.get_state(),
                "update_step": self.update_step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.critic.load_state_dict(state)
        self.generator.set_state(state["generator"])
        self.update_step = int(state["update_step"])
