"""The env pipeline: every env of robot_rl (training, evaluation, demos, the preflight) is built here, in one order
of named stages (:data:`STAGES`):

1. **make** - ``env.imports`` are imported, then ``gymnasium.make(env.id, **env.kwargs)`` (an env class named by
   ``module:Class`` is made through a gymnasium spec, with the usual checker and time limit);
2. **your wrappers** - ``env.wrappers``, in order;
3. **contract adapter** - observation map, action scaled to [-1, 1], ``info`` keys, tiled ``render()``
   (:mod:`robot_rl.envs.adapter`);
4. **reward** - the learned reward classifier when ``reward.path`` is set (robot_rl.rewards.wrapper.reward_stage);
5. **teleop** - the intervention wrapper when ``teleop.device`` is set (robot_rl.teleop.intervention.teleop_stage);
6. **batch** - the actor's ``runtime.num_envs`` envs as one :class:`~robot_rl.envs.batched.BatchedEnv`
   (:func:`make_batched_env`).

Stages 4 and 5 wrap envs in packages above envs in the layers: they come in as :class:`Stage` values (a name and
a wrap function), and :func:`make_env` puts them in their place; robot_rl.training.env_stages says which a training
run and an evaluation add.

Every stage that fails raises ``ValueError`` naming the config field, so ``robot-rl train`` can refuse a bad
config before it starts any process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from robot_rl.envs.adapter import ContractAdapter
from robot_rl.envs.batched import BatchedEnv
from robot_rl.envs.config import EnvConfig
from robot_rl.envs.registration import register_builtin
from robot_rl.utils.imports import import_object, load_imports

STAGES = ("make", "wrappers", "adapter", "reward", "teleop", "batch")
"""The pipeline's stages, in the order every env goes through them."""
ADDED_STAGES = ("reward", "teleop")
"""The stages a caller adds as :class:`Stage` values (the others are built here)."""


@dataclass(frozen=True)
class Stage:
    """A stage after the contract adapter that a package above envs supplies."""

    name: str
    """Which stage (one of :data:`ADDED_STAGES`): it places the stage in the pipeline."""
    wrap: Callable[[gym.Env], gym.Env]
    """The env through this stage (raises ValueError naming the config field when it cannot be built)."""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """What the stage needs of the env's constructor (e.g. a learned reward decides success, so a robot_rl task
    must not end episodes on its own success check)."""


def _ordered(stages: Sequence[Stage]) -> list[Stage]:
    names = [s.name for s in stages]
    unknown = sorted(set(names) - set(ADDED_STAGES))
    if unknown or len(set(names)) != len(names):
        raise ValueError(f"env pipeline: stages {names}: each of {list(ADDED_STAGES)} at most once")
    return sorted(stages, key=lambda s: ADDED_STAGES.index(s.name))


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


def make_env(cfg: EnvConfig, render_mode: str | None = None, *, stages: Sequence[Stage] = ()) -> gym.Env:
    """One env through stages 1-3 and the ``stages`` given (reward, teleop), in :data:`STAGES` order."""
    cfg.validate()
    added = _ordered(stages)
    kwargs: dict[str, Any] = {}
    for stage in added:
        kwargs.update(stage.env_kwargs)
    env = _make_raw(cfg, render_mode, kwargs)
    env = _user_wrappers(env, cfg)
    env = ContractAdapter(env, cfg)
    for stage in added:
        env = stage.wrap(env)
    return env


def make_batched_env(cfg: EnvConfig, num_envs: int,
                     stages: Callable[[int], Sequence[Stage]] = lambda i: ()) -> BatchedEnv:
    """Stage 6: ``num_envs`` envs (env ``i`` with ``stages(i)``) as one batched env."""
    return BatchedEnv([lambda i=i: make_env(cfg, stages=stages(i)) for i in range(num_envs)])


def has_expert(env: gym.Env) -> bool:
    """Whether the env has a scripted expert (``expert_action(noise)``; robot_rl's sim tasks do)."""
    return callable(getattr(env.unwrapped, "expert_action", None))
