"""The env pipeline: every env of robot_rl (training, evaluation, demos) is built here, in one order:

1. **make** - ``env.imports`` are imported, then ``gymnasium.make(env.id, **env.kwargs)`` (an env class named by
   ``module:Class`` is made through a gymnasium spec, with the usual checker and time limit);
2. **your wrappers** - ``env.wrappers``, in order;
3. **contract adapter** - observation map, action scaled to [-1, 1], ``info`` keys, tiled ``render()``
   (:mod:`robot_rl.envs.adapter`);
4. **reward override** - the learned reward classifier when ``reward.path`` is set (training envs only);
5. **teleop** - the intervention wrapper when ``teleop.device`` is set (training envs only);
6. **batching** - the actor's ``runtime.num_envs`` envs as one :class:`~robot_rl.envs.batched.BatchedEnv`.

Every stage that fails raises ``ValueError`` naming the config field, so ``robot-rl train`` can refuse a bad
config before it starts any process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from robot_rl.envs.adapter import ContractAdapter
from robot_rl.envs.config import EnvConfig
from robot_rl.utils.imports import import_object, load_imports

if TYPE_CHECKING:
    from robot_rl.envs.batched import BatchedEnv
    from robot_rl.rewards.wrapper import ClassifierRewardConfig
    from robot_rl.teleop.config import TeleopConfig


def register_builtin(env_id: str) -> None:
    """Registers robot_rl's own sim tasks when ``env_id`` names one."""
    if env_id.startswith("robot_rl/"):
        import robot_rl_sim  # noqa: F401  (registers the sim tasks)


def _told_time_limit(env: gym.Env, cfg: EnvConfig) -> gym.Env:
    """An env with a ``time_limit`` attribute learns the TimeLimit wrapper's ``max_episode_steps`` (it must know
    where its episodes end, e.g. to close a recording)."""
    if hasattr(env.unwrapped, "time_limit"):
        env.unwrapped.time_limit = cfg.max_episode_steps
    return env


def _make_raw(cfg: EnvConfig, render_mode: str | None, extra_kwargs: dict[str, Any]) -> gym.Env:
    load_imports(cfg.imports, "env.imports")
    register_builtin(cfg.id)
    kwargs = {**cfg.kwargs, **extra_kwargs}
    try:
        return _told_time_limit(gym.make(cfg.id, max_episode_steps=cfg.max_episode_steps, render_mode=render_mode,
                                         **kwargs), cfg)
    except gym.error.Error as exc:
        if ":" not in cfg.id:
            raise ValueError(f"env.id: cannot make {cfg.id!r}: {exc}") from exc
        error = exc
    except TypeError as exc:  # the env's constructor refused a keyword
        raise ValueError(f"env.kwargs: {cfg.id!r} does not take {sorted(kwargs)}: {exc}") from exc
    try:  # module:Class of an env registered nowhere
        entry = import_object(cfg.id, "env.id")
    except ValueError:
        raise ValueError(f"env.id: cannot make {cfg.id!r}: {error}") from error
    if not callable(entry):
        raise ValueError(f"env.id: {cfg.id!r} is neither a registered id nor an env class")
    spec = gym.envs.registration.EnvSpec(id=cfg.id.replace(":", "."), entry_point=entry,
                                         max_episode_steps=cfg.max_episode_steps)
    try:
        return _told_time_limit(gym.make(spec, render_mode=render_mode, **kwargs), cfg)
    except TypeError as exc:
        raise ValueError(f"env.kwargs: {cfg.id!r} does not take {sorted(kwargs)}: {exc}") from exc


def _user_wrappers(env: gym.Env, cfg: EnvConfig) -> gym.Env:
    for i, wrapper in enumerate(cfg.wrappers):
        make = import_object(wrapper.target, f"env.wrappers[{i}]")
        try:
            env = make(env, **wrapper.kwargs)
        except Exception as exc:  # noqa: BLE001 - the user's wrapper refused: say which
            raise ValueError(f"env.wrappers[{i}]: {wrapper.target}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(env, gym.Env):
            raise ValueError(f"env.wrappers[{i}]: {wrapper.target} returned {type(env).__name__}, not a gymnasium env")
    return env


def make_env(cfg: EnvConfig, render_mode: str | None = None, *, reward: ClassifierRewardConfig | None = None,
             teleop: TeleopConfig | None = None, teleop_seed: int = 0) -> gym.Env:
    """One env through stages 1-5 (evaluation and demos: no ``reward`` and no ``teleop``)."""
    cfg.validate()
    learned_reward = reward is not None and bool(reward.path)
    # A learned reward decides success: a robot_rl task must not end episodes on its own success check.
    extra = {"terminate_on_success": False} if learned_reward and cfg.id.startswith("robot_rl/") else {}
    env = _make_raw(cfg, render_mode, extra)
    env = _user_wrappers(env, cfg)
    env = ContractAdapter(env, cfg)
    if learned_reward:
        from robot_rl.rewards.wrapper import ClassifierReward

        try:
            env = ClassifierReward(env, reward.path, reward)
        except (ValueError, FileNotFoundError, KeyError) as exc:
            raise ValueError(f"reward.path: {exc}") from exc
    if teleop is not None and teleop.device != "none":
        from robot_rl.teleop.intervention import wrap_with_teleop

        env = wrap_with_teleop(env, teleop, seed=teleop_seed)
    return env


def make_batched_env(cfg: EnvConfig, num_envs: int, *, reward: ClassifierRewardConfig | None = None,
                     teleop: TeleopConfig | None = None, teleop_seeds: Sequence[int] = ()) -> BatchedEnv:
    """Stage 6: ``num_envs`` training envs as one batched env (env i's scripted human seeded ``teleop_seeds[i]``)."""
    from robot_rl.envs.batched import BatchedEnv

    seeds = list(teleop_seeds) or list(range(num_envs))
    return BatchedEnv([lambda i=i: make_env(cfg, reward=reward, teleop=teleop, teleop_seed=seeds[i])
                       for i in range(num_envs)])


def has_expert(env: gym.Env) -> bool:
    """Whether the env has a scripted expert (``expert_action(noise)``; robot_rl's sim tasks do)."""
    return callable(getattr(env.unwrapped, "expert_action", None))
