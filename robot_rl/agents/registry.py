"""Agents by name: ``agent.name`` in a config selects the class; ``module:Class`` loads an agent of your own. The
name lookup itself (``BUILTIN``, :func:`register_agent`, :func:`agent_class`) and the optional capabilities an agent
class declares (:func:`capabilities`) are defined in robot_rl.agents.base, beside ``AgentConfig`` which resolves its
subclass through it, and re-exported here.

    from robot_rl.agents.registry import make_agent
    agent = make_agent(cfg.agent, obs_spec, action_dim, seed=0)
"""

from __future__ import annotations

from typing import Any

from robot_rl.agents.base import (
    BUILTIN,
    REQUIRED,
    Agent,
    AgentConfig,
    Capabilities,
    agent_class,
    capabilities,
    check_agent_class,
    config_class,
    register_agent,
    registered_names,
)
from robot_rl.spaces import ObsSpec

__all__ = ["BUILTIN", "REQUIRED", "Capabilities", "agent_class", "capabilities", "check_agent_class", "config_class",
           "make_agent", "register_agent", "registered_names", "uses_base"]

def make_agent(cfg: AgentConfig, obs_spec: ObsSpec, action_dim: int, seed: int = 0, *, base: Any = None) -> Agent:
    """The agent ``cfg.name`` selects, built for these spaces; ``base``: the loaded base policy an agent that
    fine-tunes it (``trains_base``) is built with (a run's: robot_rl.training.agents.build_agent)."""
    cls = agent_class(cfg.name)
    if not isinstance(cfg, cls.config_class):
        raise TypeError(f"agent {cfg.name!r} takes a {cls.config_class.__name__}, got {type(cfg).__name__}")
    if capabilities(cls).trains_base:
        return cls(obs_spec, action_dim, cfg, seed=seed, base=base)
    return cls(obs_spec, action_dim, cfg, seed=seed)


def uses_base(cfg: AgentConfig) -> bool:
    """Whether the agent ``cfg.name`` acts on a base policy's proposals (its declared ``uses_base``)."""
    return capabilities(agent_class(cfg.name)).uses_base
