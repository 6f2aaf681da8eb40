"""``ReplayBuffer.extend`` writes a block of rows (an actor's chunk) in one vectorised copy and leaves the replay
exactly as adding its transitions one at a time does: routing by source, frames shared inside and across blocks,
episodes that end, a stream broken by a pause, and a ring that wraps."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.replay.rows import BlockBuilder
from robot_rl.spaces import ObsSpec

SPEC = ObsSpec(3, {"cam": (4, 4, 3)})


def script(seed: int, n: int, streams: int = 3) -> list[tuple]:
    """Transitions of ``streams`` interleaved envs: (stream, obs, action, reward, terminated, truncated, next_obs,
    meta); some episodes end, some steps are interventions, one stream pauses (``None``: a break)."""
    rng = np.random.default_rng(seed)
    out: list[tuple | None] = []
    state = {s: rng.normal(size=3).astype(np.float32) for s in range(streams)}
    step = dict.fromkeys(range(streams), 0)
    episode = {s: s * 1000 for s in range(streams)}
    for _ in range(n):
        s = int(rng.integers(streams))
        if rng.random() < 0.05:
            out.append((s, None))  # a held period: the next transition does not follow
            state[s] = rng.normal(size=3).astype(np.float32)
            continue
        nxt = rng.normal(size=3).astype(np.float32)
        end = rng.random() < 0.1
        obs = {"state": state[s], "pixels": {"cam": np.full((4, 4, 3), step[s] % 251, np.uint8)}}
        next_obs = {"state": nxt, "pixels": {"cam": np.full((4, 4, 3), (step[s] + 1) % 251, np.uint8)}}
        meta = {"source": "intervention" if rng.random() < 0.2 else "online", "episode_id": episode[s],
                "step": step[s], "policy_version": int(rng.integers(5)), "success": end}
        out.append((s, obs, rng.normal(size=2).astype(np.float32), float(rng.random()), end and rng.random() < 0.5,
                    end, next_obs, meta))
        step[s] += 1
        state[s] = nxt
        if end:
            episode[s] += 1
            step[s] = 0
            state[s] = rng.normal(size=3).astype(np.float32)
    return out


def replay(capacity: int) -> ReplayBuffer:
    return ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=capacity, demos_capacity=8,
                                              interventions_capacity=capacity))


def one_by_one(steps: list[tuple], capacity: int) -> ReplayBuffer:
    buf = replay(capacity)
    last = {}
    for item in steps:
        if item[1] is None:
            last.pop(item[0], None)
            buf.partitions["online"]._pending.pop(item[0], None)
            buf.partitions["interventions"]._pending.pop(item[0], None)
            continue
        s, obs, action, reward, term, trunc, next_obs, meta = item
        buf.add(obs, action, reward, term, trunc, next_obs, stream=s, **meta)
    return buf


def in_blocks(steps: list[tuple], capacity: int, block: int) -> ReplayBuffer:
    buf = replay(capacity)
    builder = BlockBuilder(SPEC, 2, block)
    for item in steps:
        if item[1] is None:
            builder.break_stream(item[0])
            continue
        s, obs, action, reward, term, trunc, next_obs, meta = item
        builder.add(s, obs, action, reward, term, trunc, next_obs, **meta)
        if builder.full:
            buf.extend(builder.take(), stream_base=0)
    if len(builder):
        buf.extend(builder.take())
    return buf


def transitions(buf: ReplayBuffer, name: str) -> list[tuple]:
    """Every stored transition of a partition as comparable values (rows differ when frames are shared)."""
    p = buf.partitions[name]
    a = p.arrays
    out = []
    for r in np.flatnonzero(a["valid"][: p.size]):
        n = a["next_row"][r]
        out.append((a["episode_id"][r], a["step"][r], a["state"][r].tobytes(), a["pixels/cam"][r].tobytes(),
                    a["state"][n].tobytes(), a["pixels/cam"][n].tobytes(), a["action"][r].tobytes(),
                    float(a["reward"][r]), bool(a["terminated"][r]), bool(a["truncated"][r]),
                    bool(a["intervened"][r]), int(a["source"][r]), int(a["policy_version"][r])))
    return sorted(out)


@pytest.mark.parametrize("block", [1, 7, 64])
def test_a_block_writes_what_its_transitions_one_at_a_time_write(block):
    steps = script(seed=block, n=600)
    ref, got = one_by_one(steps, 10_000), in_blocks(steps, 10_000, block)
    for name in ("online", "interventions"):
        assert transitions(got, name) == transitions(ref, name), name
        assert got.partitions[name].size == ref.partitions[name].size  # frame for frame: nothing stored twice
    assert got.partitions["online"].num_transitions == sum(1 for s in steps if s[1] is not None)
    assert got.partitions["interventions"].num_transitions == sum(
        1 for s in steps if s[1] is not None and s[-1]["source"] == "intervention")


@pytest.mark.parametrize("block", [1, 7, 64])
def test_a_ring_that_wraps_keeps_whole_transitions_and_the_counts(block):
    """A block's rows go in block order (one stream's rows may interleave with another's), so which old rows a
    wrap overwrites first can differ from one-at-a-time; what survives is whole and counted the same."""
    steps = script(seed=block, n=600)
    everything, ref, got = one_by_one(steps, 10_000), one_by_one(steps, 97), in_blocks(steps, 97, block)
    for name in ("online", "interventions"):
        assert set(transitions(got, name)) <= set(transitions(everything, name)), name
        for counter in ("num_transitions", "total_added", "size", "cursor"):
            assert getattr(got.partitions[name], counter) == getattr(ref.partitions[name], counter), counter


def test_an_episode_over_three_blocks_stores_each_frame_once_and_chains_across():
    buf = replay(1000)
    builder = BlockBuilder(SPEC, 2, 4)
    obs = [{"state": np.full(3, t, np.float32), "pixels": {"cam": np.full((4, 4, 3), t, np.uint8)}} for t in range(11)]
    for t in range(10):
        builder.add(0, obs[t], np.zeros(2, np.float32), 1.0, t == 9, False, obs[t + 1], step=t)
        if builder.full or t == 9:
            buf.extend(builder.take(), stream_base=5)
    online = buf.partitions["online"]
    assert online.size == 11 and online.num_transitions == 10  # T + 1 rows for T steps, not one more per block
    buf.set_n_step(4, 0.5)
    first = buf.partitions["online"].gather(np.array([0]))
    assert first["reward"][0] == pytest.approx(1 + 0.5 + 0.25 + 0.125)  # the chain runs across block boundaries
    assert first["next_obs/state"][0, 0] == 4
