"""WSRL: warm-start RL (Zhou, Peng, Li, Levine, Kumar 2024, "Efficient Online Reinforcement Learning Fine-Tuning
Need Not Retain Offline Data").

Three phases, all inside the ordinary training loop:

1. **Pre-training** on the prior data (the run's ``demos``, or any dataset given there): SAC's losses plus a
   conservative term on the critics (CQL: Q of actions the data does not take pushed down, Q of the data's actions
   up), so the pre-trained critic does not overvalue actions it never saw. It runs in ``prepare``, at most
   ``pretrain_steps_per_call`` gradient steps per learner step, so the learner keeps beating and publishing while it
   pre-trains (the actors meanwhile wait at the update-lag bound, or step a little with the weights published so
   far).
2. **Warm-up**: the next ``warmup_updates`` learner steps train nothing; the actors collect online data with the
   pre-trained policy (WSRL's warm-up rollouts, which seed the online replay and avoid the dip that fine-tuning
   from an empty buffer shows).
3. **Online fine-tuning**: plain SAC/RLPD updates (high UTD, the LayerNorm ensemble) on the online data only: the
   prior data is not sampled again (``mix: {online: 1.0}``).

Select it with ``agent.name: wsrl`` (``robot_rl/configs/pickcube_wsrl.yaml``). Nothing outside this file knows it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from robot_rl.agents.base import Batch, Sampling, index_tree, to_torch
from robot_rl.agents.config import SACConfig
from robot_rl.agents.sac import SACAgent
from robot_rl.utils.log import get_logger

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer

log = get_logger(__name__)


@dataclass(frozen=True)
class WSRLConfig(SACConfig):
    """WSRL: SAC/RLPD fine-tuning after conservative pre-training on the prior data, without sampling it online."""

    name: str = "wsrl"
    """Which agent (``wsrl`` here; see AgentConfig)."""
    pretrain_steps: int = 1000
    """Gradient steps of pre-training on the prior data (demos) before the first online update."""
    pretrain_steps_per_call: int = 100
    """Pre-training steps per learner step (the learner keeps its heartbeat and publishes in between)."""
    pretrain_batch_size: int = 256
    """Transitions per pre-training step."""
    cql_weight: float = 1.0
    """Weight of the conservative term while pre-training (0: plain SAC on the prior data)."""
    cql_actions: int = 4
    """Uniform and policy actions per state in the conservative term's log-sum-exp."""
    cql_states: int = 64
    """States of each pre-training batch the conservative term reads (it evaluates ``2 * cql_actions`` actions at
    each: the term costs about as much as the rest of the step at the defaults)."""
    warmup_updates: int = 200
    """Learner steps after pre-training that train nothing: online data collected with the pre-trained policy."""

    def critic_sampling(self) -> Sampling:
        """Online only: the prior data is for pre-training, never sampled while fine-tuning."""
        base = super().critic_sampling()
        return Sampling(batch_size=base.batch_size, utd=base.utd, mix={"online": 1.0}, n_step=base.n_step,
                        discount=base.discount, pixels=base.pixels, needs=("prior",))

    def validate(self) -> None:
        super().validate()
        self.require([
            (self.pretrain_steps >= 0 and self.warmup_updates >= 0, "pretrain_steps and warmup_updates must be >= 0"),
            (self.pretrain_steps_per_call >= 1 and self.pretrain_batch_size >= 1,
             "pretrain_steps_per_call and pretrain_batch_size must be >= 1"),
            (self.cql_weight >= 0 and self.cql_actions >= 1 and self.cql_states >= 1,
             "cql_weight must be >= 0, cql_actions and cql_states >= 1"),
        ])


class WSRLAgent(SACAgent):
    """SAC whose ``prepare`` pre-trains on the prior data and whose first online updates are a warm-up."""

    name: ClassVar[str] = "wsrl"
    config_class: ClassVar[type[WSRLConfig]] = WSRLConfig
    cfg: WSRLConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pretrained_steps = 0
        self.warmup_left = self.cfg.warmup_updates

    @property
    def pretraining(self) -> bool:
        return self.pretrained_steps < self.cfg.pretrain_steps

    def prepare(self, replay: ReplayBuffer) -> None:
        """The state standardisation (SAC's), then the next pre-training steps on the prior data."""
        super().prepare(replay)
        if not self.pretraining:
            return
        cfg = self.cfg
        for _ in range(min(cfg.pretrain_steps_per_call, cfg.pretrain_steps - self.pretrained_steps)):
            sample = replay.sample(cfg.pretrain_batch_size, mix={"prior": 1.0})
            mb = to_torch(sample, self.device)
            loss, metrics = self.losses(mb, self.critic.members(), True)
            if cfg.cql_weight > 0:
                penalty = self._conservative(mb)
                loss = loss + cfg.cql_weight * penalty
            self.critic.step(loss)
            self.pretrained_steps += 1
        self._pretrain_metrics = {k: float(v) for k, v in metrics.items()}
        if cfg.cql_weight > 0:
            self._pretrain_metrics["cql_penalty"] = float(penalty.detach())
        if not self.pretraining:
            log.info("wsrl: pre-trained %d steps on the prior data (critic loss %.3g); %d warm-up steps follow",
                     self.pretrained_steps, self._pretrain_metrics["critic_loss"], self.warmup_left)

    def _conservative(self, mb: Batch) -> torch.Tensor:
        """CQL(H): ``logsumexp`` of Q over uniform and policy actions (importance-weighted) minus Q of the data's
        action, averaged over the critics and states."""
        n, critic, k = self.cfg.cql_actions, self.critic, self.cfg.cql_states
        z = critic.encode(index_tree(mb["obs"], slice(0, k)))
        data_action = mb["action"][:k]
        rows, dim = z.shape[0], self.action_dim
        zn = z.repeat_interleave(n, 0)
        uniform = torch.rand(rows * n, dim, device=self.device, generator=self.generator) * 2 - 1
        with torch.no_grad():
            policy, logp = self.actor(zn.detach(), generator=self.generator)
        q_uniform = critic.values(zn, uniform).reshape(-1, rows, n) + dim * math.log(2.0)  # - log(1 / 2^A)
        q_policy = critic.values(zn, policy).reshape(-1, rows, n) - logp.float().reshape(1, rows, n)
        pushed_down = torch.logsumexp(torch.cat([q_uniform, q_policy], -1), -1) - math.log(2 * n)
        return (pushed_down - critic.values(z, data_action)).mean()

    def update(self, batch: Batch) -> dict[str, float]:
        """Nothing while pre-training or warming up (their progress as metrics); then SAC's update."""
        if self.pretraining:
            return {"pretrain_steps": float(self.pretrained_steps), **getattr(self, "_pretrain_metrics", {})}
        if self.warmup_left > 0:
            self.warmup_left -= 1
            return {"warmup_left": float(self.warmup_left)}
        return super().update(batch)

    def learned_state(self) -> dict[str, Any]:
        return {**super().learned_state(), "wsrl_pretrained_steps": self.pretrained_steps,
                "wsrl_warmup_left": self.warmup_left}

    def load_learned_state(self, state: Mapping[str, Any]) -> None:
        super().load_learned_state(state)
        self.pretrained_steps = int(state["wsrl_pretrained_steps"])
        self.warmup_left = int(state["wsrl_warmup_left"])
