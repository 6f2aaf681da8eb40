"""Evaluating a base policy on sim tasks: its chunks executed by a :class:`ChunkExecutor` inside the same
deterministic evaluation as trained agents (success, return, cycle time with CIs; videos)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.envs.contract import INSTRUCTION
from robot_rl.policies.base import BasePolicy, misfit
from robot_rl.policies.config import ExecutionConfig
from robot_rl.policies.executor import ChunkExecutor
from robot_rl.spaces import ObsSpec, action_dim_of


def state_predictor(env: Any) -> Any:
    """The env's ``predict_state(state, actions)`` (robot_rl's arm tasks and robot envs have one), or None."""
    return getattr(getattr(env, "unwrapped", env), "predict_state", None)


class ExecutorAgent:
    """A base policy with its executor, acting like an agent in :func:`robot_rl.runtime.evaluation.rollout`."""

    def __init__(self, policy: BasePolicy, execution: ExecutionConfig, env: Any, period_s: float | None = None):
        predict = state_predictor(env) if execution.mode == "future" else None
        self.executor = ChunkExecutor(policy, execution, period_s, predict)
        self.instruction = ""

    def begin_episode(self, info: Mapping[str, Any]) -> None:
        self.instruction = str(info.get(INSTRUCTION, ""))
        self.executor.reset()

    def act(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        return self.executor.step(obs, self.instruction).action

    def close(self) -> None:
        self.executor.close()


class ComposedAgent:
    """An agent that acts on a base policy's proposals (``uses_base``) together with the base's executor: acts on
    one observation like any agent, for evaluation (the actor does the same for its batch of envs)."""

    def __init__(self, agent: Any, policy: BasePolicy, execution: ExecutionConfig, env: Any) -> None:
        self.agent = agent
        self.base = ExecutorAgent(policy, execution, env)

    def begin_episode(self, info: Mapping[str, Any]) -> None:
        self.base.begin_episode(info)

    def act(self, obs: Mapping[str, Any], deterministic: bool = True) -> np.ndarray:
        step = self.base.executor.step(obs, self.base.instruction)
        return self.agent.act({**obs, "base_action": step.action, "chunk_index": np.int64(step.chunk_index)},
                              deterministic)

    def close(self) -> None:
        self.base.close()


def evaluation_agent(cfg: Any, agent: Any, env: Any) -> Any:
    """What a run's evaluation acts with: the agent, composed with the run's base policy (executed
    synchronously, chunked as the run executes it: evaluation measures the policy, not the latency) when the
    agent acts on one."""
    from robot_rl.agents.registry import uses_base
    from robot_rl.policies.loader import load_policy

    if not uses_base(cfg.agent):
        return agent
    # an agent that fine-tunes the base's weights acts with its own, current base
    base = agent.base_policy() if getattr(agent, "trains_base", False) else load_policy(cfg.base_policy)
    # the run's chunking (execute_steps, ensembling) without its timing: evaluation measures the policy
    return ComposedAgent(agent, base, dataclasses.replace(cfg.execution, mode="sync"), env)


def evaluate_policy(policy: BasePolicy, env_id: str, env_kwargs: Mapping[str, Any], episodes: int,
                    execution: ExecutionConfig | None = None, seed: int = 10_000,
                    video: str | Path | None = None, instruction: str = "") -> dict[str, Any]:
    """Success, return and cycle time of ``policy`` on ``episodes`` episodes of one task (episode i seeded
    ``seed + i``), plus the executor's counts."""
    from robot_rl.envs.config import EnvConfig
    from robot_rl.envs.make import make_env
    from robot_rl.runtime.evaluation import rollout, summarize
    from robot_rl.utils.video import write_video

    env = make_env(EnvConfig(id=env_id, kwargs=dict(env_kwargs), instruction=instruction),
                   render_mode="rgb_array" if video else None)
    spec = ObsSpec.from_space(env.observation_space)
    why = misfit(policy.metadata, spec.state_dim, spec.cameras, action_dim_of(env.action_space))
    if why:
        env.close()
        raise ValueError(f"policy {policy.metadata.name!r} {why} (env {env_id!r})")
    agent = ExecutorAgent(policy, execution or ExecutionConfig(mode="sync"), env)
    frames: list[np.ndarray] | None = [] if video else None
    try:
        out = rollout(agent, env, episodes, seed, frames)
        if frames:
            write_video(frames, video, fps=env.metadata.get("render_fps", 20))
    finally:
        agent.close()
        env.close()
    return {**summarize(**out), **{f"executor/{k}": v for k, v in agent.executor.stats().items()},
            "successes": out["successes"].tolist()}


def is_base_policy(path: str) -> bool:
    """Whether ``path`` names a base policy (a policy server or a saved policy folder) rather than a run."""
    return path.startswith(("ws://", "wss://", "lerobot:")) or (Path(path) / "policy.json").is_file()


def evaluate_base_policy(path: str, tasks: tuple[str, ...], env_kwargs: Mapping[str, Any], episodes: int,
                         base: Any, execution: ExecutionConfig, video_dir: str | None = None,
                         instruction: str = "") -> dict[str, Any]:
    """``robot-rl eval POLICY``: per task, the base policy's evaluation (the tasks it was trained on unless
    ``tasks`` names others)."""
    import dataclasses
    import json

    from robot_rl.datasets.record import resolve_env_id
    from robot_rl.policies.loader import load_policy

    policy = load_policy(dataclasses.replace(base, path=path))
    trained = []
    if (Path(path) / "policy.json").is_file():
        trained = json.loads((Path(path) / "policy.json").read_text()).get("tasks", [])
    if tasks:
        known = {t["env_id"]: t["env_kwargs"] for t in trained}
        todo = [(resolve_env_id(t), dict(env_kwargs) or known.get(resolve_env_id(t), {})) for t in tasks]
    elif trained:
        todo = [(t["env_id"], dict(env_kwargs) or t["env_kwargs"]) for t in trained]
    else:
        raise ValueError("name the tasks to evaluate on (--tasks): this policy does not say what it was trained on")
    out: dict[str, Any] = {}
    try:
        for env_id, kwargs in todo:
            name = env_id.split("/")[-1]
            video = Path(video_dir) / f"{name}.mp4" if video_dir else None
            if video is not None:
                video.parent.mkdir(parents=True, exist_ok=True)
            result = evaluate_policy(policy, env_id, kwargs, episodes, execution, video=video,
                                     instruction=instruction)
            result.pop("successes")
            out[name] = result
    finally:
        policy.close()
    return out
