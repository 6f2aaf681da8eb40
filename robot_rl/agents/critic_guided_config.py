"""Configuration of critic-guided fine-tuning of a base policy's weights (``agent.name: critic_guided``). Every field
is documented; all are overridable from CLI and YAML."""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.agents.config import CriticConfig


@dataclass(frozen=True)
class CriticGuidedConfig(CriticConfig):
    """Fine-tunes a local small VLA (PA-RL / ConRFT style): a critic ensemble (CriticConfig) learns Q of the executed
    action; every
    ``improve_every`` updates the base samples ``num_samples`` chunks per observation, and its own flow/L1 loss
    pulls it towards the one the critic values most (demo and intervention rows: towards the stored action)."""

    name: str = "critic_guided"
    """Which agent (``critic_guided`` here; see AgentConfig)."""
    base_path: str = ""
    """The saved VLA folder whose weights are fine-tuned. A run sets it to its ``base_policy.path`` (which must then
    be a local saved VLA, not a policy server); set it yourself when using the agent without a run."""
    num_samples: int = 8
    """K: chunks sampled per observation in an improvement step (the zero-noise decode is always one of them, so
    a critic that prefers no sample leaves the decode where it is)."""
    pick_pessimism: float = 1.0
    """Half of the critic ensemble picks the best sample, the other half measures its gain over the decode member
    by member; the pick replaces the decode only where that gain's mean less this many standard deviations is
    positive (elsewhere the decode stays). 0: any positive mean gain of the verifying half."""
    noise_std: float = 1.0
    """Std of the flow noise the other K-1 samples start from (1 = the distribution the base was trained on)."""
    improve_every: int = 10
    """Updates between two improvement steps of the base."""
    improve_batch: int = 32
    """Observations (with their camera frames) per improvement step, drawn from the replay in its mix."""
    train_trunk: bool = False
    """Fine-tune the whole base. Off: only its action head (flow and/or L1 decoder) learns; the trunk (vision,
    language, state tokens) stays as pre-trained, which is steadier with few samples and cheaper."""
    decode_weight: float = 1.0
    """Weight of the term that pulls the base's deterministic (zero-noise) decode, what the robot executes, onto
    the picked chunks (differentiated through the decode's steps)."""
    anchor_weight: float = 1.0
    """Weight of the term that holds the deterministic decode at the anchor's reference (the original base; see
    anchor_tau) on every chunk step that is neither a verified pick nor a demo's action (0 = no anchor: the head
    drifts with every update)."""
    anchor_tau: float = 0.0
    """After each improvement step the anchor's reference moves this share of the way to the fine-tuned base (an
    exponential average of it): the decode is then held near its recent self instead of being pulled back to the
    original base wherever the critics verify no gain, which undoes what earlier picks taught once picks get rare.
    0: the original base, for ever."""
    sample_weight: float = 0.1
    """Weight of the base's own training loss (flow matching and/or L1) on the picked chunks, which moves its
    sampling distribution; kept small: with fresh noise it moves the deterministic decode only indirectly and
    can carry it past the picks."""
    base_lr: float = 3e-5
    """AdamW learning rate of the base's weights."""
    base_lr_decay_steps: int = 0
    """Improvement steps over which the base's learning rate falls linearly to zero, after which the base stays as
    it is (the critics keep learning); 0: constant. Locks in what the first improvements gained when a critic that
    can no longer tell the samples apart would otherwise drift the base on its noise."""
    base_grad_clip: float = 1.0
    """Gradient-norm clip of the base's update."""
    bc_weight: float = 1.0
    """Weight of demo and intervention rows in the improvement loss (their first action is the stored one; the
    chunk's other steps keep the critic's pick)."""
    demo_filter: bool = False
    """Demo rows pull the decode to their stored action only where the critics verify that action's gain over the
    decode (the whole ensemble, ``pick_pessimism`` as for picks; Q-filtered behaviour cloning); elsewhere they are
    improved like online rows. Intervention rows are always followed. Off: every demo row pulls (``bc_weight``)."""
    critic_warmup_updates: int = 500
    """Updates that train only the critics before the base is first changed (a random critic picks at random)."""
    exploration_std: float = 0.05
    """Std of Gaussian noise added to the base's action when acting (clipped to [-1, 1]); 0 = none."""
    target_noise_std: float = 0.05
    """Std of the noise on the next action in the critic target (target policy smoothing), in action units."""
    chunk_phases: int = 16
    """The step's index in its chunk enters the critics one-hot over this many phases (0 leaves it out)."""
    use_cameras: bool = False  # a default of CriticConfig's field: the base reads the pixels
    n_step: int = 3  # a default of CriticConfig's field

    def validate(self) -> None:
        """Raises ValueError naming the offending field."""
        super().validate()
        self.require([
            (self.num_samples >= 1 and self.improve_batch >= 1 and self.improve_every >= 1,
             "num_samples, improve_batch and improve_every must be >= 1"),
            (self.noise_std >= 0 and self.exploration_std >= 0 and self.target_noise_std >= 0,
             "noise_std, exploration_std and target_noise_std must be >= 0"),
            (self.base_lr > 0 and self.base_grad_clip > 0, "base_lr and base_grad_clip must be > 0"),
            (self.bc_weight >= 0 and self.critic_warmup_updates >= 0 and self.decode_weight >= 0
             and self.sample_weight >= 0 and self.anchor_weight >= 0,
             "bc_weight, critic_warmup_updates, decode_weight, sample_weight and anchor_weight must be >= 0"),
            (self.pick_pessimism >= 0, "pick_pessimism must be >= 0"),
            (self.base_lr_decay_steps >= 0, "base_lr_decay_steps must be >= 0"),
            (0.0 <= self.anchor_tau <= 1.0, "anchor_tau must be in [0, 1]"),
            (self.chunk_phases >= 0, "chunk_phases must be >= 0"),
        ])
