"""Everything about a run's config that can be wrong, checked in the parent before any process starts.

``robot-rl train`` builds the env once through the same pipeline the actors and the learner use, builds the agent
for its spaces, and checks that every choice fits this env: a scripted expert only where the env has one, demo
datasets that exist and match the spaces, data for what the agent samples, a learned reward whose cameras the env
has. Any problem is one :class:`~robot_rl.config.ConfigError` naming the field; the command exits with code 2.
"""

from __future__ import annotations

from pathlib import Path

from robot_rl.agents.registry import agent_class
from robot_rl.config import ConfigError
from robot_rl.envs.config import EnvConfig
from robot_rl.envs.contract import drives_hardware
from robot_rl.envs.make import has_expert, make_env
from robot_rl.policies.base import PolicyError, misfit
from robot_rl.policies.evaluate import state_predictor
from robot_rl.policies.loader import load_policy, missing_policy
from robot_rl.replay.buffer import PARTITIONS
from robot_rl.replay.storage import RingStorage, available_ram
from robot_rl.replay.store import ReplayStoreError, check_store
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.agents import build_agent
from robot_rl.training.config import TrainConfig
from robot_rl.training.env_stages import training_stages
from robot_rl.utils.log import get_logger
from robot_rl.view.config import rerun_unusable

log = get_logger(__name__)


def check_run(cfg: TrainConfig) -> None:
    """Raises ConfigError (a message naming the field) for a config that cannot run; returns None otherwise."""
    try:
        cfg.validate()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    missing = missing_policy(cfg.base_policy)  # first: the env and agent checks can take a while, or need the base
    if missing:
        raise ConfigError(missing)
    try:
        env = make_env(cfg.env)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        try:
            spec, action_dim = ObsSpec.from_space(env.observation_space), action_dim_of(env.action_space)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"env.obs_map: {exc}") from None
        _check_agent(cfg, spec, action_dim)
        _check_replay_memory(cfg, spec, action_dim)
        _check_base_policy(cfg, spec, action_dim, env)
        _check_expert_uses(cfg, has_expert(env))
        _check_demos(cfg, spec, action_dim)
        _check_success_key(cfg, env)
        _check_robot_success(cfg, getattr(env.unwrapped, "profile", None))
        check_robot = getattr(env.unwrapped, "check_robot", None)  # a robot env checks its profile on the live graph
        if check_robot is not None:
            check_robot()
    finally:
        env.close()
    _check_training_env(cfg)
    if cfg.runtime.transport == "ray":
        try:
            import ray  # noqa: F401  (optional: ray; is it installed?)
        except ImportError:
            raise ConfigError("runtime.transport: 'ray' needs Ray (pip install 'robot-rl[ray]')") from None
    if cfg.view.enabled and (problem := rerun_unusable()) is not None:
        raise ConfigError(f"view.enabled: {problem}")


def _check_agent(cfg: TrainConfig, spec: ObsSpec, action_dim: int) -> None:
    cls, agent_cfg = agent_class(cfg.agent.name), cfg.agent_config()
    try:
        cls.check_spaces(spec, action_dim, agent_cfg)
        build_agent(cfg, spec, action_dim, device="cpu")
    except (ValueError, TypeError, KeyError, FileNotFoundError) as exc:
        raise ConfigError(f"agent: {exc}") from None
    sampling = cls.sampling(agent_cfg)
    for group in sampling.needs:
        filled = {"online": True, "demos": bool(cfg.demos), "interventions": cfg.teleop.device != "none",
                  "prior": bool(cfg.demos) or cfg.teleop.device != "none"}[group]
        if not filled:
            raise ConfigError(f"demos: agent {cfg.agent.name!r} learns from the replay's {group!r} data, which this "
                              "run never fills: give demos (e.g. demos: [scripted:20], or a dataset path) or a "
                              "teleop device")
    encoder = getattr(agent_cfg, "encoder", None)
    if encoder is not None and encoder.pretrain_steps > 0 and spec.cameras and not cfg.demos:
        raise ConfigError("agent.encoder.pretrain_steps: the encoder pre-trains on the demos, and this run has none: "
                          "give demos (e.g. demos: [scripted:20]) or set agent.encoder.pretrain_steps 0")


def _check_base_policy(cfg: TrainConfig, spec: ObsSpec, action_dim: int, env: object) -> None:
    """The base policy loads (a server answers) and fits this env: action size, cameras, state size."""
    if not cfg.base_policy.path:
        return

    try:
        policy = load_policy(cfg.base_policy)
    except (ValueError, PolicyError, OSError) as exc:
        raise ConfigError(f"base_policy.path: {exc}") from None
    meta = policy.metadata
    policy.close()
    why = misfit(meta, spec.state_dim, spec.cameras, action_dim)
    if why:
        raise ConfigError(f"base_policy.path: {cfg.base_policy.path} {why} (env {cfg.env.id!r})")
    if cfg.execution.mode == "future" and state_predictor(env) is None:
        raise ConfigError(f"execution.mode: 'future' needs the env to predict its state (predict_state); env "
                          f"{cfg.env.id!r} has none: use 'async'")


