"""The env pipeline: every env of robot_rl (training, evaluation, demos) is built here, in one order:

1. **make** - ``env.imports`` are imported, then ``gymnasium.make(env.id, **env.kwargs)`` (an env class named by
   ``module:Class`` is made through a gymnasium spec, with the usual checker and time limit);
2. **your wrappers** - ``env.wrappers``, in order;
3. **contract adapter** - observation map, action scaled to [-1, 1], ``info`` keys, tiled ``render()``
   (:mod:`robot_rl.envs.adapter`);
4. **reward override** - the learned reward classifier when ``reward.path`` is set (training envs only);
5. **teleop** - the intervention wrapper when ``teleop.device`` is set (training envs only);
6. **batching** - the actor's ``runtime.num_envs`` envs as one :class:`~robot_rl.envs.batched.BatchedEnv`.

Stages 1-3 are here (:func:`make_env`); stages 4-6 wrap envs in robot_rl.rewards and robot_rl.teleop, which sit
above envs in the package layers, and are in :mod:`robot_rl.runtime.env_pipeline`.

Every stage that fails raises ``ValueError`` naming the config field, so ``robot-rl train`` can refuse a bad
config before it starts any process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from robot_rl.envs.adapter import ContractAdapter
from robot_rl.envs.config import EnvConfig
from robot_rl.envs.registration import register_builtin
from robot_rl.utils.imports import import_object, load_imports


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


def make_env(cfg: EnvConfig, render_mode: str | None = None, *,
             extra_kwargs: Mapping[str, Any] | None = None) -> gym.Env:
    """One env through stages 1-3 (evaluation, demos; a training run adds stages 4-6 in
    robot_rl.runtime.env_pipeline). ``extra_kwargs`` go to the env's constructor on top of ``env.kwargs``."""
    cfg.validate()
    env = _make_raw(cfg, render_mode, dict(extra_kwargs or {}))
    env = _user_wrappers(env, cfg)
    return ContractAdapter(env, cfg)


def has_expert(env: gym.Env) -> bool:
    """Whether the env has a scripted expert (``expert_action(noise)``; robot_rl's sim tasks do)."""
    return callable(getattr(env.unwrapped, "expert_action", None))
