"""The base policy alone, as an agent (``agent.name: base``): the actor executes the base policy's chunks
(``base_policy``, ``execution``) and this agent passes its proposal through; the learner learns nothing and only
stores the rollouts (with the base's proposals and chunk indices), e.g. as prior data for fine-tuning, or to
measure a base policy through the full runtime (ROS 2 robot, interventions, crash-safe logging).

It shows the part of the algorithm contract that base-policy agents use: ``uses_base = True`` makes the actor
put the base's proposal for each env into the observation it acts on (``obs["base_action"] [N, A]``, and
``obs["chunk_index"] [N]``, -1 on a step the robot held because the next chunk was late).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from robot_rl.agents.base import AgentConfig, Sampling
from robot_rl.spaces import ObsSpec

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer


@dataclass(frozen=True)
class BaseRolloutConfig(AgentConfig):
    """The base policy as it is: nothing to configure but the name."""

    name: str = "base"
    """Which agent (``base`` here; see AgentConfig)."""


class BaseRolloutAgent:
    """Acts with the base policy's proposal; ``update`` learns nothing."""

    name: ClassVar[str] = "base"
    config_class: ClassVar[type[BaseRolloutConfig]] = BaseRolloutConfig
    uses_base: ClassVar[bool] = True

    def __init__(self, obs_spec: ObsSpec, action_dim: int, cfg: BaseRolloutConfig | None = None,
                 seed: int = 0) -> None:
        self.cfg = cfg or BaseRolloutConfig()
        self.obs_spec, self.action_dim = obs_spec, action_dim
        self.updates = 0

    @classmethod
    def check_spaces(cls, obs_spec: ObsSpec, action_dim: int, cfg: BaseRolloutConfig) -> None:
        """Any spaces: the base policy's own checks apply (preflight)."""

    @classmethod
    def sampling(cls, cfg: BaseRolloutConfig) -> Sampling:
        return Sampling(batch_size=1)

    def prepare(self, replay: ReplayBuffer) -> None:
        pass

    def act(self, obs: Mapping[str, Any], deterministic: bool = False) -> np.ndarray:
        if "base_action" not in obs:
            raise ValueError("agent 'base' acts with the base policy's proposal: set base_policy.path")
        return np.asarray(obs["base_action"], np.float32)

    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        self.updates += 1
        return {}

    def policy_state(self) -> dict[str, torch.Tensor]:
        return {"updates": torch.tensor([self.updates], dtype=torch.int64)}

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.updates = int(state["updates"])
