"""The skeleton every learning agent here shares, written once: each agent supplies only what makes it different.

Three layers, mirroring the configs (AgentConfig -> CriticConfig -> ActorCriticConfig):

* :class:`GradientAgent` (bc): the constructor preamble (config checked, spaces checked, the seeded generators),
  the update loop (one ``train_step`` per UTD slice of a ``[utd, B, ...]`` sample), the update counter, the metrics
  and the state-dict plumbing (generator and counter; the policy state as prefixed modules). An agent supplies
  ``build`` (its networks), ``train_step`` (one gradient step) and ``learned_state``.
* :class:`OffPolicyAgent` (critic_guided): adds the critic ensemble (robot_rl.agents.critic) and its one critic
  step. An agent supplies the critics' input (``features``) and the value its target bootstraps from
  (``next_value``).
* :class:`ActorCriticAgent` (sac, wsrl, residual, ibrl): adds the actor, the entropy temperature and the actor's
  term in the same backward pass as the critics'. An agent supplies ``make_actor`` and ``actor_loss``.

A new algorithm is one file: a config and a class overriding those hooks (robot_rl/agents/wsrl.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from robot_rl.agents.base import AgentConfig, Batch, Sampling, index_tree, seeded_generator, utd_batch
from robot_rl.agents.config import ActorCriticConfig, CriticConfig
from robot_rl.agents.critic import Critic, seen_spec
from robot_rl.agents.encoder_pretraining import EncoderPretraining
from robot_rl.spaces import ObsSpec

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer

Metrics = dict[str, torch.Tensor]


class GradientAgent:
    """An agent that learns by gradient steps on replay samples. Subclasses set ``name`` and ``config_class`` and
    implement :meth:`build`, :meth:`train_step`, :meth:`learned_state` / :meth:`load_learned_state`, ``act``,
    ``sampling`` and ``check_spaces``.

    ``seed`` draws the initial weights (``build``'s ``init``) and the updates' randomness (``self.generator``);
    acting draws from ``self.act_generator``, so an actor's exploration depends only on its seed.
    """

    name: ClassVar[str]
    config_class: ClassVar[type[AgentConfig]]

    def __init__(self, obs_spec: ObsSpec, action_dim: int, cfg: AgentConfig | None = None, seed: int = 0) -> None:
        self.cfg = cfg = cfg or self.config_class()
        cfg.validate()
        self.check_spaces(obs_spec, action_dim, cfg)
        self.obs_spec, self.action_dim = obs_spec, action_dim
        self.device = torch.device(cfg.device)
        self.generator = seeded_generator(seed + 1, self.device)
        self.act_generator = seeded_generator(seed + 2, self.device)
        self.update_step = 0
        self.build(obs_spec, seeded_generator(seed))

    # ------------------------------------------------------------------ hooks
    @classmethod
    def check_spaces(cls, obs_spec: ObsSpec, action_dim: int, cfg: Any) -> None:
        """Raises ValueError for spaces the agent cannot handle (here: it needs a continuous action)."""
        if action_dim < 1:
            raise ValueError(f"agent {cls.name} needs a continuous action of at least 1 dimension, got {action_dim}")

    def build(self, obs_spec: ObsSpec, init: torch.Generator) -> None:
        """Builds the networks and optimizers, drawing initial weights from ``init`` only."""

    def check_batch(self, batch: Batch) -> Batch:
        """The batch as the update reads it; ValueError for a batch the agent cannot learn from."""
        return batch

    def actor_trains(self) -> bool:
        """Whether this update's last step trains the actor (the policy) too."""
        return True

    def train_step(self, mb: Batch, update_actor: bool) -> Metrics:
        """One gradient step on one ``[B, ...]`` slice; its metrics as tensors."""
        raise NotImplementedError

    def after_update(self) -> dict[str, float]:
        """Counters after the update's steps; extra metrics (scalars) to report with the last step's."""
        self.update_step += 1
        return {}

    def policy_modules(self) -> dict[str, nn.Module]:
        """What an actor needs to act, by the prefix its tensors carry in the policy state."""
        return {}

    def learned_state(self) -> dict[str, Any]:
        """What training changed besides the generator and the counter (networks, optimizers, ...)."""
        return {}

    def load_learned_state(self, state: Mapping[str, Any]) -> None:
        """Restores :meth:`learned_state`."""

    # ----------------------------------------------------------------- the loop
    def update(self, batch: Batch) -> dict[str, float]:
        """``utd`` gradient steps on a ``[utd, B, ...]`` sample (a ``[B, ...]`` one is ``utd = 1``); the last may train
        the actor too. Returns the last step's metrics."""
        tb = utd_batch(self.check_batch(batch), self.device)
        utd = tb["action"].shape[0]
        train_actor = self.actor_trains()
        metrics: Metrics = {}
        for i in range(utd):
            metrics = self.train_step(index_tree(tb, i), update_actor=train_actor and i == utd - 1)
        out = {k: float(v) for k, v in metrics.items()}
        out.update(self.after_update())
        return out

    # ------------------------------------------------------------ state / io
    def policy_state(self) -> dict[str, torch.Tensor]:
        """The policy modules' tensors as flat CPU tensors named ``<prefix>.<name>``."""
        return {f"{prefix}.{k}": v.detach().to("cpu", copy=True).contiguous()
                for prefix, module in self.policy_modules().items() for k, v in module.state_dict().items()}

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        for prefix, module in self.policy_modules().items():
            cut = len(prefix) + 1
            module.load_state_dict({k[cut:]: v for k, v in state.items() if k.startswith(prefix + ".")})

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume learning exactly."""
        return {**self.learned_state(), "generator": self.generator.get_state(), "update_step": self.update_step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.load_learned_state(state)
        self.generator.set_state(state["generator"])
        self.update_step = int(state["update_step"])


class OffPolicyAgent(GradientAgent):
    """A :class:`GradientAgent` with the critic ensemble. Its train step:

        x = features(mb)                                    # what the critics read of the observation
        target = td_target(mb, next_value(mb, members))     # r + gamma^k (1 - done) V(s'), no gradient
        loss = critic loss(critic_input(x), action, target) (+ actor_loss(x.detach(), mb, q) on an actor step)
        one optimizer step over everything, then the target's Polyak update
    """

    cfg: CriticConfig
    encoder_pretraining: EncoderPretraining | None = None  # encoder.pretrain_steps (built with the critic)

    @classmethod
    def check_spaces(cls, obs_spec: ObsSpec, action_dim: int, cfg: Any) -> None:
        """Any proprioception size and any cameras; at least one action dimension and something to read."""
        super().check_spaces(obs_spec, action_dim, cfg)
        if obs_spec.state_dim < 1 and not (cfg.use_cameras and obs_spec.cameras):
            raise ValueError(f"agent {cls.name} needs a state vector or at least one camera in the observation (and "
                             "use_cameras on)")

    @classmethod
    def sampling(cls, cfg: CriticConfig) -> Sampling:
        """``utd`` critic steps per update on a ``[utd, batch_size]`` sample in the replay's mix."""
        return cfg.critic_sampling()

    def build(self, obs_spec: ObsSpec, init: torch.Generator) -> None:
        self.critic = Critic(self.cfg, obs_spec, self.action_dim, self.critic_extra_dim(), init=init,
                             generator=self.generator, device=self.device)
        self.encoder = self.critic.encoder  # trained by the critics' loss; an actor reads its output (detached)
        enc = self.cfg.encoder
        self.encoder_pretraining = EncoderPretraining(
            self.encoder, self.action_dim, enc.pretrain_steps, self.cfg.batch_size, enc.pretrain_lr, self.generator,
            self.device, self.autocast) if enc.pretrain_steps > 0 and self.encoder.has_pixels else None
        self.obs_spec = seen_spec(obs_spec, self.cfg)  # what the agent reads (export takes the same)
        self._losses = self.losses

    def prepare(self, replay: ReplayBuffer) -> None:
        """Before the first update: fit the state standardisation on everything in the replay (demos and warm-up
        data); it is then frozen (and restored from checkpoints, never refitted). With ``encoder.pretrain_steps``,
        the next slice of the encoder's pre-training on the demos (robot_rl/agents/encoder_pretraining.py)."""
        self.critic.prepare(replay)
        if self.encoder_pretraining is not None:
            self.encoder_pretraining.run(replay)

    def update(self, batch: Batch) -> dict[str, float]:
        """Nothing while the encoder pre-trains (its progress as metrics); then the agent's update."""
        if self.encoder_pretraining is not None and not self.encoder_pretraining.finished:
            return self.encoder_pretraining.metrics()
        return super().update(batch)

    def check_batch(self, batch: Batch) -> Batch:
        self.critic.check_batch(batch, self.name)
        return {**batch, "obs": self.critic.seen(batch["obs"]), "next_obs": self.critic.seen(batch["next_obs"])}

    # ------------------------------------------------------------------ hooks
    def critic_extra_dim(self) -> int:
        """Features :meth:`features` appends to the encoder's latent (0: the critics read the latent alone)."""
        return 0

    def features(self, mb: Batch, next_step: bool = False) -> torch.Tensor:
        """What the critics (and an actor) read of the observation (``next_step``: of the next observation)."""
        return self.critic.encode(mb["next_obs" if next_step else "obs"])

    def critic_input(self, x: torch.Tensor) -> torch.Tensor:
        """The critics' part of the features (all of them here)."""
        return x

    def next_value(self, mb: Batch, members: torch.Tensor) -> torch.Tensor:
        """The value the target bootstraps from at the next observation (called without gradients)."""
        raise NotImplementedError

    def actor_loss(self, x: torch.Tensor, mb: Batch, q_data: torch.Tensor) -> tuple[torch.Tensor, Metrics]:
        """The loss terms an actor step adds to the critics' (``x``: the features, detached; ``q_data``: the critics'
        values of the batch's actions) and their metrics."""
        raise NotImplementedError

    def autocast(self) -> AbstractContextManager:
        """The context the losses are computed in (bf16 autocast where the agent has it)."""
        return nullcontext()

    # ------------------------------------------------------------------ the step
    def losses(self, mb: Batch, members: torch.Tensor, update_actor: bool) -> tuple[torch.Tensor, Metrics]:
        """The summed loss of one step and its metrics (the critics', plus the actor's on an actor step)."""
        critic = self.critic
        x = self.features(mb)
        with torch.no_grad():
            target = critic.td_target(mb, self.next_value(mb, members))
        loss, q_data, metrics = critic.loss(self.critic_input(x), mb["action"].float(), target)
        if update_actor:
            actor_loss, actor_metrics = self.actor_loss(x.detach(), mb, q_data)
            loss = loss + actor_loss
            metrics.update(actor_metrics)
        return loss, metrics

    def train_step(self, mb: Batch, update_actor: bool) -> Metrics:
        members = self.critic.members()
        with self.autocast():
            loss, metrics = self._losses(mb, members, update_actor)
        self.critic.step(loss)
        return metrics

    def learned_state(self) -> dict[str, Any]:
        out = self.critic.state_dict()
        if self.encoder_pretraining is not None:
            out["encoder_pretrain_steps"] = self.encoder_pretraining.done
        return out

    def load_learned_state(self, state: Mapping[str, Any]) -> None:
        self.critic.load_state_dict(state)
        if self.encoder_pretraining is not None:  # a checkpoint without the count was taken after RL updates
            self.encoder_pretraining.done = int(state.get("encoder_pretrain_steps", self.encoder_pretraining.steps))


class ActorCriticAgent(OffPolicyAgent):
    """An :class:`OffPolicyAgent` with an actor (``make_actor``) trained in the critics' backward pass (its parameter
    group joins the critics' optimizer: their losses touch disjoint parameters, so one step is exact) and SAC's
    entropy temperature ``log_alpha``, tuned towards ``target_entropy`` where :meth:`tunes_temperature`."""

    cfg: ActorCriticConfig

    def build(self, obs_spec: ObsSpec, init: torch.Generator) -> None:
        super().build(obs_spec, init)
        self.actor = self.make_actor(init).to(self.device)
        self.critic.add_param_group(self.actor.parameters(), self.cfg.actor_lr, "actor")
        self.log_alpha = torch.tensor(math.log(self.cfg.init_temperature), device=self.device, requires_grad=True)
        target = self.cfg.target_entropy
        self.target_entropy = target if target is not None else -self.action_dim / 2
        if self.tunes_temperature():
            self.critic.add_param_group([self.log_alpha], self.cfg.temperature_lr, "temperature")

    def make_actor(self, init: torch.Generator) -> nn.Module:
        """The actor, its initial weights drawn from ``init``."""
        raise NotImplementedError

    def tunes_temperature(self) -> bool:
        """Whether the actor is stochastic with a tuned entropy temperature."""
        return True

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def temperature_loss(self, entropy: torch.Tensor) -> torch.Tensor:
        """SAC's temperature loss at the batch's ``entropy`` (detached)."""
        return self.log_alpha.exp() * (entropy - self.target_entropy)

    def policy_modules(self) -> dict[str, nn.Module]:
        """The actor and the shared encoder."""
        return {"actor": self.actor, "encoder": self.encoder}

    def learned_state(self) -> dict[str, Any]:
        return {"actor": self.actor.state_dict(), **super().learned_state(),
                "log_alpha": self.log_alpha.detach().clone()}

    def load_learned_state(self, state: Mapping[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        super().load_learned_state(state)
        if "log_alpha" in state:  # (absent from residual checkpoints of deterministic agents made before it was saved)
            with torch.no_grad():
                self.log_alpha.copy_(state["log_alpha"])
