"""Batching, the last stage of the env pipeline: N envs stepped as one, Isaac-Gym style, plus a gymnasium
VectorEnv view.

``BatchedEnv`` steps N env instances on a thread pool (MuJoCo releases the GIL inside ``mj_step``), writes
observations into preallocated batched arrays and auto-resets finished envs in the same step: the returned
observation of a finished env is its new episode's first one, and the final one is kept beside it. Any gymnasium
env works; each env's step is read through the env -> actor contract (:mod:`robot_rl.envs.contract`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from robot_rl.envs.contract import INSTRUCTION, BatchStep, OperatorState, StepReport
from robot_rl.envs.registration import register_builtin


def _alloc(space: gym.Space, n: int) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {k: _alloc(s, n) for k, s in space.spaces.items()}
    return np.zeros((n, *space.shape), space.dtype)


def _write(dst: Any, i: int, src: Any) -> None:
    if isinstance(dst, dict):
        for k in dst:
            _write(dst[k], i, src[k])
    else:
        dst[i] = src


def _to_torch(tree: Any, device: str) -> Any:
    import torch  # lazy: only for torch output; the envs load no torch

    if isinstance(tree, dict):
        return {k: _to_torch(v, device) for k, v in tree.items()}
    return torch.from_numpy(tree).to(device)


class BatchedEnv:
    """N envs as one: ``reset() -> obs[N, ...]``, ``step(actions[N, A]) -> obs, reward[N], terminated[N],
    truncated[N], info``.

    Returned arrays live in two alternating buffer sets: the observation of step t stays valid while step t + 1
    runs, and is overwritten by step t + 2 (copy what you keep longer). :meth:`step_batch` returns the typed
    :class:`~robot_rl.envs.contract.BatchStep`; :meth:`step` the same as ``obs, reward, terminated, truncated,
    info`` with ``info = BatchStep.info()``.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], num_threads: int | None = None,
                 as_torch: bool = False, device: str = "cpu") -> None:
        if not env_fns:
            raise ValueError("BatchedEnv needs at least one env")
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.as_torch, self.device = as_torch, device
        threads = min(num_threads or os.cpu_count() or 1, self.num_envs)
        # Env i always runs on worker i % threads: an EGL rendering context can only be current on one thread.
        self._workers = [ThreadPoolExecutor(1) for _ in range(threads)] if threads > 1 else []
        self._obs = [_alloc(self.single_observation_space, self.num_envs) for _ in range(2)]
        self._final_obs = [_alloc(self.single_observation_space, self.num_envs) for _ in range(2)]
        self._flip = 0
        self._reward = np.zeros(self.num_envs, np.float32)
        self._terminated = np.zeros(self.num_envs, bool)
        self._truncated = np.zeros(self.num_envs, bool)
        self._success = np.zeros(self.num_envs, bool)
        self._intervened = np.zeros(self.num_envs, bool)
        self._paused = np.zeros(self.num_envs, bool)
        self._executed = np.zeros((self.num_envs, *self.single_action_space.shape), np.float32)
        self.instructions = [""] * self.num_envs
        """Env i's current instruction text (its observation holds the embedding; '' = none)."""
        self._operator: list[OperatorState | None] = [None] * self.num_envs

    def _map(self, fn: Callable[[int], Any]) -> list[Any]:
        if not self._workers:
            return [fn(i) for i in range(self.num_envs)]
        k = len(self._workers)

        def run_share(w: int) -> list[Any]:
            return [fn(i) for i in range(w, self.num_envs, k)]
        shares = [f.result() for f in [self._workers[w].submit(run_share, w) for w in range(k)]]
        out: list[Any] = [None] * self.num_envs
        for w, results in enumerate(shares):
            out[w::k] = results
        return out

    def _out(self, tree: Any) -> Any:
        return _to_torch(tree, self.device) if self.as_torch else tree

    def reset(self, seed: int | None = None) -> Any:
        """Resets every env (env i with ``seed + i``) and returns the batched first observations."""
        self._flip ^= 1
        obs = self._obs[self._flip]

        def reset_one(i: int) -> None:
            o, info = self.envs[i].reset(seed=None if seed is None else seed + i)
            self.instructions[i] = info.get(INSTRUCTION, "")
            _write(obs, i, o)
        self._map(reset_one)
        return self._out(obs)

    def step_batch(self, actions: Any) -> BatchStep:
        """Steps every env with its row of ``actions [N, A]`` (numpy or torch); auto-resets finished ones."""
        actions = actions.detach().cpu().numpy() if hasattr(actions, "detach") else np.asarray(actions)
        if actions.shape != (self.num_envs, *self.single_action_space.shape):
            raise ValueError(f"actions must be [{self.num_envs}, {self.single_action_space.shape}], "
                             f"got {actions.shape}")
        self._flip ^= 1
        obs, final_obs = self._obs[self._flip], self._final_obs[self._flip]
        final_info: list[dict | None] = [None] * self.num_envs

        def step_one(i: int) -> None:
            o, r, term, trunc, info = self.envs[i].step(actions[i])
            report = StepReport.from_info(info, actions[i])
            self._reward[i], self._terminated[i], self._truncated[i] = r, term, trunc
            self._success[i], self._intervened[i], self._paused[i] = report.success, report.intervened, report.paused
            self._executed[i] = report.executed_action
            self._operator[i] = report.operator
            if term or trunc:
                _write(final_obs, i, o)
                final_info[i] = info
                o, info = self.envs[i].reset()
            self.instructions[i] = info.get(INSTRUCTION, "")
            _write(obs, i, o)
        self._map(step_one)
        return BatchStep(obs=self._out(obs), reward=self._reward.copy(), terminated=self._terminated.copy(),
                         truncated=self._truncated.copy(), final_obs=self._out(final_obs), final_info=final_info,
                         success=self._success.copy(), intervened=self._intervened.copy(),
                         paused=self._paused.copy(), executed_action=self._executed.copy(),
                         instruction=tuple(self.instructions),
                         operator=tuple(self._operator) if any(o is not None for o in self._operator) else ())

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """``obs, reward [N], terminated [N], truncated [N], info`` (see :meth:`step_batch`)."""
        b = self.step_batch(actions)
        return b.obs, self._out(b.reward), self._out(b.terminated), self._out(b.truncated), b.info()

    def expert_actions(self, noise: float) -> np.ndarray:
        """``[N, A]`` actions of each env's scripted expert (envs that have one: ``env.unwrapped.expert_action``)."""
        return np.stack([e.unwrapped.expert_action(noise) for e in self.envs]).astype(np.float32)

    def render(self, camera: str, size: int) -> np.ndarray:
        """``[N, size, size, 3]`` frames of ``camera`` from every env (tasks derived from MujocoTaskEnv)."""
        frames = self._map(lambda i: self.envs[i].unwrapped.render_camera(camera, size).copy())
        return np.stack(frames)

    def close(self) -> None:
        if self._workers:  # close each env on its own thread (its rendering context lives there)
            self._map(lambda i: self.envs[i].close())
            for worker in self._workers:
                worker.shutdown(wait=True)
            self._workers = []
        else:
            for env in self.envs:
                env.close()


