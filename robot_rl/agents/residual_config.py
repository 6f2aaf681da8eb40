"""Configuration of the agents that learn an actor and critics on a base policy's proposals (OnBaseConfig: residual,
ibrl) and of the residual fine-tuning agent (``agent.name: residual``). Every field is documented; all are overridable
from CLI and YAML."""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.agents.config import ActorCriticConfig


@dataclass(frozen=True)
class OnBaseConfig(ActorCriticConfig):
    """An actor and a critic ensemble (ActorCriticConfig) on a frozen base policy's proposals, shared by the
    residual agent and ibrl: n-step returns, a critic-only warm-up while the base acts alone, exploration, target
    smoothing, the chunk phase as an input, and behaviour cloning on demo and intervention rows."""

    use_cameras: bool = False  # a default of CriticConfig's field: the base has read the pixels
    n_step: int = 3  # a default of CriticConfig's field
    scale_anneal_updates: int = 1000
    """Updates (after the critic warm-up) over which the bound grows linearly from 0 to residual_scale; 0 = the
    full bound at once."""
    critic_warmup_updates: int = 500
    """Updates that train only the critics; the actor's output stays out (the base acts alone) until then, so a
    still-random critic cannot steer the robot away from what the base does."""
    exploration_std: float = 0.1
    """Std of the Gaussian noise added to the actor's output (the residual) when acting (fixed, not learned; clipped to
    the bound). With stochastic: the initial noise of the actor's Gaussian, learnt from there (its std before the
    tanh starts at exploration_std / bound per dimension)."""
    stochastic: bool = False
    """The actor is a squashed Gaussian trained with SAC's entropy bonus (its temperature tuned towards
    target_entropy; no entropy in the critics' target, as this project's sparse-reward SAC runs) instead of a
    deterministic actor with fixed exploration noise: exploration then grows where the critics are flat."""
    init_temperature: float = 0.01  # a default of ActorCriticConfig's field
    target_noise_std: float = 0.1
    """Std of the noise on the next residual in the critic target (target policy smoothing), as a fraction of
    the bound."""
    target_noise_clip: float = 0.25
    """Clip of that noise, as a fraction of the bound."""
    chunk_phases: int = 16
    """The step's index in the base's action chunk enters the actor and critics one-hot over this many phases
    (later indices share the last one; a held step, index -1, is all zeros); 0 leaves the phase out."""
    actor_base_input: bool = True
    """The actor reads the base's proposal (with the state, instruction and phase); off, it acts from the state,
    instruction and phase alone (a residual then learns a correction that is the same whatever the base proposes
    at that state; an ibrl actor, a policy of its own)."""
    critic_base_input: bool = True
    """The critics read the base's proposal (with the state, instruction and phase) beside the executed action;
    off, they score the executed action from the state, instruction and phase alone, as a plain SAC critic does (the
    actor always reads the proposal)."""
    actor_layer_norm: bool = True  # a default of ActorCriticConfig's field
    residual_penalty: float = 0.0
    """Weight of ``|residual / bound|^2`` (the actor's output over its bound; summed over the action's dimensions,
    averaged over the batch) in the actor's loss, whose Q term is then divided by the batch's mean ``|Q|`` (as TD3+BC
    scales it): the residual grows only as far as the critics' gradient holds it against the penalty, so an early,
    extrapolating critic cannot push it to its bound; 0 = the plain ``-Q`` objective (the demos' behaviour-cloning
    term holds the early residual instead; a penalty of 0.1 did not help in the PickColor sweep,
    docs/design/finetuning-residual.md). Set it when fine-tuning without demos."""
    actor_pessimism: float = 0.0
    """The actor maximises the critics' mean minus this many standard deviations across the ensemble (a
    lower confidence bound), so it does not follow the critics where they disagree, i.e. where they extrapolate
    beyond the data; 0 = the mean. It does not help where the critics agree on a wrong direction: on PegInsert,
    3 left the first evaluation below the base as the mean did (docs/design/finetuning-state-offsets.md)."""
    bc_weight: float = 2.5  # a default of ActorCriticConfig's field
    bc_decay_updates: int = 0
    """Updates (after the critic warm-up) over which bc_weight decays linearly to 0, so the demos hold the early
    residual and the critics alone shape the late one (an update is ``utd`` critic steps; the runtime makes one
    per env step); 0 = a constant bc_weight."""
    bc_q_filter: bool = False  # a default of ActorCriticConfig's field

    def bounds(self, action_dim: int) -> tuple[float, ...]:
        """The range of the actor's output for each of ``action_dim`` dimensions: here the whole action."""
        return (1.0,) * action_dim

    def straight_through(self) -> tuple[bool, float]:
        """Whether the actor's gradients pass the clip of its action to [-1, 1], and the weight of the penalty on
        what lies past the edge then: not here (see ResidualConfig)."""
        return False, 0.0

    def validate(self) -> None:
        """Raises ValueError naming the offending field."""
        super().validate()
        self.require([
            (self.scale_anneal_updates >= 0 and self.critic_warmup_updates >= 0,
             "scale_anneal_updates and critic_warmup_updates must be >= 0"),
            (self.exploration_std >= 0 and self.target_noise_std >= 0 and self.target_noise_clip >= 0,
             "exploration_std, target_noise_std and target_noise_clip must be >= 0"),
            (self.chunk_phases >= 0, "chunk_phases must be >= 0"),
            (self.actor_pessimism >= 0, "actor_pessimism must be >= 0"),
            (self.residual_penalty >= 0, "residual_penalty must be >= 0"),
            (self.bc_decay_updates >= 0, "bc_decay_updates must be >= 0"),
            (not self.stochastic or self.exploration_std > 0,
             "stochastic needs exploration_std > 0 (its initial std)"),
        ])


