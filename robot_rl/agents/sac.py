"""SAC with the RLPD recipe. Usable on its own: no process, transport or replay is needed to act or update.

One ``update`` call takes a ``[utd, batch]`` sample and performs ``utd`` critic steps; the last step also
updates the actor and the temperature in the same backward pass (critic, actor and temperature losses touch
disjoint parameters, so summing them and stepping one optimizer is exact).
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
from robot_rl.agents.encoders import ObservationEncoder
from robot_rl.agents.fused_adam import FusedAdamStep
from robot_rl.agents.hl_gauss import HLGauss
from robot_rl.agents.manual_grad import ManualSACStep, supports
from robot_rl.agents.networks import EncodedPolicy, EnsembleCritic, TanhGaussianActor, init_parameters
from robot_rl.agents.torch_compat import foreach_lerp_
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

    def __init__(self, obs_spec: ObsSpec, action_dim: int, cfg: SACConfig | None = None, seed: int = 0) -> None:
        self.cfg = cfg = cfg or SACConfig()
        cfg.validate()
        self.check_spaces(obs_spec, action_dim, cfg)
        # what the agent reads (export takes the same): without use_cameras, the state and instruction only
        self.obs_spec = obs_spec if cfg.use_cameras else ObsSpec(obs_spec.state_dim, {}, obs_spec.instruction_dim)
        obs_spec = self.obs_spec
        self.action_dim = action_dim
        self.device = torch.device(cfg.device)
        init = seeded_generator(seed)
        out = cfg.hl_gauss_bins if cfg.hl_gauss else 1
        with keep_global_rng():
            self.encoder = ObservationEncoder(obs_spec, cfg.encoder, generator=init).to(self.device)
            z = self.encoder.out_dim
            self.critic = EnsembleCritic(cfg.num_critics, z + action_dim, cfg.hidden_dims, out, cfg.critic_layer_norm)
            self.actor = TanhGaussianActor(z, action_dim, cfg.hidden_dims, layer_norm=cfg.actor_layer_norm)
        init_parameters(self.critic, init)
        init_parameters(self.actor, init)
        self.critic, self.actor = self.critic.to(self.device), self.actor.to(self.device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(float(np.log(cfg.init_temperature)), device=self.device, requires_grad=True)
        self.target_entropy = cfg.target_entropy if cfg.target_entropy is not None else -action_dim / 2
        self.hl = (HLGauss(*cfg.hl_gauss_range, cfg.hl_gauss_bins, cfg.hl_gauss_sigma_ratio).to(self.device)
                   if cfg.hl_gauss else None)
        if self.encoder.has_pixels:
            self.encoder.to(memory_format=torch.channels_last)
        critic_params = list(self.critic.parameters()) + [p for p in self.encoder.parameters() if p.requires_grad]
        fused = self.device.type in ("cpu", "cuda")
        self.optimizer = torch.optim.Adam([
            {"params": critic_params, "lr": cfg.critic_lr, "name": "critic"},
            {"params": list(self.actor.parameters()), "lr": cfg.actor_lr, "name": "actor"},
            {"params": [self.log_alpha], "lr": cfg.temperature_lr, "name": "temperature"},
        ], fused=fused)
        self._online_targets = list(self.critic.parameters())
        self._target_params = list(self.target_critic.parameters())
        self.generator = seeded_generator(seed + 1, self.device)
        self.act_generator = seeded_generator(seed + 2, self.device)
        self.update_step = 0
        self.critic_step = 0
        self._losses = torch.compile(self._compute_losses) if cfg.compile else self._compute_losses
        manual = cfg.manual_grad if cfg.manual_grad is not None else self.device.type == "cpu"
        self._manual = ManualSACStep(self) if manual and not cfg.compile and supports(self) else None
        self._adam = FusedAdamStep(self.optimizer)

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
        return Sampling(batch_size=cfg.batch_size, utd=cfg.utd, pixels=cfg.use_cameras)

    def prepare(self, replay: ReplayBuffer) -> None:
        """Before the first update: fit the state standardisation on everything in the replay (demos and warm-up
        data); it is then frozen (and restored from checkpoints, never refitted)."""
        if not self.cfg.encoder.normalize_state or self.encoder.normalizer_fitted:
            return
        self.encoder.fit_state_normalizer(replay.valid_states())

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: Mapping[str, Any], deterministic: bool = False) -> np.ndarray:
        """Action(s) in [-1, 1] for one observation (``state [D]``) or a batch (``state [N, D]``)."""
        if not self.cfg.use_cameras:  # no copy of frames the agent does not read
            obs = {k: v for k, v in obs.items() if k != "pixels"}
        tobs, single = obs_batch(obs, self.device)
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
        members = torch.randperm(self.cfg.num_critics, device=self.device,
                                 generator=self.generator)[: self.cfg.num_min_critics]
        alpha = self.log_alpha.detach().exp()
        if self._manual is not None:
            metrics = self._manual.compute_grads(mb, alpha, members, update_actor)
            self._adam.step((0, 1, 2) if update_actor else (0,))
        else:
            with self._autocast():
                loss, metrics = self._losses(mb, alpha, members, update_actor)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        with torch.no_grad():
            foreach_lerp_(self._target_params, self._online_targets, self.cfg.tau)
        self.critic_step += 1
        return metrics

    def _q_scalar(self, out: torch.Tensor) -> torch.Tensor:
        """Critic output ``[E, B, 1 | bins]`` -> Q values ``[E, B]``."""
        return self.hl.to_scalar(out) if self.hl is not None else out.squeeze(-1).float()

    def _compute_losses(self, mb: Batch, alpha: torch.Tensor, members: torch.Tensor,
                        update_actor: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.cfg
        augment = self.encoder.has_pixels and cfg.encoder.augment_pad > 0
        z = self.encoder(mb["obs"], augment, self.generator)
        with torch.no_grad():
            # DrQ-v2 style: the online encoder (no grad) feeds both the next action and the target critics.
            z_next = self.encoder(mb["next_obs"], augment, self.generator)
            next_action, next_logp = self.actor(z_next, generator=self.generator)
            q_next = self._q_scalar(self.target_critic(z_next, next_action, members=members)).min(0).values
            if cfg.backup_entropy:
                q_next = q_next - alpha * next_logp.float()
            not_done = 1.0 - mb["terminated"].float()
            target = mb["reward"].float() + cfg.discount * not_done * q_next
        critic_out = self.critic(z, mb["action"])
        if self.hl is not None:
            critic_loss = self.hl.loss(critic_out, target)
        else:
            critic_loss = (critic_out.squeeze(-1).float() - target).pow(2).mean()
        metrics = {"critic_loss": critic_loss.detach(), "q_mean": self._q_scalar(critic_out.detach()).mean()}
        loss = critic_loss
        if update_actor:
            zd = z.detach()  # actor gradients are stopped into the shared encoder (SERL/DrQ)
            action, logp = self.actor(zd, generator=self.generator)
            logp = logp.float()
            q_pi = self._q_scalar(self.critic(zd, action, detach_params=True)).mean(0)
            actor_loss = (alpha * logp - q_pi).mean()
            if cfg.bc_weight > 0:
                mean_action, _ = self.actor(zd, deterministic=True)
                q_data = self._q_scalar(critic_out.detach()).mean(0)
                bc_loss, bc_rows, _ = bc_term(mean_action.float(), mb, q_data, q_pi.detach(), cfg.bc_q_filter)
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
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "target_critic": self.target_critic.state_dict(),
            "encoder": self.encoder.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "update_step": self.update_step,
            "critic_step": self.critic_step,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.target_critic.load_state_dict(state["target_critic"])
        self.encoder.load_state_dict(state["encoder"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.update_step = int(state["update_step"])
        self.critic_step = int(state["critic_step"])
