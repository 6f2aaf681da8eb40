"""Imitation-bootstrapped RL on a frozen base policy (``agent.name: ibrl``; IBRL, Hu et al. 2023).

The base (a generalist policy, local or behind a policy server) proposes an action each control step; an RL actor
proposes a full action of its own, and the step executes whichever of the two the critics value higher:

    executed = base if Q(s, base) >= Q(s, actor(s)) else actor(s)

The critics bootstrap from the better of the two as well (``max(Q'(s', base'), Q'(s', actor(s')))``), so the
base's value carries into the targets from the first update, and the actor (deterministic, TD3-style, with fixed
exploration noise; or ``stochastic``) takes over state by state where the critics find it better: unlike a bounded
residual it can leave the base's action entirely, and unlike RL from scratch it never acts worse than the base
where the critics know better. The actor, critics, data, n-step returns, critic warm-up (the base acts alone) and
the demos' behaviour cloning (on the demo action itself) are the residual agent's (robot_rl.agents.residual); the
actor's input includes the base's proposal and its chunk phase. Actors need the critics to choose, so the policy
state carries them. ``actor_alone_after_updates`` hands over from the choice to the actor alone after a set number
of updates (the policy state carries the switch to the actors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from robot_rl.agents.residual import ResidualAgent
from robot_rl.agents.residual_config import OnBaseConfig


@dataclass(frozen=True)
class IBRLConfig(OnBaseConfig):
    """The fields an actor and critics on a base's proposals share with the residual agent (OnBaseConfig), with the
    actor's output a full action in [-1, 1], and the choice between the base's proposal and the actor's action."""

    name: str = "ibrl"
    """Which agent (``ibrl`` here; see AgentConfig)."""
    retired_fields: ClassVar[frozenset[str]] = frozenset({
        "residual_scale", "residual_scales", "straight_through_clip", "clip_excess_penalty"})
    # (ibrl configs had the residual's bounds and clip options, which never applied: saved runs listing them load)
    scale_anneal_updates: int = 0
    """Updates (after the critic warm-up) over which the actor's output range grows from 0 to [-1, 1]; 0 = the
    whole range once the warm-up ends."""
    bc_weight: float = 1.0  # a default of ActorCriticConfig's field

    choice_pessimism: float = 0.0
    """The choice compares lower confidence bounds, the critics' mean minus this many ensemble standard deviations:
    where they disagree about the actor's action (an action unlike the data's), the base keeps running; 0 = the
    ensemble's mean. Targets are unchanged."""

    choice_margin: float = 0.0
    """The actor's action runs only where the critics value it more than this above the base's proposal (in the
    critics' units, discounted returns): near ties, where a young actor's value is least to be trusted, go to the
    base; 0 = the higher value wins. Targets are unchanged."""
    choice_margin_exploring: bool = True
    """Apply choice_margin to exploring steps too; off = only where the agent acts deterministically (evaluation,
    deployment), so the training data is the plain choice's."""

    choice_per_chunk: bool = False
    """Choose at the first step of each of the base's chunks and hold the choice through the chunk: the base runs
    whole chunks (its open-loop plan is not cut by the actor's steps, which would leave the rest of it stale) and the
    actor runs from one chunk boundary to the next; off = choose at every step."""

    actor_alone_after_updates: int = 0
    """Updates after the critic warm-up after which the actor acts alone: the base is no longer chosen and the
    critics' targets bootstrap from the actor's next action only (SAC/RLPD from the IBRL weights on). The choice
    keeps a young actor at the base's level; a trained actor alone can end ahead of it, where the critics still
    pick the base on states the actor handles (the runtime makes one update per env step); 0 = never."""

    base_anchor_weight: float = 0.0
    """Weight of a term pulling the actor's (mean) action towards the base's proposal on every sampled row (squared
    distance summed over the action's dimensions): a young actor then proposes near the base, so the choice cannot
    run an action far from both the base and the data while the critics still overrate such actions; 0 = off."""
    base_anchor_decay_updates: int = 0
    """Updates (after the critic warm-up) over which base_anchor_weight decays linearly to 0, freeing the actor to
    leave the base once the critics have seen its actions (the runtime makes one update per env step); 0 = a
    constant weight."""

    def validate(self) -> None:
        """Raises ValueError naming the offending field."""
        super().validate()
        if self.choice_margin < 0:
            raise ValueError(f"choice_margin must be >= 0, got {self.choice_margin}")
        if self.choice_pessimism < 0:
            raise ValueError(f"choice_pessimism must be >= 0, got {self.choice_pessimism}")
        if self.actor_alone_after_updates < 0:
            raise ValueError(f"actor_alone_after_updates must be >= 0, got {self.actor_alone_after_updates}")
        if self.base_anchor_weight < 0 or self.base_anchor_decay_updates < 0:
            raise ValueError("base_anchor_weight and base_anchor_decay_updates must be >= 0, got "
                             f"{self.base_anchor_weight} and {self.base_anchor_decay_updates}")


