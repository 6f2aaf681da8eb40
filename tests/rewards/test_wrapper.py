"""ClassifierReward semantics: reward and termination from the classifier, k consecutive positives, info."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.rewards.wrapper import ClassifierReward, ClassifierRewardConfig
from tests.rewards.helpers import BrightnessEnv, StubClassifier

pytestmark = pytest.mark.timeout(30)

HI, LO = 230, 20  # frame brightness -> the stub's probability 0.90 / 0.08


def run(env: ClassifierReward, steps: int) -> list[tuple[float, bool, bool, dict]]:
    env.reset()
    out = []
    for _ in range(steps):
        _obs, reward, terminated, truncated, info = env.step(np.zeros(2, np.float32))
        out.append((reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return out


def test_first_positive_pays_and_terminates() -> None:
    env = ClassifierReward(BrightnessEnv([LO, LO, LO, HI, HI, LO]), StubClassifier())
    steps = run(env, 10)
    assert [s[0] for s in steps] == [0.0, 0.0, 1.0]
    assert steps[-1][1] and not steps[-1][2]
    info = steps[-1][3]
    assert info["is_success"] and info["reward_classifier_prob"] == pytest.approx(HI / 255)
    assert info["env_is_success"] is False and info["env_reward"] == 0.0  # the env's own view, for comparison


def test_k_consecutive_positives_ignore_isolated_ones() -> None:
    levels = [LO, HI, LO, HI, HI, LO, HI, HI, HI, HI, LO]
    env = ClassifierReward(BrightnessEnv(levels), StubClassifier(), ClassifierRewardConfig(consecutive=3))
    steps = run(env, 20)
    streaks = [s[3]["reward_classifier_streak"] for s in steps]
    assert streaks == [1, 0, 1, 2, 0, 1, 2, 3]
    assert [s[0] for s in steps] == [0.0] * 7 + [1.0]
    assert steps[-1][1]


def test_without_termination_success_keeps_paying_while_positive() -> None:
    levels = [LO, HI, HI, HI, LO, HI, LO]
    cfg = ClassifierRewardConfig(consecutive=2, terminate_on_success=False, success_reward=5.0)
    steps = run(ClassifierReward(BrightnessEnv(levels), StubClassifier(), cfg), 20)
    assert [s[0] for s in steps] == [0.0, 5.0, 5.0, 0.0, 0.0, 0.0]
    assert not any(s[1] for s in steps) and steps[-1][2]  # ends by the time limit only


def test_reset_clears_the_streak() -> None:
    env = ClassifierReward(BrightnessEnv([LO, HI, HI, HI]), StubClassifier(), ClassifierRewardConfig(consecutive=3))
    env.reset()
    env.step(np.zeros(2, np.float32))
    env.step(np.zeros(2, np.float32))
    assert env.streak == 2
    env.reset()
    assert env.streak == 0
    _o, reward, _t, _tr, info = env.step(np.zeros(2, np.float32))
    assert reward == 0.0 and info["reward_classifier_streak"] == 1


def test_threshold_override_and_env_termination_pass_through() -> None:
    mid = 128  # p = 0.50
    env = ClassifierReward(BrightnessEnv([LO, mid, mid]), StubClassifier(threshold=0.4),
                           ClassifierRewardConfig(threshold=0.6))
    assert [s[0] for s in run(env, 5)] == [0.0, 0.0]
    # The env's own termination (e.g. the object fell off the table) still ends the episode, without reward.
    env = ClassifierReward(BrightnessEnv([LO] * 10, env_success=[False] * 10, terminate_at=2), StubClassifier())
    steps = run(env, 10)
    assert len(steps) == 2 and steps[-1][1] and steps[-1][0] == 0.0 and not steps[-1][3]["is_success"]


def test_env_success_is_reported_not_used() -> None:
    env = ClassifierReward(BrightnessEnv([LO, LO, LO], env_success=[False, True, True]), StubClassifier())
    steps = run(env, 5)
    assert [s[3]["env_is_success"] for s in steps] == [True, True]
    assert [s[3]["env_reward"] for s in steps] == [1.0, 1.0]
    assert all(s[0] == 0.0 and not s[3]["is_success"] for s in steps)


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="consecutive"):
        ClassifierReward(BrightnessEnv([LO]), StubClassifier(), ClassifierRewardConfig(consecutive=0))
    with pytest.raises(ValueError, match="threshold"):
        ClassifierReward(BrightnessEnv([LO]), StubClassifier(), ClassifierRewardConfig(threshold=1.5))
    with pytest.raises(ValueError, match="camera 'wrist'"):
        ClassifierReward(BrightnessEnv([LO]), StubClassifier(cameras=("front", "wrist")))
    with pytest.raises(ValueError, match=r"image_size=16"):
        ClassifierReward(BrightnessEnv([LO], size=8), StubClassifier(size=16))
    import gymnasium as gym

    with pytest.raises(ValueError, match="no 'pixels'"):
        ClassifierReward(gym.make("Pendulum-v1"), StubClassifier())
    with pytest.raises(FileNotFoundError, match="train-reward"):
        ClassifierReward(BrightnessEnv([LO]), "/nonexistent/classifier")
