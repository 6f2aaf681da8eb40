"""A base policy acting like an agent: its chunks executed by a :class:`ChunkExecutor` (:class:`ExecutorAgent`), or
an agent on a base policy's proposals (:class:`ComposedAgent`), so the same deterministic evaluation as for trained
agents runs them (robot_rl.training.evaluation: ``evaluate_policy``, ``evaluate_base_policy``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robot_rl.envs.contract import INSTRUCTION
from robot_rl.policies.base import BasePolicy
from robot_rl.policies.config import ExecutionConfig
from robot_rl.policies.executor import ChunkExecutor


def state_predictor(env: Any) -> Any:
    """The env's ``predict_state(state, actions)`` (robot_rl's arm tasks and robot envs have one), or None."""
    return getattr(getattr(env, "unwrapped", env), "predict_state", None)


class ExecutorAgent:
    """A base policy with its executor, acting like an agent in :func:`robot_rl.training.evaluation.rollout`."""

    episodic: ClassVar[bool] = True  # begin_episode resets the executor (robot_rl.agents.base.Capabilities)

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

    episodic: ClassVar[bool] = True

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


def is_base_policy(path: str) -> bool:
    """Whether ``path`` names a base policy (a policy server or a saved policy folder) rather than a run."""
    return path.startswith(("ws://", "wss://", "lerobot:")) or (Path(path) / "policy.json").is_file()