@dataclass(frozen=True)
class ResidualConfig(OnBaseConfig):
    """Off-policy residual RL on a frozen base policy (ResFiT / Policy Decorator): the executed action is
    ``clip(base + residual, -1, 1)`` with ``|residual| <= residual_scale`` per dimension."""

    name: str = "residual"
    """Which agent (``residual`` here; see AgentConfig)."""
    residual_scale: float = 0.2
    """Bound of the residual per action dimension, in normalised action units ([-1, 1] is the full range)."""
    residual_scales: tuple[float, ...] = ()
    """Per-dimension bounds, one per action dimension, in place of residual_scale (empty = residual_scale for
    every dimension). An absolute command needs a bound that can cross its range: a gripper the base holds open
    (-1) closes only with a residual near +2, so ``(0.3, 0.3, 0.3, 2.0)`` for an arm's ``[dx, dy, dz, gripper]``."""
    straight_through_clip: bool = False
    """The residual actor's gradients pass the clip of ``base + residual`` to [-1, 1] unchanged (the critics and the
    BC term still see the clipped action). Off: where the sum lies past the edge (a base at a saturated command
    and a residual pushing further out, e.g. a gripper held open) the clip's gradient is zero, the critics and
    the demos cannot pull the residual back there, and it stays. On PickColor it kept the mean |residual| at 0.24-0.40
    (0.76-0.84 off) but ended lower (docs/design/finetuning-residual.md), so it is off by default."""
    clip_excess_penalty: float = 1.0
    """With straight_through_clip: weight of ``max(|base + residual| - 1, 0)^2`` (summed over the action's
    dimensions, averaged over the batch) in the actor's loss, which keeps the sum near the edge where a critic
    favours the saturated command, so the residual stays within reach of coming back."""

    def bounds(self, action_dim: int) -> tuple[float, ...]:
        """The residual's full bound for each of ``action_dim`` dimensions."""
        if not self.residual_scales:
            return (self.residual_scale,) * action_dim
        if len(self.residual_scales) != action_dim:
            raise ValueError(f"agent config (residual): residual_scales has {len(self.residual_scales)} entries, the "
                             f"action {action_dim} dimensions")
        return tuple(self.residual_scales)

    def straight_through(self) -> tuple[bool, float]:
        """``straight_through_clip`` and ``clip_excess_penalty``."""
        return self.straight_through_clip, self.clip_excess_penalty

    def validate(self) -> None:
        """Raises ValueError naming the offending field."""
        super().validate()
        self.require([
            (0.0 < self.residual_scale <= 2.0, "residual_scale must be in (0, 2]"),
            (all(0.0 < b <= 2.0 for b in self.residual_scales), "every residual_scales entry must be in (0, 2]"),
            (self.clip_excess_penalty >= 0, "clip_excess_penalty must be >= 0"),
        ])
