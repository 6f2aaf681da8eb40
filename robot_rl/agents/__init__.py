"""Agents: SAC with the RLPD recipe."""

from robot_rl.agents.config import EncoderConfig, SACConfig
from robot_rl.agents.sac import SACAgent

__all__ = ["EncoderConfig", "SACAgent", "SACConfig"]
