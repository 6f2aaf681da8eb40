"""The one config of a training run: which env, which agent, which replay, how long, where to write."""

from __future__ import annotations

from dataclasses import dataclass, field

from robot_rl.agents.config import SACConfig
from robot_rl.envs.make import EnvConfig
from robot_rl.replay.buffer import ReplayConfig


@dataclass
class TrainConfig:
    """A training run. Tasks differ only by this config (YAML under robot_rl/configs/ + CLI overrides)."""

    name: str = ""
    """Run name; the run folder is <runs_dir>/<name>. Empty = '<env id>-<date>-<time>'."""
    runs_dir: str = "runs"
    """Parent folder of run folders."""
    seed: int = 0
    """Seed of the env, the agent and the replay sampler."""
    total_env_steps: int = 10_000
    """Environment steps to train for."""
    random_steps: int = 1_000
    """Warm-up: uniformly random actions for this many env steps."""
    learning_starts: int = 1_000
    """Env steps collected before the first agent update."""
    demos: list[str] = field(default_factory=list)
    """Demo datasets (zarr stores written by robot_rl) loaded into the demos partition at start."""
    eval_every: int = 2_000
    """Run a deterministic evaluation every this many env steps (0 = only at the end)."""
    eval_episodes: int = 5
    """Episodes per evaluation."""
    checkpoint_every: int = 5_000
    """Save a checkpoint (agent, optimizers, replay, counters) every this many env steps (0 = only at end)."""
    log_every: int = 250
    """Write training scalars every this many env steps."""
    progress: bool = True
    """Show a progress bar in the terminal."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """The environment."""
    agent: SACConfig = field(default_factory=SACConfig)
    """The learner's agent."""
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    """The learner's replay buffer."""

    def validate(self) -> None:
        """Raises ValueError naming the offending field."""
        for name in ("total_env_steps", "eval_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("random_steps", "learning_starts", "eval_every", "checkpoint_every", "log_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        self.agent.validate()
        self.replay.validate()
