"""Critic-guided fine-tuning of a base policy's weights (``agent.name: critic_guided``; PA-RL / ConRFT style).

The base is a local small VLA (robot_rl.policies.vla_policy), passed in when the agent is built (``base=``: a run
loads ``base_policy.path``, robot_rl.training.agents.build_agent); this module reads it through
:class:`FineTunableBase` only. The actor executes its chunks as for any base-policy agent and this
agent passes the proposal through (plus small fixed exploration noise); what learns is the base itself:

* a critic ensemble (robot_rl.agents.critic: LayerNorm MLPs, RLPD's subset-min target, n-step returns) learns Q of
  the executed action from the state, the instruction and the step's phase in its chunk. Its target bootstraps from
  the proposal the base made at the next step when it was collected (an evaluation of the collecting policy:
  recomputing the VLA's decode for every target at UTD 20 would cost a full VLA pass per critic step);
* every ``improve_every`` updates, after a critic-only warm-up, it draws ``improve_batch`` observations with their
  camera frames, samples ``num_samples`` chunks per observation from the base (the zero-noise decode among them)
  and lets the critics pick the chunk whose first action they value most (best-of-K, as PA-RL's global step):
  half of the ensemble picks, the other half verifies the pick's gain over the decode (``pick_pessimism``), and
  where it is not clearly positive the decode stays. Without the check the best of K noisy values beats the
  decode almost always and the base drifts towards the critics' noise.
  Every step of the decode that is not a verified pick or a demo's action is held at the original base's decode
  (``anchor_weight``), or with ``anchor_tau`` at an exponential average of the fine-tuned base: without the
  anchor, any update of the head (its own loss on its own decode included) drifts the deterministic decode, and
  the robot's success with it.
  The base's deterministic decode, what the robot executes, is then pulled onto the pick's first action by
  gradient through the decode (a consistency-style objective), and the base's own objective (flow matching
  and/or L1, robot_rl.policies.vla_model) on the picked chunks moves its sampling distribution along (weighted low);
  demo and intervention rows pull towards their stored action (``bc_weight``; with ``demo_filter`` a demo row
  only where the critics verify that its action beats the decode, as a pick is verified). Only the first action
  of a chunk is scored, so pair this agent with short executed chunks (``execution.execute_steps``: 1-2 re-plans
  each step or two, and every executed action is one the critics scored).

The base's weights travel to the actors with the agent's policy state (``base.*``); an actor loads them into the
base its executors run (``VLAPolicy.load_weights``), so the robot executes the fine-tuned base. The base is
trained without dropout (the training mode's dropout would draw from torch's global RNG; resume is exact).
Memory: the base's parameters, gradients and AdamW moments and a copy of the original base (the anchor),
5x its size in float32 (about 43 MB for the 2.15 M parameter benchmark VLA), plus one ``improve_batch`` x
``num_samples`` decode.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import torch
from torch import nn

from robot_rl.agents.base import to_torch
from robot_rl.agents.critic_guided_config import CriticGuidedConfig
from robot_rl.agents.networks import phase_one_hot
from robot_rl.agents.off_policy import OffPolicyAgent
from robot_rl.agents.torch_compat import foreach_lerp_
from robot_rl.replay.rows import SOURCE_CODE
from robot_rl.spaces import ObsSpec

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer


class FineTunableBase(Protocol):
    """What critic-guided fine-tuning needs of a base policy (robot_rl.policies.vla_policy.VLAPolicy has it)."""

    model: nn.Module
    """``encode(images, state, text) -> context``, ``decode(context, noise=None) -> chunks [B, H, A]``,
    ``loss(context, chunks, weight, generator=) -> (loss, parts)``, ``cfg.chunk_length``, ``cfg.action_dim``."""
    info: dict[str, Any]

    def batch_inputs(self, obs: Mapping[str, torch.Tensor]) -> tuple[Any, ...]: ...

    def trainable_parameters(self, trunk: bool) -> list[nn.Parameter]: ...

    def misfit(self, obs_spec: ObsSpec, action_dim: int) -> str: ...

    def load_weights(self, state: Mapping[str, torch.Tensor]) -> None: ...

    def save(self, folder: str) -> Any: ...


class CriticGuidedAgent(OffPolicyAgent):
    """See the module docstring and :class:`CriticGuidedConfig`."""

    name: ClassVar[str] = "critic_guided"
    config_class: ClassVar[type[CriticGuidedConfig]] = CriticGuidedConfig
    uses_base: ClassVar[bool] = True
    trains_base: ClassVar[bool] = True
    cfg: CriticGuidedConfig

    def __init__(self, obs_spec: ObsSpec, action_dim: int, cfg: CriticGuidedConfig | None = None, seed: int = 0, *,
                 base: FineTunableBase | None = None) -> None:
        if base is None:
            raise ValueError("agent critic_guided fine-tunes a base policy's weights: build it with base=<the loaded "
                             "base> (a run loads base_policy.path: robot_rl.training.agents.build_agent)")
        self.base = base
        super().__init__(obs_spec, action_dim, cfg, seed)

    def build(self, obs_spec: ObsSpec, init: torch.Generator) -> None:
        cfg = self.cfg
        misfit = self.base.misfit(obs_spec, self.action_dim)
        if misfit:
            raise ValueError(f"agent critic_guided: {misfit}")
        self.base.model.requires_grad_(False)
        # what the decode is held at wherever the critics verified no gain: the original base (never trained), or
        # with anchor_tau an exponential average of the fine-tuned one
        self.reference = copy.deepcopy(self.base.model).eval()
        for p in self.base.trainable_parameters(cfg.train_trunk):
            p.requires_grad_(True)
        super().build(obs_spec, init)  # the critics read the encoder's latent and the step's phase in its chunk
        fused = self.device.type in ("cpu", "cuda")
        self.base_optimizer = torch.optim.AdamW(self.base.trainable_parameters(cfg.train_trunk), lr=cfg.base_lr,
                                                weight_decay=0.0, fused=fused)
        self._replay: ReplayBuffer | None = None
        self.improve_step = 0
        self._last_improve: dict[str, float] = {}

    def critic_extra_dim(self) -> int:
        return self.cfg.chunk_phases

    # ---------------------------------------------------------------- contract
    @classmethod
    def check_spaces(cls, obs_spec: ObsSpec, action_dim: int, cfg: CriticGuidedConfig) -> None:
        if not cfg.base_path or cfg.base_path.startswith(("ws://", "wss://", "lerobot:")):
            raise ValueError("agent critic_guided trains the base's weights: base_policy.path (or agent.base_path) "
                             f"must be a saved robot_rl VLA folder, got {cfg.base_path!r}")

    def prepare(self, replay: ReplayBuffer) -> None:
        """Fits the critics' state standardisation once; keeps the replay to draw improvement batches with frames."""
        self._replay = replay
        super().prepare(replay)

    def base_policy(self) -> FineTunableBase:
        """The base being fine-tuned (evaluation acts with it)."""
        return self.base

    def base_weights(self) -> dict[str, torch.Tensor]:
        """The base's current weights (what an actor loads into the base its executors run)."""
        return dict(self.base.model.state_dict())

    # ------------------------------------------------------------------ acting
    def _features(self, z: torch.Tensor, chunk_index: torch.Tensor) -> torch.Tensor:
        if not self.cfg.chunk_phases:
            return z
        return torch.cat([z, phase_one_hot(chunk_index, self.cfg.chunk_phases)], dim=-1)

    @torch.no_grad()
    def act(self, obs: Mapping[str, Any], deterministic: bool = False) -> np.ndarray:
        """The base's proposal (``base_action``), with exploration noise unless ``deterministic``."""
        if "base_action" not in obs:
            raise ValueError("agent 'critic_guided' acts with the base policy's proposal: set base_policy.path")
        base = np.asarray(obs["base_action"], np.float32)
        if deterministic or self.cfg.exploration_std == 0:
            return base
        noise = torch.randn(base.shape, generator=self.act_generator, device=self.device).cpu().numpy()
        return np.clip(base + self.cfg.exploration_std * noise, -1.0, 1.0).astype(np.float32)

    # ---------------------------------------------------------------- learning
    def check_batch(self, batch: Mapping[str, Any]) -> Mapping[str, Any]:
        if "base_action" not in batch:
            raise ValueError("agent 'critic_guided' needs 'base_action' in replay samples (ReplayBuffer.with_base)")
        return super().check_batch(batch)

    def actor_trains(self) -> bool:
        """No actor: the base learns in the improvement steps (after_update)."""
        return False

    def features(self, mb: Mapping[str, Any], next_step: bool = False) -> torch.Tensor:
        pre = "next_" if next_step else ""
        return self._features(self.critic.encode(mb[pre + "obs"]), mb[pre + "chunk_index"])

    def next_value(self, mb: Mapping[str, Any], members: torch.Tensor) -> torch.Tensor:
        """The target critics at the base's proposal at the next step, collected with it (with target smoothing
        noise)."""
        x_next = self.features(mb, next_step=True)
        noise = torch.randn(mb["action"].shape, device=self.device, generator=self.generator)
        next_action = (mb["next_base_action"].float() + self.cfg.target_noise_std * noise).clamp(-1.0, 1.0)
        return self.critic.target_value(x_next, next_action, members)

    def after_update(self) -> dict[str, float]:
        """Every ``improve_every`` updates past the warm-up, one improvement step of the base. The last
        improvement's metrics ride along with every update, so a logger that samples one update's metrics sees them
        although only every improve_every-th update makes them."""
        past = self.update_step - self.cfg.critic_warmup_updates
        if past >= 0 and past % self.cfg.improve_every == 0 and self._replay is not None:
            self._last_improve = {k: float(v) for k, v in self._improve().items()}
        return {**super().after_update(), **self._last_improve}

    def pick(self, q_members: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[members, B, K] critic values of K sampled chunks (sample 0: the decode) -> (the sample each observation
        moves to [B], its verified gain over the decode [B]).

        The maximum of K noisy estimates beats the decode almost always (the winner's curse), so selection and
        verification use disjoint halves of the ensemble, drawn at random each step (as double Q-learning
        decouples them): one half picks the best sample, the other measures its gain over the decode member by
        member, and the pick replaces the decode only where that gain's mean less ``pick_pessimism`` standard
        deviations is positive. Elsewhere the decode stays (no pull)."""
        m = q_members.shape[0]
        order = torch.randperm(m, device=q_members.device, generator=self.generator)
        select, verify = (q_members[order[: m // 2]], q_members[order[m // 2:]]) if m > 1 else (q_members, q_members)
        best = select.mean(0).argmax(1)
        gain = verify.gather(2, best.view(1, -1, 1).expand(verify.shape[0], -1, 1)).squeeze(2) - verify[:, :, 0]
        moved = (best != 0) & self.verified(gain)
        return torch.where(moved, best, torch.zeros_like(best)), torch.where(moved, gain.mean(0), 0.0)

    def base_lr(self) -> float:
        """The base's learning rate at the next improvement step (``base_lr_decay_steps``; from the step count, so a
        resumed run continues the schedule)."""
        cfg = self.cfg
        if not cfg.base_lr_decay_steps:
            return cfg.base_lr
        return cfg.base_lr * max(0.0, 1.0 - self.improve_step / cfg.base_lr_decay_steps)

    def verified(self, gain: torch.Tensor) -> torch.Tensor:
        """[members, B] gains of a candidate over the decode, member by member -> where their mean less
        ``pick_pessimism`` standard deviations is positive [B]."""
        bound = gain.mean(0)
        return (bound - self.cfg.pick_pessimism * gain.std(0) if gain.shape[0] > 1 else bound) > 0

    def _improve(self) -> dict[str, torch.Tensor]:
        """One step of the base towards the chunks the critics pick among its own samples (see the module doc)."""
        cfg, model = self.cfg, self.base.model
        lr = self.base_lr()
        if lr <= 0.0:  # the schedule has ended: the base stays as it is
            self.improve_step += 1
            return {"base_lr": torch.tensor(0.0)}
        for group in self.base_optimizer.param_groups:
            group["lr"] = lr
        sample = self._replay.sample(cfg.improve_batch, pixels=True)
        obs = to_torch(sample["obs"], self.device)
        inputs = self.base.batch_inputs(obs)
        b, k, h, a = obs["state"].shape[0], cfg.num_samples, model.cfg.chunk_length, model.cfg.action_dim
        model.eval()  # no dropout: its draws would come from the global RNG
        with torch.no_grad():
            context = model.encode(*inputs)  # (re-encoded with gradients below when the trunk trains too)
            noise = cfg.noise_std * torch.randn((b, k, h, a), device=self.device, generator=self.generator)
            noise[:, 0] = 0.0  # the deterministic decode competes too
            chunks = model.decode(context.repeat_interleave(k, 0), noise.view(b * k, h, a)).clamp(-1.0, 1.0)
            chunks = chunks.view(b, k, h, a)
            z = self._features(self.encoder(self.critic.seen(obs)), torch.zeros(b, device=self.device))
            members = self.critic.values(z.repeat_interleave(k, 0), chunks[:, :, 0].reshape(b * k, a))
            best, gain = self.pick(members.view(-1, b, k))
            target = chunks[torch.arange(b, device=self.device), best].clone()
            stored = to_torch(sample["action"], self.device).float()
            demo = to_torch(sample["source"], self.device) == SOURCE_CODE["demo"]
            rows = demo.sum()
            if cfg.demo_filter:  # a demo's action is followed only where the critics verify it beats the decode
                demo &= self.verified(self.critic.values(z, stored) - members.view(-1, b, k)[:, :, 0])
            prior = demo | (to_torch(sample["intervened"], self.device) > 0)
            target[prior, 0] = stored[prior]
            weight = torch.ones(b, h, device=self.device)
            weight[prior] = cfg.bc_weight
            # where the decode is held at the original base's: every step but the first of a pick or a demo row
            held = torch.ones(b, h, device=self.device)
            held[(best != 0) | prior, 0] = 0.0
            reference = None if not cfg.anchor_weight else \
                self.reference.decode(self.reference.encode(*inputs) if cfg.train_trunk else context)
        context = model.encode(*inputs) if cfg.train_trunk else context
        # The deterministic decode (what the robot executes) is pulled onto the picks' first action, through the
        # decode's steps: the critics scored that action only, and pulling the picks' later steps (other samples'
        # noise) drags the shared head away. The base's own loss on the whole picked chunks, weighted low, moves
        # its sampling distribution with it.
        flow_loss, parts = model.loss(context, target, weight, generator=self.generator)
        decoded = model.decode(context)
        moves = weight[:, 0] * (1.0 - held[:, 0])
        pull = (((decoded[:, 0] - target[:, 0]) ** 2) * moves[:, None]).sum() / (moves.sum().clamp_min(1.0) * a)
        anchor = decoded.new_zeros(()) if reference is None else \
            (((decoded - reference) ** 2) * held[..., None]).sum() / (held.sum().clamp_min(1.0) * a)
        loss = cfg.sample_weight * flow_loss + cfg.decode_weight * pull + cfg.anchor_weight * anchor
        parts["loss/decode"] = float(pull.detach())
        parts["loss/anchor"] = float(anchor.detach())
        self.base_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.base_optimizer.param_groups[0]["params"], cfg.base_grad_clip)
        self.base_optimizer.step()
        if cfg.anchor_tau:
            with torch.no_grad():
                foreach_lerp_(list(self.reference.parameters()), list(model.parameters()), cfg.anchor_tau)
        self.improve_step += 1
        return {"base_loss": loss.detach(), "base_grad_norm": grad_norm.detach(), "base_lr": torch.tensor(lr),
                "q_gain": gain.mean(), "kept_decode": (best == 0).float().mean(),
                "demos_followed": demo.sum() / rows.clamp_min(1),
                **{f"base_{k.split('/')[-1]}": torch.tensor(v) for k, v in parts.items()}}

    # ------------------------------------------------------------ state / io
    def policy_state(self) -> dict[str, torch.Tensor]:
        """What an actor needs: the base's weights (and the improvement count)."""
        out = {f"base.{k}": v.detach().to("cpu", copy=True).contiguous() for k, v in self.base_weights().items()}
        out["improve_step"] = torch.tensor([self.improve_step], dtype=torch.int64)
        return out

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        self.base.load_weights({k[5:]: v for k, v in state.items() if k.startswith("base.")})
        self.improve_step = int(state["improve_step"][0])

    def learned_state(self) -> dict[str, Any]:
        return {"base": self.base.model.state_dict(), "base_optimizer": self.base_optimizer.state_dict(),
                **super().learned_state(), "reference": self.reference.state_dict(), "improve_step": self.improve_step}

    def load_learned_state(self, state: Mapping[str, Any]) -> None:
        self.base.load_weights(state["base"])
        self.base_optimizer.load_state_dict(state["base_optimizer"])
        super().load_learned_state(state)
        if "reference" in state:  # (a checkpoint without it anchors at the original base, as it did)
            self.reference.load_state_dict(state["reference"])
        self.improve_step = int(state["improve_step"])

    def save_base(self, folder: str) -> str:
        """Writes the fine-tuned base as a saved policy (servable, evaluable, distillable like any other)."""
        self.base.info = {**self.base.info, "fine_tuned": {"from": self.cfg.base_path, "agent": self.name,
                                                           "improve_steps": self.improve_step}}
        return str(self.base.save(folder))
