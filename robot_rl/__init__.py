"""robot_rl: sample-efficient off-policy RL for robots, the same code in simulation and on hardware."""

__version__ = "0.1.0"
