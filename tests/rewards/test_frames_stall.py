"""A robot that stops answering while a person records classifier frames: the recording waits for it and starts
the episode again, and one that never comes back ends the recording with what was labelled kept."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from robot_rl.envs.contract import RobotUnavailable
from robot_rl.rewards.frames import load_frames, record_key_frames
from tests.rewards.helpers import BrightnessEnv, ScriptedKeys


class StallingEnv(BrightnessEnv):
    """Step ``stall_at`` (counted over the whole session) raises RobotUnavailable, and so do the next
    ``dead_resets`` resets (the graph is still stalled); waits for the robot ``wait_s`` (its connect_timeout)."""

    def __init__(self, stall_at: int, dead_resets: int, wait_s: float) -> None:
        super().__init__([50] * 40)
        self.stall_at, self.dead_resets, self.steps = stall_at, dead_resets, 0
        self.cfg = SimpleNamespace(connect_timeout=wait_s)
        self.stalled = False

    def reset(self, **kwargs) -> tuple[dict, dict]:
        if self.stalled and self.dead_resets > 0:
            self.dead_resets -= 1
            raise RobotUnavailable("no fresh pose within 3.0 s (robot graph stalled?)")
        self.stalled = False
        return super().reset(**kwargs)

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        self.steps += 1
        if self.steps == self.stall_at:
            self.stalled = True
            raise RobotUnavailable("no fresh pose within 3.0 s (robot graph stalled?)")
        return super().step(action)


def test_a_stalled_robot_is_waited_for_and_the_episode_starts_again(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO)
    env = StallingEnv(stall_at=4, dead_resets=2, wait_s=10.0)
    device = ScriptedKeys([(True, ("success",))] + [(True, ())] * 20)
    stats = record_key_frames(env, device, tmp_path / "k.zarr", max_frames=8, progress=False)
    data = load_frames(tmp_path / "k.zarr")
    assert stats.frames == 8 and len(data) == 8
    assert data.episodes.tolist() == [0, 0, 0, 1, 1, 1, 1, 1]  # the stalled step made no frame; a new episode
    assert data.labels.tolist() == [True] * 3 + [False] * 5  # the new episode's label starts again
    assert env.resets == 2 and "robot_lost" not in data.meta
    assert "the robot stopped answering" in caplog.text and "answers again" in caplog.text


def test_a_robot_that_does_not_come_back_keeps_the_frames_so_far(tmp_path: Path, caplog) -> None:
    env = StallingEnv(stall_at=4, dead_resets=10_000, wait_s=0.3)
    device = ScriptedKeys([(True, ("success",))] + [(True, ())] * 20)
    stats = record_key_frames(env, device, tmp_path / "k.zarr", max_frames=8, progress=False)
    data = load_frames(tmp_path / "k.zarr")
    assert stats.frames == 3 and data.labels.tolist() == [True] * 3
    assert "still not answering after 0 s" in data.meta["robot_lost"]
    assert "the 3 frames so far are kept" in caplog.text
