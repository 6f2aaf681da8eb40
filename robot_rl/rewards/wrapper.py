"""The trained success classifier as the env's reward and termination (HIL-SERL's learned reward).

Each step the classifier scores the observation's camera frames. A step is *positive* when the probability
reaches the threshold; the step is a *success* when the last ``consecutive`` steps were all positive (one noisy
frame then cannot end an episode with a false reward). On success the reward is ``success_reward`` (else 0) and,
with ``terminate_on_success``, the episode ends (``terminated``). The env's own termination (e.g. the cube fell
off the table) still ends the episode; a sim task should be made with ``terminate_on_success=False`` so that its
ground-truth check does not end episodes behind the classifier's back.

``info`` carries ``is_success`` (the classifier's decision, what training sees), ``reward_classifier_prob``,
``reward_classifier_streak`` (consecutive positives), and, for comparison, the env's own ``env_reward`` and
``env_is_success`` (None where the env reports none, e.g. a real robot).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.envs.contract import drives_hardware
from robot_rl.envs.make import Stage
from robot_rl.rewards.classifier import RewardClassifier, load_classifier


@dataclass(frozen=True)
class ClassifierRewardConfig:
    """How a trained reward classifier replaces the env's reward and termination."""

    path: str = ""
    """Folder written by ``robot-rl train-reward`` (model.safetensors + classifier.json)."""
    consecutive: int = 1
    """Successive positive frames required before a step counts as a success (1: the first positive)."""
    threshold: float | None = None
    """Decision threshold on the success probability; None = the one calibrated at training."""
    success_reward: float = 1.0
    """Reward of a success step; every other step gets 0."""
    terminate_on_success: bool = True
    """End the episode (terminated=True) at the first success."""
    device: str = "cpu"
    """Torch device the classifier runs on."""

    def validate(self) -> None:
        if self.consecutive < 1:
            raise ValueError(f"reward classifier: consecutive must be >= 1, got {self.consecutive}")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"reward classifier: threshold must be in [0, 1], got {self.threshold}")


class ClassifierReward(gym.Wrapper):
    """Reward = the classifier's success (optionally after k consecutive positives); terminated on success."""

    def __init__(self, env: gym.Env, classifier: RewardClassifier | str | Path,
                 cfg: ClassifierRewardConfig | None = None) -> None:
        super().__init__(env)
        self.cfg = cfg or ClassifierRewardConfig()
        self.cfg.validate()
        if isinstance(classifier, (str, Path)):
            classifier = load_classifier(classifier, self.cfg.device)
        self.classifier = classifier.eval()
        self.threshold = float(classifier.threshold) if self.cfg.threshold is None else float(self.cfg.threshold)
        _check_cameras(env.observation_space, classifier)
        self.streak = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self.streak = 0
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        if getattr(self.env.unwrapped, "holding", False):  # a held period (envs/held.py): no frame of the episode
            return obs, 0.0, terminated, truncated, info
        prob = float(self.classifier.predict_proba(obs["pixels"])[0])
        self.streak = self.streak + 1 if prob >= self.threshold else 0
        success = self.streak >= self.cfg.consecutive
        info = dict(info)
        info["env_reward"] = float(env_reward)
        info["env_is_success"] = info.get("is_success")
        info.update(is_success=success, reward_classifier_prob=prob, reward_classifier_streak=self.streak)
        terminated = bool(terminated or (success and self.cfg.terminate_on_success))
        return obs, self.cfg.success_reward if success else 0.0, terminated, bool(truncated), info


def reward_stage(cfg: ClassifierRewardConfig, env_id: str, hardware_only: bool = False) -> Stage:
    """The env pipeline's reward stage: the classifier at ``cfg.path`` decides reward and success. A robot_rl task is
    then made with ``terminate_on_success=False`` (the classifier, not the sim, ends episodes). ``hardware_only``:
    only an env that drives hardware gets the classifier (evaluation: a sim is judged by its own success check)."""

    def wrap(env: gym.Env) -> gym.Env:
        if hardware_only and not drives_hardware(env):
            return env
        try:
            return ClassifierReward(env, cfg.path, cfg)
        except (ValueError, FileNotFoundError, KeyError) as exc:
            raise ValueError(f"reward.path: {exc}") from exc

    own_success = not hardware_only and env_id.startswith("robot_rl/")
    return Stage("reward", wrap, {"terminate_on_success": False} if own_success else {})


def _check_cameras(space: gym.Space, classifier: RewardClassifier) -> None:
    """The env must show the classifier every camera it was trained on, at the trained size."""
    pixels = space.spaces.get("pixels") if isinstance(space, gym.spaces.Dict) else None
    if pixels is None:
        raise ValueError("reward classifier: the env's observations have no 'pixels' (cameras); make the env with "
                         "cameras at the size the classifier was trained on (sim: image_size)")
    for cam, shape in classifier.camera_shapes.items():
        if cam not in pixels.spaces:
            raise ValueError(f"reward classifier: it was trained on camera {cam!r}, the env has "
                             f"{sorted(pixels.spaces)}")
        found = tuple(pixels[cam].shape)
        if found != shape or pixels[cam].dtype != np.uint8:
            raise ValueError(f"reward classifier: camera {cam!r} gives {pixels[cam].dtype} {found}, the classifier "
                             f"was trained on uint8 {shape} (sim: image_size={shape[0]})")
