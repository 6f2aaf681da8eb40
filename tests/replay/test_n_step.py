"""n-step samples: discounted reward sums along an episode, stopping at terminals, truncations and transitions
not stored yet; the base's proposal at the next observation stands in where the base never saw it."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec

CFG = ReplayConfig(online_capacity=64, demos_capacity=8, interventions_capacity=8)


def episode(replay: ReplayBuffer, rewards, terminated_last: bool, stream: int = 0, start: float = 0.0) -> None:
    for t, r in enumerate(rewards):
        last = t == len(rewards) - 1
        replay.add({"state": np.array([start + t], np.float32)}, np.zeros(1, np.float32), r, last and terminated_last,
                   last and not terminated_last, {"state": np.array([start + t + 1], np.float32)}, stream=stream,
                   base_action=np.array([0.1 * (t + 1)], np.float32), chunk_index=t % 2, step=t)


def by_state(sample) -> dict[float, dict]:
    out = {}
    for i, s in enumerate(sample["obs"]["state"][:, 0]):
        out[float(s)] = {k: (v[i] if not isinstance(v, dict) else v["state"][i, 0]) for k, v in sample.items()}
    return out


def test_n_step_returns_stop_at_episode_ends() -> None:
    replay = ReplayBuffer(ObsSpec(1), 1, CFG, seed=0)
    episode(replay, [1.0, 2.0, 3.0, 4.0], terminated_last=True)  # states 0..3, terminal after the 4th step
    episode(replay, [1.0, 1.0], terminated_last=False, start=10.0)  # truncated after 2 steps
    replay.with_base = True
    replay.set_n_step(3, 0.5)
    rows = by_state(replay.sample(400, mix={"online": 1.0}))
    assert set(rows) == {0.0, 1.0, 2.0, 3.0, 10.0, 11.0}
    assert rows[0.0]["reward"] == pytest.approx(1 + 0.5 * 2 + 0.25 * 3) and rows[0.0]["discount"] == 0.125
    assert rows[0.0]["next_obs"] == 3.0 and not rows[0.0]["terminated"]
    assert rows[0.0]["next_base_action"] == pytest.approx(0.4) and rows[0.0]["next_chunk_index"] == 1
    assert rows[2.0]["reward"] == pytest.approx(3 + 0.5 * 4) and rows[2.0]["terminated"]
    assert rows[2.0]["next_obs"] == 4.0 and rows[2.0]["discount"] == 0.25
    # truncation: the chain stops at the episode's end and bootstraps from its final observation, where the base
    # never acted: its last proposal stands in
    assert rows[10.0]["reward"] == pytest.approx(1.5) and not rows[10.0]["terminated"]
    assert rows[10.0]["next_obs"] == 12.0 and rows[10.0]["next_base_action"] == pytest.approx(0.2)
    assert rows[10.0]["next_chunk_index"] == -1
    replay.set_n_step(1, 0.5)
    one = by_state(replay.sample(200, mix={"online": 1.0}, utd=None))
    assert "discount" not in one[0.0] and one[0.0]["reward"] == 1.0 and one[0.0]["next_obs"] == 1.0


def test_a_chain_stops_where_the_next_transition_has_not_arrived() -> None:
    replay = ReplayBuffer(ObsSpec(1), 1, CFG, seed=0)
    replay.add({"state": np.zeros(1, np.float32)}, np.zeros(1, np.float32), 1.0, False, False,
               {"state": np.ones(1, np.float32)})
    replay.set_n_step(5, 0.9)
    sample = replay.sample(8, mix={"online": 1.0}, utd=2, reuse_output=True)
    assert sample["reward"].shape == (2, 8) and np.all(sample["reward"] == 1.0) and np.all(sample["discount"] == 0.9)
    assert np.all(sample["next_obs"]["state"] == 1.0)
    with pytest.raises(ValueError, match="n >= 1"):
        replay.set_n_step(0, 0.9)


def test_a_chain_does_not_cross_a_gap_in_a_stream() -> None:
    """A stream that stopped and restarted from an equal observation (a held robot) shares the row; the
    transition from it is not the episode's next step, so the chain ends there."""
    replay = ReplayBuffer(ObsSpec(1), 1, CFG, seed=0)
    s = [np.array([v], np.float32) for v in (0.0, 1.0, 2.0)]
    replay.add({"state": s[0]}, np.zeros(1, np.float32), 1.0, False, False, {"state": s[1]}, step=0)
    replay.add({"state": s[1]}, np.zeros(1, np.float32), 5.0, False, False, {"state": s[2]}, step=4)
    replay.set_n_step(3, 0.5)
    rows = by_state(replay.sample(100, mix={"online": 1.0}))
    assert rows[0.0]["reward"] == 1.0 and rows[0.0]["discount"] == 0.5 and rows[0.0]["next_obs"] == 1.0
