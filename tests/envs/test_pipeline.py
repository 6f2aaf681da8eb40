"""The env pipeline's named stages: one order for every env (robot_rl.envs.make), with the stages packages above envs
supply (the learned reward, the teleop device) put in their place."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import pytest

from robot_rl.envs.config import EnvConfig
from robot_rl.envs.contract import drives_hardware
from robot_rl.envs.make import STAGES, Stage, make_batched_env, make_env
from robot_rl.rewards.wrapper import ClassifierRewardConfig
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.intervention import InterventionWrapper
from robot_rl.training.config import TrainConfig
from robot_rl.training.env_stages import evaluation_stages, training_stages

ROOT = Path(__file__).resolve().parents[2]


class Tag(gym.Wrapper):
    def __init__(self, env: gym.Env, tag: str) -> None:
        super().__init__(env)
        self.tag = tag


def tags(env: gym.Env) -> list[str]:
    out = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, Tag):
            out.append(env.tag)
        env = env.env
    return out[::-1]  # innermost first


def test_added_stages_take_their_place_whatever_order_they_come_in() -> None:
    reward = Stage("reward", lambda env: Tag(env, "reward"))
    teleop = Stage("teleop", lambda env: Tag(env, "teleop"))
    env = make_env(EnvConfig(id="Pendulum-v1"), stages=[teleop, reward])
    assert tags(env) == ["reward", "teleop"]  # the learned reward inside the person's takeover, as STAGES says
    assert STAGES.index("reward") < STAGES.index("teleop")
    env.close()
    for bad in ([reward, reward], [Stage("camera", lambda env: env)]):
        with pytest.raises(ValueError, match="env pipeline: stages"):
            make_env(EnvConfig(id="Pendulum-v1"), stages=bad)


def test_a_stage_tells_the_env_constructor_what_it_needs() -> None:
    stage = Stage("reward", lambda env: env, {"g": 3.5})
    env = make_env(EnvConfig(id="Pendulum-v1"), stages=[stage])
    assert env.unwrapped.g == 3.5
    env.close()


def test_batched_envs_get_their_own_stages() -> None:
    batched = make_batched_env(EnvConfig(id="Pendulum-v1"), 3,
                               lambda i: [Stage("teleop", lambda env, i=i: Tag(env, f"person {i}"))])
    assert [tags(e) for e in batched.envs] == [["person 0"], ["person 1"], ["person 2"]]
    batched.close()


def test_a_training_run_and_an_evaluation_add_the_stages_their_config_sets(tmp_path) -> None:
    plain = TrainConfig(env=EnvConfig(id="robot_rl/Reach-v0"))
    assert training_stages(plain) == [] and evaluation_stages(plain) == []
    cfg = TrainConfig(env=EnvConfig(id="robot_rl/Reach-v0"), teleop=TeleopConfig(device="scripted"))
    object.__setattr__(cfg, "reward", ClassifierRewardConfig(path=str(tmp_path / "classifier")))  # (not read here)
    stages = training_stages(cfg, teleop_seed=4)
    assert [s.name for s in stages] == ["reward", "teleop"]
    assert stages[0].env_kwargs == {"terminate_on_success": False}  # the classifier, not the sim, ends episodes
    assert [s.name for s in training_stages(cfg, teleop=False)] == ["reward"]
    # evaluation: the classifier judges a robot only; a sim keeps its own success check and its own kwargs
    (evaluation,) = evaluation_stages(cfg)
    assert evaluation.env_kwargs == {}
    env = make_env(cfg.env, stages=[evaluation])
    assert not drives_hardware(env) and tags(env) == [] and "ClassifierReward" not in repr(env)
    env.close()
    env = make_env(cfg.env, stages=[stages[1]])
    assert isinstance(env, InterventionWrapper)
    env.close()


def test_no_env_is_built_outside_the_pipeline() -> None:
    """gym.make, the reward classifier's wrapper and the teleop wrapper are applied in the pipeline's stages only (the
    raw batched API, robot_rl.envs.batched.make_batched, makes envs as they are, for users)."""
    make, reward, teleop = r"gym\.make\(", r"(?<!class )ClassifierReward\(", r"wrap_with_teleop\("
    allowed = {"robot_rl/envs/make.py": make, "robot_rl/envs/batched.py": make, "robot_rl/rewards/wrapper.py": reward,
               "robot_rl/teleop/intervention.py": teleop}
    found = []
    for path in sorted((ROOT / "robot_rl").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        for marker in (make, reward, teleop):
            if allowed.get(name) != marker and re.search(marker, path.read_text()):
                found.append(f"{name}: {marker}")
    assert not found, found
