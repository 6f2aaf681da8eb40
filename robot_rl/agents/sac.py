"""SAC with the RLPD recipe. Usable on its own: no process, transport or replay is needed to act or update.

One ``update`` call takes a ``[utd, batch]`` sample and performs ``utd`` critic steps (robot_rl.agents.critic: the
encoder, the critic ensemble and its subset-min target); the last step also updates the actor and the temperature in
the same backward pass (critic, actor and temperature losses touch disjoint parameters, so summing them and stepping
one optimizer, the critic's with the actor's and temperature's groups added, is exact).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from robot_rl.agents.base import Batch, index_tree, keep_global_rng, obs_batch, to_torch
from robot_rl.agents.bc_loss import bc_term
from robot_rl.agents.config import SACConfig
from robot_rl.agents.manual_grad import ManualSACStep, supports
from robot_rl.agents.networks import EncodedPolicy, TanhGaussianActor, init_parameters
from robot_rl.agents.off_policy import ActorCriticAgent, Metrics
from robot_rl.spaces import ObsSpec

__all__ = ["Batch", "SACAgent", "index_tree", "to_torch"]


class SACAgent(ActorCriticAgent):
    """Soft actor-critic agent (RLPD defaults). See :class:`SACConfig` for every knob.

    ``seed`` draws the initial weights and the update's randomness (critic subsets, augmentation, policy noise);
    acting draws from a generator of its own (:meth:`act`), so an actor's exploration depends only on its seed.
    """

    name: ClassVar[str] = "sac"
    config_class: ClassVar[type[SACConfig]] = SACConfig
    exportable: ClassVar[bool] = True
    cfg: SACConfig

    def build(self, obs_spec: ObsSpec, init: torch.Generator) -> None:
        super().build(obs_spec, init)
        cfg = self.cfg
        if cfg.compile:
            self._losses = torch.compile(self.losses)
        # the hand-derived CPU path (manual_grad.py): the same maths as losses(), kept equal to it by tests
        manual = cfg.manual_grad if cfg.manual_grad is not None else self.device.type == "cpu"
        self._manual = ManualSACStep(self) if manual and not cfg.compile and supports(self) else None
        self.critic_warmup_left = cfg.critic_warmup_updates

    def make_actor(self, init: torch.Generator) -> torch.nn.Module:
        with keep_global_rng():
            actor = TanhGaussianActor(self.encoder.out_dim, self.action_dim, self.cfg.hidden_dims,
                                      layer_norm=self.cfg.actor_layer_norm)
        init_parameters(actor, init)
        return actor

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: Mapping[str, Any], deterministic: bool = False) -> np.ndarray:
        """Action(s) in [-1, 1] for one observation (``state [D]``) or a batch (``state [N, D]``)."""
        tobs, single = obs_batch(self.critic.seen(obs), self.device)  # no copy of frames the agent does not read
        with self.autocast():
            action, _ = self.actor(self.encoder(tobs), deterministic, self.act_generator)
        action = action.float().cpu().numpy()
        return action[0] if single else action

    # ---------------------------------------------------------------- learning
    def actor_trains(self) -> bool:
        """After the critic warm-up (``critic_warmup_updates``)."""
        return self.critic_warmup_left <= 0

    def after_update(self) -> dict[str, float]:
        out = {**super().after_update(), "alpha": self.alpha}
        if self.critic_warmup_left > 0:
            self.critic_warmup_left -= 1
            out["critic_warmup_left"] = float(self.critic_warmup_left)
        return out

    def initialised_from_another_run(self) -> None:
        """``init_from`` loaded another run's agent: its critic warm-up starts again (the critics meet a new env)."""
        self.critic_warmup_left = self.cfg.critic_warmup_updates

    def learned_state(self) -> dict[str, Any]:
        return {**super().learned_state(), "critic_warmup_left": self.critic_warmup_left}

    def load_learned_state(self, state: Mapping[str, Any]) -> None:
        super().load_learned_state(state)
        self.critic_warmup_left = int(state.get("critic_warmup_left", 0))  # (absent: saved before it existed)

    def train_step(self, mb: Batch, update_actor: bool) -> Metrics:
        if self._manual is None:
            return super().train_step(mb, update_actor)
        members = self.critic.members()
        metrics = self._manual.compute_grads(mb, self.log_alpha.detach().exp(), members, update_actor)
        self.critic.step_grads((0, 1, 2) if update_actor else (0,))
        return metrics

    def next_value(self, mb: Batch, members: torch.Tensor) -> torch.Tensor:
        # DrQ-v2 style: the online encoder (no grad) feeds both the next action and the target critics.
        z_next = self.features(mb, next_step=True)
        next_action, next_logp = self.actor(z_next, generator=self.generator)
        q_next = self.critic.target_value(z_next, next_action, members)
        if self.cfg.backup_entropy:
            q_next = q_next - self.log_alpha.detach().exp() * next_logp.float()
        return q_next

    def actor_loss(self, x: torch.Tensor, mb: Batch, q_data: torch.Tensor) -> tuple[torch.Tensor, Metrics]:
        """SAC's actor loss (``alpha log pi - Q``, the actor's gradient stopped at the shared encoder: SERL/DrQ), an
        optional behaviour-cloning term, and the temperature's loss."""
        cfg, metrics = self.cfg, {}
        action, logp = self.actor(x, generator=self.generator)
        logp = logp.float()
        q_pi = self.critic.values(x, action, detach_params=True).mean(0)
        actor_loss = (self.log_alpha.detach().exp() * logp - q_pi).mean()
        if cfg.bc_weight > 0:
            mean_action, _ = self.actor(x, deterministic=True)
            bc_loss, bc_rows, _ = bc_term(mean_action.float(), mb, q_data.mean(0), q_pi.detach(), cfg.bc_q_filter)
            actor_loss = actor_loss + cfg.bc_weight * bc_loss
            metrics.update(bc_loss=bc_loss.detach(), bc_rows=bc_rows)
        entropy = -logp.detach().mean()
        metrics.update(actor_loss=actor_loss.detach(), entropy=entropy)
        return actor_loss + self.temperature_loss(entropy), metrics

    def autocast(self) -> AbstractContextManager:
        """bfloat16 autocast with ``bf16``."""
        if not self.cfg.bf16:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    # ------------------------------------------------------------ state / io
    def deterministic_module(self) -> torch.nn.Module:
        """The deterministic action as one module of ``obs -> action`` (for export: robot_rl.deploy)."""
        parts = copy.deepcopy((self.encoder, self.actor.net))  # the agent's own modules stay where they are
        return EncodedPolicy(*parts, self.action_dim).float().cpu().eval()

    def save_policy(self, path: str | Path) -> None:
        save_file(self.policy_state(), str(path))

    def load_policy(self, path: str | Path) -> None:
        self.load_policy_state(load_file(str(path)))
