"""Environment construction and wrappers that make any gymnasium env speak the robot_rl contract."""

from robot_rl.envs.make import EnvConfig, make_env
from robot_rl.envs.wrappers import StateDictObservation

__all__ = ["EnvConfig", "StateDictObservation", "make_env"]