def make_batched(task_id: str, num_envs: int, num_threads: int | None = None, as_torch: bool = False,
                 **kwargs: Any) -> BatchedEnv:
    """``num_envs`` copies of ``gym.make(task_id, **kwargs)`` as one BatchedEnv (no adaptation: the env as it is;
    a run's envs come from :func:`robot_rl.envs.make.make_batched_env`)."""
    register_builtin(task_id)
    return BatchedEnv([lambda: gym.make(task_id, **kwargs) for _ in range(num_envs)], num_threads, as_torch)


class BatchedVectorEnv(VectorEnv):
    """gymnasium ``VectorEnv`` view of a BatchedEnv (autoreset mode SAME_STEP: ``infos["final_obs"]`` and
    ``infos["final_info"]`` carry the finished episodes' last observation/info)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, batched: BatchedEnv) -> None:
        self.batched = batched
        self.num_envs = batched.num_envs
        self.single_observation_space = batched.single_observation_space
        self.single_action_space = batched.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if isinstance(seed, list):
            seed = seed[0]
        return self.batched.reset(seed), {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        obs, reward, terminated, truncated, info = self.batched.step(actions)
        infos = {"is_success": info["is_success"], "final_obs": info["final_obs"],
                 "final_info": info["final_info"], "_final_obs": info["done"], "_final_info": info["done"]}
        return obs, reward, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        self.batched.close()
