"""Configuration of the observation encoder, of the critic ensemble every off-policy agent learns (CriticConfig,
declared once) and of the SAC/RLPD agent. Every field is documented; all are overridable from CLI and YAML."""

from __future__ import annotations

from dataclasses import dataclass, field

from robot_rl.agents.base import AgentConfig, Sampling


@dataclass(frozen=True)
class EncoderConfig:
    """How observations become the latent the actor and critics read."""

    state_hidden_dims: tuple[int, ...] = ()
    """Hidden sizes of the proprioception MLP (Linear-LayerNorm-tanh blocks); empty = raw state."""
    conv_channels: tuple[int, ...] = (32, 32, 32, 32)
    """Channels of each 3x3 conv layer of the per-camera encoder."""
    conv_strides: tuple[int, ...] = (2, 2, 2, 1)
    """Stride of each conv layer (same length as conv_channels)."""
    latent_dim: int = 64
    """Output size of each camera's encoder (Linear -> LayerNorm -> tanh)."""
    augment_pad: int = 4
    """Random-shift augmentation: pixels of replicate padding; 0 disables augmentation."""
    pretrained_path: str | None = None
    """Local safetensors file with conv-encoder weights (see ObservationEncoder.save_pretrained)."""
    freeze_pretrained: bool = True
    """Freeze the loaded pretrained encoder (it is then not trained and not in any optimizer)."""
    pretrain_steps: int = 0
    """Before the first RL update, train the encoder this many steps by behaviour cloning on the demos, then freeze
    its conv layers (robot_rl/agents/encoder_pretraining.py): the RL updates then skip the convolutions' backward
    pass (docs/benchmarks/pixels.md). 0 = the critics train the whole encoder throughout."""
    pretrain_lr: float = 1e-3
    """Adam learning rate of that pre-training."""
    normalize_state: bool = True
    """Standardise the state vector with a mean/std fitted once on the replay when learning starts (demos and
    warm-up data), then frozen and shipped with the policy: raw states mix metres, quaternions and a gripper
    opening of a few cm, which an unnormalised MLP resolves poorly."""
    normalize_min_std: float = 0.01
    """Floor of the fitted std (state units): near-constant dims are not blown up into noise."""


@dataclass(frozen=True)
class CriticConfig(AgentConfig):
    """The critic ensemble of an off-policy agent (robot_rl.agents.critic.Critic), declared once for every agent that
    learns one (sac, residual, ibrl, critic_guided): LayerNorm critics, the target as the min over a random subset of
    target critics (RLPD), n-step returns, a Polyak-averaged target, an optional HL-Gauss categorical critic, and the
    observation encoder they train."""

    hidden_dims: tuple[int, ...] = (256, 256)
    """Hidden layer sizes of every critic, and of the agent's actor where it has one."""
    critic_layer_norm: bool = True
    """LayerNorm after every hidden critic layer (RLPD's key stabiliser for offline data)."""
    num_critics: int = 10
    """Critic ensemble size (RLPD: 10)."""
    num_min_critics: int = 2
    """Target = min over a random subset of this many target critics (RLPD: 2)."""
    hl_gauss: bool = False
    """Categorical critic trained with the HL-Gauss cross-entropy loss ("Stop Regressing") instead of MSE."""
    hl_gauss_bins: int = 101
    """Number of value bins of the HL-Gauss critic."""
    hl_gauss_range: tuple[float, float] = (-200.0, 200.0)
    """Value range (min, max) covered by the HL-Gauss bins; set it to the task's return range."""
    hl_gauss_sigma_ratio: float = 0.75
    """Gaussian width as a multiple of the bin width (paper default 0.75)."""
    discount: float = 0.99
    """Discount factor gamma."""
    n_step: int = 1
    """Transitions summed into each critic target (n-step returns; 1 = one-step TD). sac: 1; the agents on a base
    policy (residual, ibrl, critic_guided): 3."""
    tau: float = 0.005
    """Polyak rate of the target critics."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics and of the encoder they train."""
    utd: int = 20
    """Update-to-data ratio: critic updates per environment step (an actor, where the agent has one, updates once)."""
    batch_size: int = 256
    """Transitions per gradient step."""
    use_cameras: bool = True
    """Encode the env's cameras (a conv net per camera). Off: the agent reads the state and the instruction only,
    and samples carry no frames (the base has read the pixels, or SAC steers a base that reads them itself). sac:
    on; the agents on a base policy (residual, ibrl, critic_guided): off."""
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    """Observation encoder (state MLP; conv nets when use_cameras); the critics' loss trains it, an actor reads it."""

    def critic_sampling(self) -> Sampling:
        """What one update of ``utd`` critic steps draws: a ``[utd, batch_size]`` sample in the replay's mix, with
        ``n_step`` returns, and the camera frames only where the encoder reads them."""
        return Sampling(batch_size=self.batch_size, utd=self.utd, n_step=self.n_step, discount=self.discount,
                        pixels=self.use_cameras)

    def validate(self) -> None:
        """Raises ValueError naming the offending field (an agent's config adds its own checks after these)."""
        self.require([
            (self.num_critics >= 1, "num_critics must be >= 1"),
            (1 <= self.num_min_critics <= self.num_critics, "num_min_critics must be in [1, num_critics]"),
            (self.utd >= 1, "utd must be >= 1"),
            (self.batch_size >= 1, "batch_size must be >= 1"),
            (self.n_step >= 1, "n_step must be >= 1"),
            (0.0 <= self.discount <= 1.0, "discount must be in [0, 1]"),
            (0.0 < self.tau <= 1.0, "tau must be in (0, 1]"),
            (self.critic_lr > 0, "critic_lr must be > 0"),
            (self.hl_gauss_bins >= 2, "hl_gauss_bins must be >= 2"),
            (self.hl_gauss_range[0] < self.hl_gauss_range[1], "hl_gauss_range must be (min, max) with min < max"),
            (len(self.encoder.conv_channels) == len(self.encoder.conv_strides),
             "encoder.conv_channels and encoder.conv_strides must have the same length"),
        ])