def _check_expert_uses(cfg: TrainConfig, expert: bool) -> None:
    if expert:
        return
    why = f"env {cfg.env.id!r} has no scripted expert (expert_action); robot_rl's sim tasks have one"
    if cfg.runtime.warmup == "scripted":
        raise ConfigError(f"runtime.warmup: 'scripted' needs a scripted expert: {why}; use 'random'")
    if cfg.teleop.device == "scripted":
        raise ConfigError(f"teleop.device: 'scripted' (the scripted human) needs a scripted expert: {why}")
    for i, entry in enumerate(cfg.demos):
        if entry.startswith("scripted:"):
            raise ConfigError(f"demos[{i}]: {entry!r} records scripted-expert demos: {why}; give a recorded "
                              "dataset (robot-rl record-demos --device keyboard|gamepad|spacemouse)")


def _check_demos(cfg: TrainConfig, spec: ObsSpec, action_dim: int) -> None:
    for i, entry in enumerate(cfg.demos):
        if entry.startswith("scripted:"):
            n = entry.split(":", 1)[1]
            if not n.isdigit() or int(n) < 1:
                raise ConfigError(f"demos[{i}]: {entry!r} is neither a path nor 'scripted:<number of episodes>'")
            continue
        try:
            check_store(Path(entry), spec, action_dim)
        except ReplayStoreError as exc:
            raise ConfigError(f"demos[{i}]: {exc}") from None


SUCCESS_PROBE_STEPS = 5


def _check_success_key(cfg: TrainConfig, env: object) -> None:
    """A success key the user named that the env's ``info`` never carries (reset and the first steps, random
    actions; a robot is never moved here) is said loudly, with the keys it does carry: success would read 0."""
    key = cfg.env.success_key
    if key == EnvConfig.success_key or drives_hardware(env):
        return
    _, info = env.reset(seed=0)
    seen = set(info)
    for _ in range(SUCCESS_PROBE_STEPS):
        if key in seen:
            return
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        seen |= set(info)
        if terminated or truncated:
            break
    if key not in seen:
        log.warning("env.success_key %r is not in the info of %s's reset or first %d steps (keys seen: %s): "
                    "success will read 0 unless the env sets it only at an episode's end", key, cfg.env.id,
                    SUCCESS_PROBE_STEPS, ", ".join(sorted(seen)) or "none")


def _check_robot_success(cfg: TrainConfig, profile: object) -> None:
    """A robot profile whose success comes from a person's teleop button or the reward classifier needs that
    source in the run: else no episode of the run could ever succeed."""
    source = getattr(getattr(profile, "success", None), "source", None)
    if source == "teleop" and cfg.teleop.device == "none":
        raise ConfigError(f"teleop.device: profile {profile.name} takes success from the teleop device's success "
                          "button (success.source: teleop): set teleop.device (keyboard, gamepad, spacemouse, ros)")
    if source == "classifier" and not cfg.reward.path:
        raise ConfigError(f"reward.path: profile {profile.name} takes success from the reward classifier "
                          "(success.source: classifier): train one (robot-rl train-reward) and set reward.path")


def _check_replay_memory(cfg: TrainConfig, spec: ObsSpec, action_dim: int, available: int | None = None) -> None:
    """A replay with cameras larger than the RAM: one line with capacities that fit (four fifths of the available
    RAM, the partitions in their configured proportions), not the learner's MemoryError after the start-up."""
    available = available_ram() if available is None else available
    if not spec.cameras or available is None:
        return
    capacities = {name: getattr(cfg.replay, f"{name}_capacity") for name in PARTITIONS}
    row = RingStorage.bytes_needed(spec, action_dim, 1)
    need = row * sum(capacities.values())
    if need <= available:
        return
    scale = 0.8 * available / need
    def fitting(rows: int) -> int:  # whole thousands where there are thousands
        fit = int(rows * scale)
        return fit // 1000 * 1000 if fit >= 1000 else max(2, fit)

    fits = " ".join(f"--replay.{name}-capacity {fitting(c)}" for name, c in capacities.items())
    raise ConfigError(f"replay: {sum(capacities.values()):,} rows with cameras need {need / 2**30:.1f} GiB but "
                      f"{available / 2**30:.1f} GiB of RAM is available; capacities that fit: {fits}")


def _check_training_env(cfg: TrainConfig) -> None:
    """The learned reward sits on the training env only: build one with it (cameras and sizes are checked)."""
    if not cfg.reward.path:
        return
    try:
        make_env(cfg.env, stages=training_stages(cfg, teleop=False)).close()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
