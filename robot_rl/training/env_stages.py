"""Which stages of the env pipeline (robot_rl.envs.make) a training run and an evaluation add after the contract
adapter: the learned reward (``reward.path``) and the teleop device (``teleop.device``)."""

from __future__ import annotations

from robot_rl.envs.make import Stage
from robot_rl.rewards.wrapper import reward_stage
from robot_rl.teleop.intervention import teleop_stage
from robot_rl.training.config import TrainConfig


def training_stages(cfg: TrainConfig, teleop_seed: int = 0, *, teleop: bool = True) -> list[Stage]:
    """A training env's: the learned reward when ``reward.path`` is set, then (``teleop``) the intervention wrapper
    when ``teleop.device`` is set, its scripted human offset by ``teleop_seed``."""
    stages = [reward_stage(cfg.reward, cfg.env.id)] if cfg.reward.path else []
    if teleop and cfg.teleop.device != "none":
        stages.append(teleop_stage(cfg.teleop, teleop_seed))
    return stages


def evaluation_stages(cfg: TrainConfig) -> list[Stage]:
    """An evaluation env's: a robot trained with a learned reward is judged by that classifier, as in training; a
    sim by its own success check."""
    return [reward_stage(cfg.reward, cfg.env.id, hardware_only=True)] if cfg.reward.path else []
