"""zarr persistence: bit-exact round trips, clear errors for damaged stores, crash-safe episode appends."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from robot_rl.replay import EpisodeWriter, ReplayBuffer, ReplayStoreError, add_dataset, load_buffer, save_buffer
from robot_rl.spaces import ObsSpec
from tests.replay.test_replay_buffer import SPEC, cfg, fill, obs


def filled(online_capacity: int = 10_000) -> ReplayBuffer:
    buf = ReplayBuffer(SPEC, 2, cfg(online_capacity=online_capacity))
    fill(buf, 12, 9)
    fill(buf, 3, 9, "demo", start=50_000)
    fill(buf, 2, 9, "intervention", start=60_000)
    return buf


@pytest.mark.parametrize("capacity", [10_000, 53])  # not wrapped, wrapped
def test_save_load_round_trip_is_bit_exact(tmp_path, capacity):
    buf = filled(capacity)
    save_buffer(buf, tmp_path / "r.zarr")
    loaded = load_buffer(tmp_path / "r.zarr", cfg(online_capacity=capacity))
    for name, part in buf.partitions.items():
        other = loaded.partitions[name]
        assert part.counters() == other.counters()
        for key, arr in part.arrays.items():
            np.testing.assert_array_equal(arr, other.arrays[key], err_msg=f"{name}/{key}")
    a, b = buf.sample(64, utd=2), loaded.sample(64, utd=2)  # same sampler RNG state was saved
    np.testing.assert_array_equal(a["obs"]["pixels"]["front"], b["obs"]["pixels"]["front"])
    np.testing.assert_array_equal(a["episode_id"], b["episode_id"])


def test_wrapped_store_loads_into_a_larger_ring(tmp_path):
    save_buffer(filled(53), tmp_path / "r.zarr")
    loaded = load_buffer(tmp_path / "r.zarr", cfg(online_capacity=1000))
    s = loaded.sample(500, mix={"online": 1.0})
    np.testing.assert_array_equal(s["next_obs"]["state"][:, 0], s["obs"]["state"][:, 0] + 1)
    part = loaded.partitions["online"]
    before = part.num_transitions
    fill(loaded, 1, 5, start=90_000)  # keeps appending after the re-packed rows
    assert part.size == 59 and part.num_transitions == before + 5


def test_save_overwrites_atomically(tmp_path):
    path = tmp_path / "r.zarr"
    save_buffer(filled(), path)
    small = ReplayBuffer(SPEC, 2, cfg())
    fill(small, 1, 4)
    save_buffer(small, path)
    assert load_buffer(path).sizes()["online"] == 4
    assert [p.name for p in tmp_path.iterdir()] == ["r.zarr"]  # no temp or old folders left behind


def test_missing_and_incomplete_stores(tmp_path):
    with pytest.raises(ReplayStoreError, match="not found"):
        load_buffer(tmp_path / "nope.zarr")
    save_buffer(filled(), tmp_path / "r.zarr")
    (tmp_path / "r.zarr" / "commit.json").unlink()
    with pytest.raises(ReplayStoreError, match="incomplete"):
        load_buffer(tmp_path / "r.zarr")


def test_truncated_store_names_the_array(tmp_path):
    save_buffer(filled(), tmp_path / "r.zarr")
    chunks = tmp_path / "r.zarr" / "online" / "pixels" / "front" / "c"
    victim = sorted(p for p in chunks.rglob("*") if p.is_file())[-1]
    victim.unlink()
    with pytest.raises(ReplayStoreError, match=r"'online/pixels/front' is truncated"):
        load_buffer(tmp_path / "r.zarr")


def test_corrupted_chunk_bytes_name_the_array(tmp_path):
    save_buffer(filled(), tmp_path / "r.zarr")
    chunk = next(p for p in (tmp_path / "r.zarr" / "online" / "action" / "c").rglob("*") if p.is_file())
    chunk.write_bytes(b"\x00garbage" * 3)
    with pytest.raises(ReplayStoreError, match="'online/action'"):
        load_buffer(tmp_path / "r.zarr")


def test_mismatched_spec_names_array_expected_and_found(tmp_path):
    save_buffer(filled(), tmp_path / "r.zarr")
    other = ObsSpec(3, {"front": (16, 16, 3), "wrist": (8, 8, 3)})
    with pytest.raises(ReplayStoreError, match=r"'pixels/front' expected \(\(16, 16, 3\).*found \(\(8, 8, 3\)"):
        load_buffer(tmp_path / "r.zarr", expected_spec=other)
    with pytest.raises(ReplayStoreError, match="'action' expected"):
        load_buffer(tmp_path / "r.zarr", expected_action_dim=3)
    # An array rewritten with the wrong dtype on disk.
    import zarr
    group = zarr.open_group(str(tmp_path / "r.zarr" / "online"), mode="r+")
    n = group["reward"].shape[0]
    del group["reward"]
    group.create_array("reward", shape=(n,), dtype="float64")
    with pytest.raises(ReplayStoreError, match=r"'online/reward': expected shape .* float32, found .* float64"):
        load_buffer(tmp_path / "r.zarr")


def episode(start: int, steps: int = 6):
    observations = [obs(start + i) for i in range(steps + 1)]
    term = np.zeros(steps, bool)
    term[-1] = True
    return observations, np.zeros((steps, 2), np.float32), np.ones(steps, np.float32), term, np.zeros(steps, bool)


def test_episode_writer_appends_and_reopens(tmp_path):
    path = tmp_path / "demos.zarr"
    writer = EpisodeWriter(path, SPEC, 2)
    writer.append(*episode(0))
    writer.append(*episode(100))
    writer = EpisodeWriter(path, SPEC, 2)  # reopen and continue
    writer.append(*episode(200))
    assert writer.num_episodes == 3
    buf = ReplayBuffer(SPEC, 2, cfg())
    assert add_dataset(buf, str(path)) == 18
    s = buf.sample(300, mix={"demos": 1.0})
    np.testing.assert_array_equal(s["next_obs"]["state"][:, 0], s["obs"]["state"][:, 0] + 1)
    assert set(np.unique(s["episode_id"])) == {0, 1, 2} and (s["source"] == 1).all()
    with pytest.raises(ReplayStoreError, match="does not match"):
        EpisodeWriter(path, ObsSpec(4), 2)


def test_crash_during_append_keeps_committed_episodes(tmp_path, monkeypatch):
    path = tmp_path / "demos.zarr"
    writer = EpisodeWriter(path, SPEC, 2)
    writer.append(*episode(0))

    def crash():
        raise KeyboardInterrupt("power cut before the commit")
    monkeypatch.setattr(writer, "_write_commit", crash)
    with pytest.raises(KeyboardInterrupt):
        writer.append(*episode(100))  # rows written, commit never happens
    buf = ReplayBuffer(SPEC, 2, cfg())
    assert add_dataset(buf, str(path)) == 6
    assert json.loads((path / "commit.json").read_text())["partitions"]["demos"]["episodes"] == 1
    # and the store stays appendable after the crash
    EpisodeWriter(path, SPEC, 2).append(*episode(200))
    assert add_dataset(ReplayBuffer(SPEC, 2, cfg()), str(path)) == 12
    shutil.rmtree(path)