@dataclass(frozen=True)
class ActorCriticConfig(CriticConfig):
    """An actor beside the critic ensemble (sac, residual, ibrl), declared once: its network, its optimiser, the
    entropy temperature of a stochastic actor and a behaviour-cloning term on demo and intervention rows. Each agent
    sets its own defaults."""

    actor_layer_norm: bool = False
    """LayerNorm in the actor's hidden layers. sac: off; the agents on a base policy (residual, ibrl): on."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    init_temperature: float = 1.0
    """Initial entropy temperature alpha of a stochastic actor (sac's; residual and ibrl with ``stochastic``).
    sac: 1.0; residual, ibrl: 0.01."""
    target_entropy: float | None = None
    """Entropy the temperature is tuned towards (of the squashed action in [-1, 1]); None = ``-action_dim / 2``
    (RLPD)."""
    temperature_lr: float = 3e-4
    """Adam learning rate of log(alpha)."""
    bc_weight: float = 0.0
    """Weight of a behaviour-cloning term in the actor loss over the batch's demo and intervention rows; 0 = off.
    sac (default 0, pure RLPD): ``||tanh(mu(s)) - a||^2`` (mu: the policy mean); with few demos and a sparse reward
    it makes the policy follow the demos from the first updates while the critic learns (Nair et al. 2018).
    residual (default 2.5): the stored action relabelled as a residual against the base's proposal
    (``clip(a - base, -bound, bound)``), weighed against the raw ``-Q`` (against ``-Q / mean|Q|`` with a
    residual_penalty), so its balance depends on the reward's scale: 2.5 was tuned on sparse 0/1 rewards.
    ibrl (default 1.0): the RL actor imitates the stored action."""
    bc_q_filter: bool = True
    """Apply the BC term only where the critics value the stored action above the actor's own
    (Q(s, a_demo) > Q(s, a_pi)): once the policy is better than a demo there, RL alone drives it. sac: on;
    residual, ibrl: off (on every demo and intervention row, which learnt faster from a weak base in the
    PickColor sweep)."""

    def validate(self) -> None:
        """Raises ValueError naming the offending field."""
        super().validate()
        self.require([
            (self.bc_weight >= 0, "bc_weight must be >= 0"),
            (self.init_temperature > 0 and self.temperature_lr >= 0,
             "init_temperature must be > 0 and temperature_lr >= 0"),
        ])


@dataclass(frozen=True)
class SACConfig(ActorCriticConfig):
    """Soft actor-critic with the RLPD recipe (the critic ensemble of CriticConfig, high UTD)."""

    name: str = "sac"
    """Which agent (``sac`` here; see AgentConfig)."""
    backup_entropy: bool = True
    """Subtract alpha * log pi(a'|s') in the critic target."""
    bf16: bool = False
    """Run the network matmuls in bfloat16 autocast (fast on CPUs with AMX and on GPUs)."""
    manual_grad: bool | None = None
    """Hand-derived gradients (no autograd): same maths, about half the ops, no allocation churn
    (robot_rl/agents/manual_grad.py; measured in benchmarks/learner_speed.py). None = on for CPU learners, off on
    GPUs (not yet measured there). Applies to state-only agents with scalar critics; pixels, a trainable state
    encoder, HL-Gauss, bf16 and compile always use autograd."""
    compile: bool = False
    """torch.compile the update step; see benchmarks/learner_speed.py before enabling."""
    critic_warmup_updates: int = 0
    """Learner updates at the start of training that train only the critics (the actor and the temperature wait).
    Counted again from the start when the agent is initialised from another run (``init_from``): the policy trained
    there acts unchanged while the critics learn what its actions lead to here (the robot after the sim), before the
    actor follows them. 0: off."""

    def validate(self) -> None:
        """Raises ValueError naming the offending field."""
        super().validate()
        self.require([(self.critic_warmup_updates >= 0, "critic_warmup_updates must be >= 0")])

