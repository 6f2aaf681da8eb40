"""Replay buffer: frames stored once, mix ratios, wrap-around, intervention routing."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.replay import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec

SPEC = ObsSpec(3, {"front": (8, 8, 3), "wrist": (8, 8, 3)})


def obs(counter: int) -> dict:
    """State and frames encode a global counter, so successors can be checked exactly."""
    return {"state": np.array([counter, 0, 0], np.float32),
            "pixels": {"front": np.full((8, 8, 3), counter % 256, np.uint8),
                       "wrist": np.full((8, 8, 3), (counter * 7) % 256, np.uint8)}}


def fill(buffer: ReplayBuffer, episodes: int, steps: int, source: str = "online", start: int = 0,
         stream: int = 0) -> int:
    c = start
    for ep in range(episodes):
        for t in range(steps):
            buffer.add(obs(c), np.zeros(2, np.float32), 1.0, False, t == steps - 1, obs(c + 1), source=source,
                       episode_id=ep, step=t, stream=stream)
            c += 1
        c += 1  # the next episode starts from a new observation
    return c


def cfg(**kw) -> ReplayConfig:
    return ReplayConfig(**{"online_capacity": 10_000, "demos_capacity": 10_000, "interventions_capacity": 10_000,
                           **kw})


def test_frames_are_stored_once_and_successors_are_exact():
    buf = ReplayBuffer(SPEC, 2, cfg())
    fill(buf, episodes=5, steps=20)
    part = buf.partitions["online"]
    assert part.size == 5 * 21 and part.num_transitions == 100
    b = buf.sample(256)
    np.testing.assert_array_equal(b["next_obs"]["state"][:, 0], b["obs"]["state"][:, 0] + 1)
    np.testing.assert_array_equal(b["next_obs"]["pixels"]["front"][:, 0, 0, 0],
                                  (b["obs"]["state"][:, 0].astype(int) + 1) % 256)
    frame_bytes = sum(int(np.prod(s)) for s in SPEC.cameras.values())
    pixel_bytes = sum(part.arrays[f"pixels/{c}"][: part.size].nbytes for c in SPEC.cameras)
    assert pixel_bytes / part.num_transitions <= 1.10 * frame_bytes


def test_interleaved_streams_do_not_mix_episodes():
    buf = ReplayBuffer(SPEC, 2, cfg())
    a, b = 0, 100_000
    for t in range(30):
        buf.add(obs(a), np.zeros(2), 0.0, False, t == 29, obs(a + 1), stream=0)
        buf.add(obs(b), np.zeros(2), 0.0, False, t == 29, obs(b + 1), stream=1)
        a, b = a + 1, b + 1
    assert buf.partitions["online"].size == 62
    s = buf.sample(500)
    np.testing.assert_array_equal(s["next_obs"]["state"][:, 0], s["obs"]["state"][:, 0] + 1)


@pytest.mark.parametrize("mix", [{"online": 0.5, "prior": 0.5}, {"online": 0.25, "prior": 0.75}])
def test_sampling_respects_the_mix(mix):
    buf = ReplayBuffer(SPEC, 2, cfg())
    fill(buf, 20, 10, "online")
    fill(buf, 5, 10, "demo", start=10_000)
    b = buf.sample(200, mix=mix, utd=10)
    assert b["source"].shape == (10, 200)
    # Every minibatch of the [utd, B] sample holds the mix exactly (largest-remainder counts).
    np.testing.assert_allclose((b["source"] == 1).mean(axis=1), mix["prior"], atol=1 / 200)
    b = buf.sample(400, mix=mix)
    assert (b["source"] == 1).mean() == pytest.approx(mix["prior"], abs=1 / 400)
    assert (b["source"] == 0).mean() == pytest.approx(mix["online"], abs=1 / 400)


def test_prior_splits_demos_and_interventions_by_size():
    buf = ReplayBuffer(SPEC, 2, cfg())
    fill(buf, 30, 10, "online")
    fill(buf, 5, 10, "demo", start=10_000)
    fill(buf, 15, 10, "intervention", start=20_000)
    prior = buf.sample(4000, mix={"prior": 1.0})["source"]
    # demos : interventions = 50 : 150 transitions -> 1 : 3 within statistical tolerance (std ~0.007)
    assert (prior == 1).mean() == pytest.approx(0.25, abs=0.03)
    assert (prior == 2).mean() == pytest.approx(0.75, abs=0.03)


def test_interventions_go_to_both_intervention_and_online_partitions():
    buf = ReplayBuffer(SPEC, 2, cfg())
    fill(buf, 2, 10, "intervention")
    assert buf.sizes() == {"online": 20, "demos": 0, "interventions": 20}
    s = buf.sample(64, mix={"online": 1.0})
    assert s["intervened"].all() and (s["source"] == 2).all()


def test_empty_groups_fall_back_and_all_empty_raises():
    buf = ReplayBuffer(SPEC, 2, cfg())
    with pytest.raises(ValueError, match="empty"):
        buf.sample(8)
    fill(buf, 2, 10, "online")
    assert (buf.sample(64)["source"] == 0).all()  # no prior data yet -> all online
    with pytest.raises(ValueError, match="unknown group"):
        ReplayBuffer(SPEC, 2, cfg(mix={"onlin": 1.0}))


def test_reuse_output_gives_the_same_batch():
    a, b = ReplayBuffer(SPEC, 2, cfg()), ReplayBuffer(SPEC, 2, cfg())
    for buf in (a, b):
        fill(buf, 10, 10, "online")
        fill(buf, 3, 10, "demo", start=5000)
    x, y = a.sample(32, utd=3), b.sample(32, utd=3, reuse_output=True)
    for key in ("action", "reward", "source", "episode_id"):
        np.testing.assert_array_equal(x[key], y[key])
    np.testing.assert_array_equal(x["next_obs"]["pixels"]["wrist"], y["next_obs"]["pixels"]["wrist"])


@pytest.mark.parametrize("reuse", [False, True])
def test_samples_without_frames_are_the_same_rows_minus_the_frames(reuse):
    a, b = ReplayBuffer(SPEC, 2, cfg()), ReplayBuffer(SPEC, 2, cfg())
    for buf in (a, b):
        fill(buf, 10, 10, "online")
        fill(buf, 3, 10, "demo", start=5000)
    b.with_pixels = False  # an agent that reads no camera (Sampling.pixels)
    x, y = a.sample(32, utd=3, reuse_output=reuse), b.sample(32, utd=3, reuse_output=reuse)
    assert "pixels" not in y["obs"] and "pixels" not in y["next_obs"]
    np.testing.assert_array_equal(x["obs"]["state"], y["obs"]["state"])
    np.testing.assert_array_equal(x["next_obs"]["state"], y["next_obs"]["state"])
    z = b.sample(8, pixels=True)  # asked for explicitly (e.g. a base-improvement batch)
    np.testing.assert_array_equal(z["obs"]["pixels"]["front"][:, 0, 0, 0], z["obs"]["state"][:, 0].astype(int) % 256)


def test_wrap_around_keeps_successors_exact_and_counts_right():
    buf = ReplayBuffer(SPEC, 2, cfg(online_capacity=53))
    end = fill(buf, 12, 9)  # 12 * 10 rows into a 53-row ring
    part = buf.partitions["online"]
    assert part.size == 53
    assert part.num_transitions == int(part.arrays["valid"].sum())
    s = buf.sample(2000)
    np.testing.assert_array_equal(s["next_obs"]["state"][:, 0], s["obs"]["state"][:, 0] + 1)
    # Only the newest rows survive: nothing older than the last 53 observations.
    assert s["obs"]["state"][:, 0].min() >= end - 53 - 1
    assert part.total_added == 108


def test_a_replay_larger_than_the_available_ram_is_refused_before_allocating() -> None:
    from robot_rl.replay.storage import RingStorage, available_ram

    free = available_ram()
    assert free is not None and free > 0
    spec = ObsSpec(3, {"front": (128, 128, 3)})
    rows = free // RingStorage.bytes_needed(spec, 2, 1) + 1
    with pytest.raises(MemoryError, match="available: lower replay"):
        RingStorage(spec, 2, rows)
