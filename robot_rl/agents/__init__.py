"""Agents behind one contract (robot_rl.agents.base): SAC with the RLPD recipe, behaviour cloning, and any agent
of your own selected by ``agent.name: module:Class``."""

from robot_rl.agents.base import Agent, AgentConfig, Sampling
from robot_rl.agents.behavior_cloning import BCAgent, BCConfig
from robot_rl.agents.config import EncoderConfig, SACConfig
from robot_rl.agents.registry import agent_class, make_agent, register_agent
from robot_rl.agents.sac import SACAgent

__all__ = ["Agent", "AgentConfig", "BCAgent", "BCConfig", "EncoderConfig", "SACAgent", "SACConfig", "Sampling",
           "agent_class", "make_agent", "register_agent"]
