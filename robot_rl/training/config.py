"""The one config of a training run: which env, which agent, which replay, how long, where to write."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from robot_rl.agents.base import AgentConfig, agent_class, capabilities
from robot_rl.agents.config import SACConfig
from robot_rl.agents.registry import uses_base
from robot_rl.envs.config import EnvConfig
from robot_rl.policies.config import BasePolicyConfig, ExecutionConfig
from robot_rl.replay.buffer import ReplayConfig
from robot_rl.rewards.classifier import check_saved
from robot_rl.rewards.wrapper import ClassifierRewardConfig
from robot_rl.teleop.config import TeleopConfig
from robot_rl.utils.imports import load_imports
from robot_rl.utils.run_dir import latest_checkpoint
from robot_rl.view.config import ViewConfig

SIM_RANDOM_STEPS = 1_000
"""``random_steps`` -1 in a sim: uniformly random actions for the first this many env steps."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How the actor and the learner run and talk (``robot-rl train`` starts them as separate processes)."""

    processes: bool = True
    """Run actor(s) and learner as separate OS processes; False runs both in one process (debugging, tests)."""
    transport: Literal["local", "ray"] = "local"
    """local: shared memory on one machine. ray: actors on other machines (e.g. a robot PC) reach the learner
    through Ray; actors run on nodes with the custom resource ``actor_resource``."""
    ray_address: str = "auto"
    """Ray cluster to join with transport 'ray' ('auto' = the one `ray start` made here; 'local' = start one)."""
    actor_resource: str = "robot"
    """Ray custom resource an actor needs (a robot PC is started with ``--resources '{"robot": 1}'``)."""
    num_actors: int = 1
    """Actor processes started by ``robot-rl train``."""
    num_envs: int = 1
    """Sims stepped by each actor (a batched env when > 1; a robot actor uses 1)."""
    control_hz: float = 0.0
    """Actor control rate in steps per second (e.g. 10-50 for robots); 0 = as fast as possible (sims)."""
    warmup: Literal["random", "scripted"] = "random"
    """Actions for the first ``random_steps`` env steps: uniform random, or the task's scripted expert (noisy)."""
    chunk_steps: int = 64
    """Transitions per chunk sent from an actor to the learner."""
    flush_seconds: float = 0.25
    """An actor sends a partial chunk after this long, so slow robots stream with bounded delay."""
    ring_slots: int = 16
    """Chunks the local shared-memory ring of each actor holds before the actor spills to its spool only."""
    max_update_lag: int = -1
    """Sims: the actor pauses while the learner owes more than this many env steps of updates, which keeps the
    update-to-data ratio from the first update on under asynchrony; 0 = never pause (robots: the actor is never
    blocked, the lag is reported); -1 = derived from the run (:meth:`update_lag_bound`)."""
    catch_up_between_episodes: bool = False
    """A never-blocked actor (``max_update_lag`` 0, a robot) waits after each episode's reset, robot at rest, until
    the learner owes at most ``min(chunk_steps, publish_every_updates)`` env steps of updates: no episode is paused
    midway and the update-to-data ratio holds over the run, at the cost of the learner's catch-up time per episode
    (what the operator's reset time often covers)."""
    utd_window: int = 250
    """Env steps over which the windowed update-to-data ratio (``utd/window``) is measured."""
    publish_every_updates: int = 20
    """The learner publishes policy weights every this many update calls ..."""
    publish_every_seconds: float = 1.0
    """... or after this many seconds, whichever comes first."""
    spool: bool = True
    """Actors also write every chunk to <run>/spool (a write-ahead log): chunks not yet in a learner
    checkpoint survive a learner crash and are delivered on resume (zero transitions lost)."""
    spool_max_mb: float = 4096.0
    """Bound on each actor's spool (what no checkpoint holds yet). Near it the learner checkpoints early, which
    trims the spool; at it a sim actor waits (back-pressure); a robot actor (``max_update_lag`` 0) is never blocked:
    it keeps spooling and warns once a minute with the size, until a full disk stops the run."""
    heartbeat_timeout: float = 30.0
    """Seconds without a heartbeat after which a peer counts as dead: the supervisor kills a learner or actor whose
    heartbeat stalled this long (a hang, a stuck driver call, SIGSTOP) and replaces it like a dead one. A robot
    env's reset must finish within it."""
    startup_timeout: float = 900.0
    """Seconds a started learner or actor may take to its first heartbeat (imports, envs, scripted demos recorded
    on first use) before the supervisor treats it as hung."""
    learner_threads: int = 0
    """Torch threads of the learner; 0 = the cores left after one per actor on this machine (at least 1).
    More threads than free cores makes torch's spinning worker threads collapse (measured 50x slower)."""
    learner_nice: int = 5
    """CPU niceness added to the learner process (0-19): when actor and learner share a machine, the actor's
    control loop wins the CPU over learner work such as checkpoint writes."""
    actor_rt_priority: int = 0
    """SCHED_FIFO priority (1-99) of the actor's control-loop thread; 0 = normal scheduling. For a robot PC: the
    loop then preempts every normal process at its wake-up. Needs root, CAP_SYS_NICE or an rtprio limit (else a
    warning and normal scheduling)."""
    actor_restarts: int = 5
    """The supervisor replaces a dead or hung actor at most this many times per ``restart_window_s``."""
    learner_restarts: int = 3
    """The supervisor restarts a dead or hung learner (from its latest checkpoint, or fresh from the spools
    before the first one) at most this many times per ``restart_window_s``."""
    restart_window_s: float = 600.0
    """The sliding window of the restart budgets, in seconds."""
    restart_backoff_s: float = 1.0
    """Wait before a restart; doubled for each earlier restart of the same process in the window (at most 30 s)."""

    def update_lag_bound(self) -> int:
        """The lag bound in force: ``max_update_lag``, or with -1 the smaller of a chunk and a publish interval
        (``min(chunk_steps, publish_every_updates)`` env steps): the acting weights are then at most about two
        publish intervals behind the data, and a 250-step window's ratio within 8 % of the target."""
        if self.max_update_lag >= 0:
            return self.max_update_lag
        return self.derived_lag_bound()

    def derived_lag_bound(self) -> int:
        """``min(chunk_steps, publish_every_updates)`` env steps: what ``max_update_lag`` -1 means, and how far
        behind a robot actor that catches up between episodes lets the learner be when it goes on."""
        return min(self.chunk_steps, self.publish_every_updates)

    def validate(self) -> None:
        for name in ("num_actors", "num_envs", "chunk_steps", "ring_slots", "publish_every_updates", "utd_window"):
            if getattr(self, name) < 1:
                raise ValueError(f"runtime.{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.actor_rt_priority <= 99:
            raise ValueError(f"runtime.actor_rt_priority must be in [0, 99], got {self.actor_rt_priority}")
        if not 0 <= self.learner_nice <= 19:
            raise ValueError(f"runtime.learner_nice must be in [0, 19], got {self.learner_nice}")
        for name in ("control_hz", "actor_restarts", "learner_restarts", "learner_threads", "restart_backoff_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"runtime.{name} must be >= 0, got {getattr(self, name)}")
        if self.max_update_lag < -1:
            raise ValueError(f"runtime.max_update_lag must be >= 0, or -1 (derived), got {self.max_update_lag}")
        for name in ("flush_seconds", "publish_every_seconds", "heartbeat_timeout", "startup_timeout",
                     "restart_window_s", "spool_max_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"runtime.{name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class TrainConfig:
    """A training run. Tasks differ only by this config (YAML under robot_rl/configs/ + CLI overrides).

    A config is a value: validated once, never changed afterwards (``robot_rl.config.replace`` makes a changed
    copy). Every seed of the run derives from ``seed`` (robot_rl/training/seeds.py)."""

    name: str = ""
    """Run name; the run folder is <runs_dir>/<name>. Empty = '<env id>-<date>-<time>'."""
    runs_dir: str = "runs"
    """Parent folder of run folders."""
    seed: int = 0
    """The run's seed: agent initialisation and updates, replay sampling, every actor's env resets and exploration
    noise (each its own stream), evaluation placements and scripted demos all derive from it."""
    total_env_steps: int = 10_000
    """Environment steps to train for."""
    random_steps: int = -1
    """Warm-up: uniformly random actions for the run's first this many env steps (with a base policy: the base's
    rollouts), counted over the whole run (a resumed run never repeats them); -1 = 1,000 in a sim, 0 on a robot (an
    env that drives hardware: random actions on a robot are asked for explicitly)."""
    init_from: str = ""
    """A run folder whose newest checkpoint's agent (networks, optimizers, temperature) this run starts from, none
    of its replay or counters: a policy trained elsewhere (the calibrated sim) fine-tuned here (the robot). The
    agent and observation settings must match that run's. With it, ``random_steps: -1`` means none."""
    warmup_random_share: float = 0.0
    """With a base policy: the share of warm-up steps whose action is uniformly random instead of the base's
    proposal (each step drawn alone; the proposal is still recorded), so the critics see actions away from the
    base's before an actor proposes them; 0 = the base's rollouts only."""
    learning_starts: int = 1_000
    """Env steps collected before the first agent update."""
    demos: list[str] = field(default_factory=list)
    """Demo datasets loaded into the demos partition at start: zarr stores written by robot_rl, or
    ``scripted:N`` for N scripted-expert demos of the task (recorded into demos/ on first use, then reused)."""
    eval_every: int = 2_000
    """Run a deterministic evaluation every this many env steps (0 = only at the end)."""
    eval_episodes: int = 5
    """Episodes per evaluation."""
    checkpoint_every: int = 5_000
    """Save a checkpoint (agent, optimizers, replay, counters) every this many env steps (0 = only at end)."""
    checkpoint_every_s: float = 300.0
    """Also save one when this many seconds of wall time have passed since the last (0 = by env steps only): what
    a crash can cost is bounded in time too (a robot at 10 Hz takes 8 minutes for 5,000 env steps). Until the
    first checkpoint, a resume rebuilds the replay from the actors' spools."""
    checkpoint_keep: int = 3
    """Checkpoints kept (older ones are deleted). A resume falls back to the newest intact one when a newer one is
    damaged; the actors' spools keep every transition the oldest kept one lacks, so falling back loses nothing."""
    keep_policies: bool = False
    """Keep every checkpoint's policy weights as ``checkpoints/policies/<env steps>.safetensors`` (older checkpoints
    are deleted, the last ``checkpoint_keep`` kept), to evaluate the policy at earlier marks again."""
    keep_best: bool = True
    """Keep the policy of the best evaluation so far (highest success rate, then mean return; the later of equals)
    in ``<run>/best/policy.safetensors``, that evaluation in its metadata: a policy that degrades late in training
    leaves the best one behind (``robot-rl eval RUN --policy best``). A robot's learner does not evaluate, so keeps
    none."""
    log_every: int = 250
    """Write training scalars every this many env steps."""
    progress: bool = True
    """Show progress: a bar on a terminal; when stderr is not a terminal (nohup, a scheduler, CI logs), a plain log
    line every ``progress_every_s`` seconds. Its fields: env steps done of the total, elapsed and left; ``updates``
    (learner updates so far, 0 until ``learning_starts``); ``utd W (run R)`` (gradient steps per env step over the
    last window and over the whole run: the configured ``agent.utd`` when the learner keeps up); ``lag K steps``
    (env steps between the weights the actor acts with and the learner's newest); ``eval return ... success ...``
    (the last evaluation)."""
    progress_every_s: float = 15.0
    """Seconds between plain progress lines when stderr is not a terminal."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """The environment."""
    agent: AgentConfig = field(default_factory=SACConfig)
    """The learner's agent: ``agent.name`` selects it (sac, bc, or module:Class) and its fields follow."""
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    """The learner's replay buffer."""
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    """Actor/learner processes, transport, rate limiting and crash safety."""
    teleop: TeleopConfig = field(default_factory=TeleopConfig)
    """Who may take over from the policy on the actor's env (a person's device, or the scripted human in sim)."""
    view: ViewConfig = field(default_factory=ViewConfig)
    """The live operator view of the first actor's first env in rerun's viewer, each episode saved under
    ``<run>/view`` (``view.enabled``; the view extra)."""
    base_policy: BasePolicyConfig = field(default_factory=BasePolicyConfig)
    """A base (generalist) policy the actor runs (a saved policy folder or a ws:// policy server); an agent that
    uses one (``agent.name: base``, the fine-tuning agents) acts on its proposals, and warm-up executes it
    instead of random actions."""
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    """How the actor executes the base policy's chunks (sync in a flat-out sim; async / future at a robot's rate)."""
    reward: ClassifierRewardConfig = field(default_factory=ClassifierRewardConfig)
    """Learned reward (HIL-SERL): with ``reward.path`` set, the actor's envs take reward, success and success
    termination from this classifier (``robot-rl train-reward``) instead of the env; robot_rl tasks are then made
    with ``terminate_on_success=False``. Evaluation keeps the env's own success check, so eval figures stay
    ground truth in sim."""

    def warmup_steps(self, drives_hardware: bool) -> int:
        """The warm-up in force: ``random_steps``, or with -1 1,000 env steps in a sim and none on a robot or from
        a trained agent (``init_from``)."""
        if self.random_steps >= 0:
            return self.random_steps
        return 0 if drives_hardware or self.init_from else SIM_RANDOM_STEPS

    def agent_config(self) -> AgentConfig:
        """The agent's config as this run builds its agent: an agent that fine-tunes the base's weights (it declares
        ``trains_base``) fine-tunes the run's base policy, so its ``base_path`` is ``base_policy.path``."""
        if self.base_policy.path and capabilities(agent_class(self.agent.name)).trains_base:
            return dataclasses.replace(self.agent, base_path=self.base_policy.path)  # type: ignore[call-arg]
        return self.agent

    @classmethod
    def prepare_raw(cls, data: dict[str, Any], base: Path) -> dict[str, Any]:
        """YAML data before conversion: ``env.imports`` files made absolute against the YAML's folder and imported
        (an agent of your own, ``agent.name: module:Class``, may live in one of them); ``agent.seed`` and
        ``replay.seed`` of older run folders dropped (every seed derives from ``seed`` now)."""
        for section in ("agent", "replay"):  # run folders written before seeds resolved in one place
            if isinstance(data.get(section), dict) and "seed" in data[section]:
                data = {**data, section: {k: v for k, v in data[section].items() if k != "seed"}}
        env = data.get("env")
        if isinstance(env, dict):
            env = EnvConfig.prepare_raw(env, base)
            if isinstance(env.get("imports"), list):
                load_imports(env["imports"], "env.imports")
            data = {**data, "env": env}
        return data

    def validate(self) -> None:
        """Raises ValueError naming the offending field (checks that need no env; see runtime/preflight.py)."""
        for name in ("total_env_steps", "eval_episodes", "checkpoint_keep"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.random_steps < -1:
            raise ValueError(f"random_steps must be >= 0, or -1 (derived), got {self.random_steps}")
        for name in ("learning_starts", "eval_every", "checkpoint_every", "log_every",
                     "checkpoint_every_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.progress_every_s > 0:
            raise ValueError(f"progress_every_s must be > 0, got {self.progress_every_s}")
        if self.init_from:
            try:
                latest_checkpoint(self.init_from)
            except (FileNotFoundError, ValueError, OSError) as exc:
                raise ValueError(f"init_from: {self.init_from} holds no intact checkpoint ({exc})") from None
        if not 0.0 <= self.warmup_random_share <= 1.0:
            raise ValueError(f"warmup_random_share must be in [0, 1], got {self.warmup_random_share}")
        self.env.validate()
        self.agent.validate()
        self.replay.validate()
        self.runtime.validate()
        self.teleop.validate()
        self.view.validate()
        self.base_policy.validate()
        self.execution.validate()

        if uses_base(self.agent) and not self.base_policy.path:
            raise ValueError(f"base_policy.path: agent {self.agent.name!r} acts on a base policy's proposals: name "
                             "one (a saved policy folder or ws://HOST:PORT)")
        if self.execution.mode != "sync" and not self.runtime.control_hz and self.base_policy.path:
            raise ValueError(f"execution.mode: {self.execution.mode!r} overlaps inference with the robot's motion in "
                             "real time: it needs runtime.control_hz > 0 (a flat-out sim runs 'sync')")
        if self.reward.path:
            self.reward.validate()
            try:
                check_saved(self.reward.path)
            except FileNotFoundError as exc:
                raise ValueError(f"reward.path: {exc}") from None
        if self.teleop.device not in ("none", "scripted") and self.runtime.num_actors * self.runtime.num_envs > 1:
            raise ValueError(f"teleop.device {self.teleop.device!r} steers one robot: it needs runtime.num_actors "
                             "= runtime.num_envs = 1")
