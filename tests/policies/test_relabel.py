"""Labelling demo rows with the base policy's proposals, as the synchronous executor would have run it."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.policies.relabel import label_base_proposals
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec
from tests.policies.toy import GoalPolicy, roll


def record(replay: ReplayBuffer, start: np.ndarray, steps: int, episode_id: int) -> None:
    x = start.astype(np.float32)
    for t in range(steps):
        a = np.array([0.5, -0.5], np.float32)
        nxt = roll(x, a[None])
        replay.add({"state": x}, a, 0.0, False, t == steps - 1, {"state": nxt}, source="demo",
                   episode_id=episode_id, step=t)
        x = nxt.astype(np.float32)


def test_demo_rows_get_the_chunk_the_base_would_have_run() -> None:
    replay = ReplayBuffer(ObsSpec(2), 2, ReplayConfig(online_capacity=4, demos_capacity=64, interventions_capacity=4))
    record(replay, np.zeros(2), 7, episode_id=0)
    record(replay, np.ones(2), 5, episode_id=1)
    part = replay.partitions["demos"]
    policy = GoalPolicy(horizon=4)
    n = label_base_proposals(part, policy, np.arange(part.size), {0: "go", 1: "go"}, execute_steps=3)
    assert n == 12
    a = part.arrays
    valid = np.flatnonzero(a["valid"][: part.size])
    assert list(a["chunk_index"][valid]) == [0, 1, 2, 0, 1, 2, 0] + [0, 1, 2, 0, 1]
    # chunks are inferred on the observations at steps 0, 3, 6 of each episode, from zero noise
    assert [float(s[0]) for s in policy.seen] == pytest.approx([0.0, 0.15, 0.3, 1.0, 1.15])
    assert all(np.array_equal(z, np.zeros((4, 2), np.float32)) for z in policy.noises)
    for i, row in enumerate(valid):  # each step's label is its chunk's entry for that step
        k = int(a["chunk_index"][row])
        chunk = policy.infer({"state": a["state"][valid[i - k]]})
        assert np.allclose(a["base_action"][row], chunk[k])
    # labelled rows are not labelled twice
    assert label_base_proposals(part, policy, np.arange(part.size)) == 0
