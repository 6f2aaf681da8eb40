"""Agents by name: ``agent.name`` in a config selects the class; ``module:Class`` loads an agent of your own.

    from robot_rl.agents.registry import make_agent
    agent = make_agent(cfg.agent, obs_spec, action_dim, seed=0)
"""

from __future__ import annotations

from typing import Any

from robot_rl.agents.base import Agent, AgentConfig
from robot_rl.spaces import ObsSpec
from robot_rl.utils.imports import import_object

BUILTIN = {
    "sac": "robot_rl.agents.sac:SACAgent",
    "bc": "robot_rl.agents.behavior_cloning:BCAgent",
    "base": "robot_rl.agents.base_rollout:BaseRolloutAgent",
    "residual": "robot_rl.agents.residual:ResidualAgent",
    "ibrl": "robot_rl.agents.ibrl:IBRLAgent",
    "critic_guided": "robot_rl.agents.critic_guided:CriticGuidedAgent",
}
_registered: dict[str, type] = {}

REQUIRED = ("act", "update", "prepare", "policy_state", "load_policy_state", "state_dict", "load_state_dict",
            "check_spaces", "sampling")


def register_agent(cls: type, name: str | None = None) -> type:
    """Makes ``cls`` selectable as ``agent.name: <name>`` (default ``cls.name``); usable as a decorator."""
    check_agent_class(cls, repr(cls))
    _registered[name or cls.name] = cls
    return cls


def registered_names() -> list[str]:
    return sorted({*BUILTIN, *_registered})


def check_agent_class(cls: Any, what: str) -> None:
    missing = [m for m in REQUIRED if not callable(getattr(cls, m, None))]
    config = getattr(cls, "config_class", None)
    if missing:
        raise ValueError(f"{what} is not an agent: it lacks {', '.join(missing)} (see robot_rl.agents.base)")
    if not (isinstance(config, type) and issubclass(config, AgentConfig)):
        raise ValueError(f"{what}: config_class must be a dataclass deriving from robot_rl.agents.base.AgentConfig")


def agent_class(name: str) -> type:
    """The class ``agent.name`` selects; ``ValueError`` naming the known agents otherwise."""
    if name in _registered:
        return _registered[name]
    if name in BUILTIN:
        return import_object(BUILTIN[name], "agent")
    if ":" not in name:
        raise ValueError(f"unknown agent {name!r}; registered: {', '.join(registered_names())}, or give "
                         "'module:Class' for an agent of your own")
    cls = import_object(name, "agent")
    check_agent_class(cls, f"agent {name!r}")
    return cls


def config_class(name: str) -> type[AgentConfig]:
    return agent_class(name).config_class


def make_agent(cfg: AgentConfig, obs_spec: ObsSpec, action_dim: int, seed: int = 0) -> Agent:
    """The agent ``cfg.name`` selects, built for these spaces."""
    cls = agent_class(cfg.name)
    if not isinstance(cfg, cls.config_class):
        raise TypeError(f"agent {cfg.name!r} takes a {cls.config_class.__name__}, got {type(cfg).__name__}")
    return cls(obs_spec, action_dim, cfg, seed=seed)


def uses_base(cfg: AgentConfig) -> bool:
    """Whether the agent ``cfg.name`` acts on a base policy's proposals (``uses_base`` class attribute)."""
    return bool(getattr(agent_class(cfg.name), "uses_base", False))
