"""Behaviour-cloning samples from demo datasets: each row's chunk is its action and those of the steps that follow
in its episode, masked past the episode's end; the instruction comes from the dataset's metadata; with state
offsets (future-state-aware training) state and targets come from later in the episode than the frames."""

from __future__ import annotations

import json

import numpy as np

from robot_rl.replay.store import EpisodeWriter
from robot_rl.spaces import ObsSpec
from robot_rl.text import make_text_encoder
from robot_rl.vla.data import ChunkDataset

SPEC = ObsSpec(2, {"cam": (4, 4, 3)})


def write_dataset(path, lengths, instructions):
    writer = EpisodeWriter(path, SPEC, 1)
    episodes = []
    for k, (n, text) in enumerate(zip(lengths, instructions)):
        # step t of episode k: state (k, t), frame value t, action 100 k + t
        obs = [{"state": np.array([k, t], np.float32), "pixels": {"cam": np.full((4, 4, 3), t, np.uint8)}}
               for t in range(n + 1)]
        writer.append(obs, np.array([[100 * k + t] for t in range(n)], np.float32), np.zeros(n, np.float32),
                      np.arange(n) == n - 1, np.zeros(n, bool), episode_id=k)
        episodes.append({"episode_id": k, "instruction": text})
    (path / "dataset.json").write_text(json.dumps({"format": "robot_rl.demos", "env_id": "x/Y-v0",
                                                   "env_kwargs": {}, "episodes": episodes}))


def test_chunks_follow_the_episode_and_stop_at_its_end(tmp_path):
    write_dataset(tmp_path / "d.zarr", [5, 3], ["go left", "go right"])
    data = ChunkDataset([tmp_path / "d.zarr"], chunk_length=4)
    batch = data.sample(200, np.random.default_rng(0))
    k, t = batch["state"][:, 0].astype(int), batch["state"][:, 1].astype(int)
    lengths = np.where(k == 0, 5, 3)
    for i in range(200):
        want = [100 * k[i] + t[i] + j for j in range(4) if t[i] + j < lengths[i]]
        assert list(batch["mask"][i]) == [t[i] + j < lengths[i] for j in range(4)]
        assert list(batch["actions"][i, : len(want), 0]) == want
        assert np.all(batch["frames"]["cam"][i] == t[i])
    texts = {"go left": make_text_encoder("hash").encode("go left"), "go right": make_text_encoder("hash").encode(
        "go right")}
    assert all(np.array_equal(batch["text"][i], texts["go left" if k[i] == 0 else "go right"]) for i in range(200))
    assert data.tasks()[0]["instructions"] == ["go left", "go right"]


def test_state_offsets_take_state_and_targets_from_later_steps(tmp_path):
    write_dataset(tmp_path / "d.zarr", [10], ["go"])
    data = ChunkDataset([tmp_path / "d.zarr"], chunk_length=2)
    batch = data.sample(300, np.random.default_rng(1), state_offset_max=3)
    frame_t = batch["frames"]["cam"][:, 0, 0, 0].astype(int)
    state_t = batch["state"][:, 1].astype(int)
    offset = state_t - frame_t
    assert offset.min() == 0 and offset.max() == 3
    assert np.all((offset == np.minimum(offset, 9 - frame_t)) | (offset == 0))  # never past the episode's end
    assert np.all(batch["actions"][:, 0, 0] == state_t)  # targets start at the state's step
