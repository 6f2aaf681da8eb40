"""The env pipeline (robot_rl.envs.make) and the contract every env is adapted to (robot_rl.envs.contract)."""

from robot_rl.envs.config import EnvConfig, ObsMapConfig, WrapperConfig
from robot_rl.envs.make import has_expert, make_env

__all__ = ["EnvConfig", "ObsMapConfig", "WrapperConfig", "has_expert", "make_env"]
