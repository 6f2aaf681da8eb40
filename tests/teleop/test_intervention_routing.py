"""Interventions through the real actor (no learner process): executed actions stored, flags and sources set,
intervention rows in both the interventions and the online partition of the replay."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from robot_rl.envs.make import EnvConfig
from robot_rl.replay.buffer import ReplayBuffer
from robot_rl.runtime.actor import Actor
from robot_rl.spaces import ObsSpec
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.scripted import ScriptedHumanConfig
from robot_rl.training.config import RuntimeConfig, TrainConfig


@pytest.mark.timeout(180)
def test_actor_files_scripted_human_steps_as_interventions(tmp_path) -> None:
    human = ScriptedHumanConfig(noise=0.0, takeover_steps=6, max_takeovers=0)  # exact expert actions
    cfg = TrainConfig(env=EnvConfig(id="robot_rl/PickCube-v0", max_episode_steps=40), random_steps=10**6,
                      runtime=RuntimeConfig(num_envs=2, chunk_steps=1000, flush_seconds=1e6, spool=False),
                      teleop=TeleopConfig(device="scripted", scripted=human))
    actor = Actor(cfg, tmp_path)
    try:
        for _ in range(60):  # random warm-up actions: the scripted human keeps taking over
            assert actor.step()
        chunk = {k: v.copy() for k, v in actor.outbox.builder.take().items()}
    finally:
        actor.close()
    valid = chunk["valid"]
    human_rows = valid & chunk["intervened"]
    policy_rows = valid & ~chunk["intervened"]
    assert valid.sum() == 120 and 20 <= human_rows.sum() <= 100, human_rows.sum()
    # The stored action is what ran: the expert's gripper command is exactly +-1, a uniform random one never is.
    assert np.all(np.abs(chunk["action"][human_rows, -1]) == 1.0)
    assert not np.any(np.abs(chunk["action"][policy_rows, -1]) == 1.0)
    assert set(chunk["source"][human_rows]) == {2} and set(chunk["source"][policy_rows]) == {0}
    replay = ReplayBuffer(ObsSpec.from_space(actor.env.single_observation_space), 4)
    replay.extend(chunk)
    parts = replay.partitions
    assert parts["interventions"].num_transitions == human_rows.sum()
    assert parts["online"].num_transitions == valid.sum()  # interventions are online experience too
    assert parts["demos"].num_transitions == 0


def test_human_devices_need_one_env() -> None:
    cfg = TrainConfig(teleop=TeleopConfig(device="keyboard"), runtime=RuntimeConfig(num_envs=4))
    with pytest.raises(ValueError, match="steers one robot"):
        cfg.validate()
    with pytest.raises(ValueError, match="teleop.device must be one of"):
        TrainConfig(teleop=TeleopConfig(device="joystick")).validate()


class HoldingEnv(gym.Env):
    """A robot env whose every third period is held (a person's pause, a latched e-stop): ``paused`` in its info."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.full(3, self.t / 100, np.float32), 0.0, False, self.t >= 30, {"paused": self.t % 3 == 0}


gym.register("robot_rl_test/Holding-v0", entry_point=HoldingEnv)


def test_held_periods_are_not_steps_of_the_episode(tmp_path) -> None:
    """The actor numbers an episode's transitions 0..n-1 without the held periods between them (the exactly-once
    check of tests/runtime/delivery.py reads a numbering with holes as lost transitions)."""
    cfg = TrainConfig(env=EnvConfig(id=f"{__name__}:robot_rl_test/Holding-v0"), random_steps=10**6,
                      runtime=RuntimeConfig(num_envs=1, chunk_steps=1000, flush_seconds=1e6, spool=False))
    actor = Actor(cfg, tmp_path)
    try:
        for _ in range(45):
            actor.step()
        chunk = {k: v.copy() for k, v in actor.outbox.builder.take().items()}
    finally:
        actor.close()
    valid = chunk["valid"]
    episodes = chunk["episode_id"][valid]
    steps = chunk["step"][valid]
    first = steps[episodes == episodes[0]]
    assert len(first) == 20 and list(first) == list(range(20)), first  # 30 periods, 10 of them held
    assert actor.steps == valid.sum()