class IBRLAgent(ResidualAgent):
    """See the module docstring and :class:`IBRLConfig`."""

    name: ClassVar[str] = "ibrl"
    config_class: ClassVar[type[IBRLConfig]] = IBRLConfig
    keeps_acting_state: ClassVar[bool] = True
    acting_state: dict[int, torch.Tensor]
    """choice_per_chunk: the choice held per row, by batch size (an agent acts for one caller: the actor's envs, or
    the learner's evaluation); the control loop's state, not the weights': the actor's two policy copies hand it
    over when they swap (robot_rl.runtime.actor)."""

    def __init__(self, obs_spec: Any, action_dim: int, cfg: IBRLConfig | None = None, seed: int = 0) -> None:
        self._actor_alone = torch.zeros((), dtype=torch.bool)  # before the base class's first _set_bound
        super().__init__(obs_spec, action_dim, cfg or IBRLConfig(), seed)
        self._actor_share = torch.zeros((), device=self.device)
        self.acting_state = {}

    @property
    def actor_alone(self) -> bool:
        """Whether the actor acts alone (actor_alone_after_updates reached; an actor process reads it from the
        policy weights)."""
        return bool(self._actor_alone)

    def _set_bound(self) -> None:
        super()._set_bound()
        after = self.cfg.actor_alone_after_updates
        self._actor_alone.fill_(after > 0 and self.update_step >= self.cfg.critic_warmup_updates + after)

    def _raw_action(self, base: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return out

    def _bc_target(self, base: torch.Tensor, action: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
        return action

    def _target_value(self, x: torch.Tensor, action: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        """The subset-min over ``members`` of the target critics at ``action``."""
        return self.critic.target_value(self.critic_input(x), action, members)

    def _base_anchor_weight(self) -> float:
        return self._faded(self.cfg.base_anchor_weight, self.cfg.base_anchor_decay_updates)

    def _choose(self, x: torch.Tensor, base: torch.Tensor, action: torch.Tensor, chunk_index: torch.Tensor,
                deterministic: bool = False) -> torch.Tensor:
        if float(self.actor.bound.max()) == 0.0:  # critic warm-up: the base acts alone
            return base
        if self.actor_alone:
            return action
        # choice_per_chunk: a fresh choice where a chunk starts, the held one elsewhere (missed steps, index -1, too)
        starts = chunk_index.reshape(-1) == 0
        held = self.acting_state.get(base.shape[0]) if self.cfg.choice_per_chunk else None
        if held is not None and not bool(starts.any()):
            take = held  # every row holds: no critic pass
        else:
            margin = self.cfg.choice_margin if deterministic or self.cfg.choice_margin_exploring else 0.0
            take = self._choice_value(x, action) > self._choice_value(x, base) + margin
            take = take if held is None else torch.where(starts, take, held)
        if self.cfg.choice_per_chunk:
            self.acting_state[base.shape[0]] = take
        return torch.where(take[:, None], action, base)

    def _choice_value(self, x: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The ensemble's mean, less choice_pessimism standard deviations."""
        q = self.critic.values(self.critic_input(x), action)
        k = self.cfg.choice_pessimism
        return q.mean(0) if k == 0 else q.mean(0) - k * q.std(0)

    def _target_q(self, x_next: torch.Tensor, next_base: torch.Tensor, next_action: torch.Tensor,
                  members: torch.Tensor) -> torch.Tensor:
        if self.actor_alone:  # (after the warm-up) the next step is the actor's: no pass over the base's proposal
            self._actor_share.fill_(1.0)
            return self._target_value(x_next, next_action, members)
        q_base = self._target_value(x_next, next_base, members)
        if self.update_step < self.cfg.critic_warmup_updates:  # warm-up: the next step is the base's
            return q_base
        q_actor = self._target_value(x_next, next_action, members)
        self._actor_share = (q_actor > q_base).float().mean()
        return torch.maximum(q_actor, q_base)

    def after_update(self) -> dict[str, float]:
        """As the residual agent's; ``actor_share`` is the share of the last sample's next steps where the target
        critics valued the actor's action above the base's (1 once the actor acts alone)."""
        return {**super().after_update(), "actor_share": float(self._actor_share)}

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The actor, the encoder and the critics (an actor chooses between the base and the actor with them)."""
        out = super().policy_state()
        out.update({f"critic.{k}": v.detach().to("cpu", copy=True).contiguous()
                    for k, v in self.critic.net.state_dict().items()})
        out["ibrl.actor_alone"] = self._actor_alone.clone()
        return out

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        super().load_policy_state(state)
        self.critic.net.load_state_dict({k[7:]: v for k, v in state.items() if k.startswith("critic.")})
        if "ibrl.actor_alone" in state:  # (absent from policies saved before the handover existed: never alone)
            self._actor_alone.copy_(state["ibrl.actor_alone"])

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self._set_bound()
