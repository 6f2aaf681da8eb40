"""A run's agent: the one its config names, built for the env's spaces, with the base policy loaded for an agent
that fine-tunes it. Every process of a run (learner, actors, gateway), the preflight, evaluation, export and
distillation build it here."""

from __future__ import annotations

import dataclasses

from robot_rl.agents.base import Agent, agent_class, capabilities
from robot_rl.agents.registry import make_agent
from robot_rl.policies.config import BasePolicyConfig
from robot_rl.policies.loader import load_policy
from robot_rl.spaces import ObsSpec
from robot_rl.training.config import TrainConfig


def build_agent(cfg: TrainConfig, obs_spec: ObsSpec, action_dim: int, seed: int = 0,
                device: str | None = None) -> Agent:
    """``cfg``'s agent (on ``device`` instead of its own where given); a ``trains_base`` agent gets the base at its
    config's ``base_path`` (the run's ``base_policy.path``), loaded on the agent's device."""
    agent_cfg = cfg.agent_config()
    if device is not None:
        agent_cfg = dataclasses.replace(agent_cfg, device=device)
    cls, base = agent_class(agent_cfg.name), None
    if capabilities(cls).trains_base:
        cls.check_spaces(obs_spec, action_dim, agent_cfg)  # a clear error before a slow load of the wrong thing
        base = load_policy(BasePolicyConfig(path=agent_cfg.base_path, device=agent_cfg.device))
    return make_agent(agent_cfg, obs_spec, action_dim, seed, base=base)
