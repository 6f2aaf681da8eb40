"""Instruction embeddings and base-policy proposals through every place a transition travels: the chunk an actor
builds, the spool file, the Ray gateway's checks, the learner's replay (sampled with the next step's proposal) and
the zarr store - and a store written before these fields existed still loads."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import zarr
from safetensors.numpy import save as save_np

from robot_rl.config import replace, to_dict
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.replay.rows import BlockBuilder, check_block
from robot_rl.replay.store import load_buffer, save_buffer
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir
from robot_rl.runtime.transport.spool import SpoolWriter, read_chunk
from robot_rl.spaces import ObsSpec
from robot_rl.training.config import TrainConfig

SPEC = ObsSpec(3, {"cam": (8, 8, 3)}, instruction_dim=5)
CFG = ReplayConfig(online_capacity=64, demos_capacity=8, interventions_capacity=8)


def episode(k: int, steps: int = 4):
    """Observations and per-step fields of episode k; every value says where it came from."""
    instr = np.full(5, k, np.float32)
    obs = [{"state": np.full(3, 10 * k + t, np.float32), "pixels": {"cam": np.full((8, 8, 3), 10 * k + t, np.uint8)},
            "instruction": instr} for t in range(steps + 1)]
    base = [np.full(2, 100 * k + t, np.float32) for t in range(steps)]
    return obs, base


def fill_builder(builder: BlockBuilder, k: int, steps: int = 4) -> None:
    obs, base = episode(k, steps)
    for t in range(steps):
        builder.add(0, obs[t], -base[t], 1.0, False, t == steps - 1, obs[t + 1], base_action=base[t], chunk_index=t % 3,
                    episode_id=k, step=t)


def check_replay(replay: ReplayBuffer, episodes: list[int]) -> None:
    batch = replay.sample(64)
    k = batch["obs"]["instruction"][:, 0]
    t = batch["step"]
    assert set(np.unique(k).astype(int)) == set(episodes)
    assert np.all(batch["next_obs"]["instruction"][:, 0] == k)  # the same instruction on both sides
    assert np.all(batch["obs"]["state"][:, 0] == 10 * k + t)
    assert np.all(batch["base_action"][:, 0] == 100 * k + t) and np.all(batch["action"][:, 0] == -(100 * k + t))
    assert np.all(batch["chunk_index"] == t % 3)
    last = t == 3  # the final observation's row holds no transition: the last proposal stands in, index -1
    assert np.all(batch["next_base_action"][~last, 0] == 100 * k[~last] + t[~last] + 1)
    assert np.all(batch["next_chunk_index"][~last] == (t[~last] + 1) % 3)
    assert np.all(batch["next_chunk_index"][last] == -1)
    assert np.all(batch["next_base_action"][last] == batch["base_action"][last])


def test_chunk_spool_and_replay_carry_instruction_and_base_proposals(tmp_path):
    builder = BlockBuilder(SPEC, 2, 16)
    fill_builder(builder, 1)
    fill_builder(builder, 2)
    chunk = {k: v.copy() for k, v in builder.take().items()}
    assert check_block(chunk, SPEC, 2) == 10
    spool = SpoolWriter(tmp_path / "spool")
    spool.write(0, chunk)
    spool.flush()
    spool.close()
    back = read_chunk(tmp_path / "spool", 0)
    assert all(np.array_equal(back[k], chunk[k]) for k in chunk)
    replay = ReplayBuffer(SPEC, 2, CFG)
    assert replay.extend(back) == 8
    assert "base_action" not in replay.sample(4)  # a run without a base policy skips those gathers
    replay.with_base = True
    check_replay(replay, [1, 2])
    save_buffer(replay, tmp_path / "replay.zarr")
    check_replay(load_buffer(tmp_path / "replay.zarr"), [1, 2])


def test_a_chunk_with_a_wrong_instruction_width_is_refused():
    builder = BlockBuilder(SPEC, 2, 16)
    fill_builder(builder, 1)
    chunk = {k: v.copy() for k, v in builder.take().items()}
    chunk["instruction"] = chunk["instruction"][:, :4].copy()
    with pytest.raises(ValueError, match="block array 'instruction'"):
        check_block(chunk, SPEC, 2)


def test_store_written_before_base_proposals_existed_loads_with_none(tmp_path):
    spec = ObsSpec(3)
    replay = ReplayBuffer(spec, 2, CFG)
    obs = [{"state": np.full(3, t, np.float32)} for t in range(4)]
    for t in range(3):
        replay.add(obs[t], np.zeros(2, np.float32), 0.0, False, t == 2, obs[t + 1])
    save_buffer(replay, tmp_path / "old.zarr")
    root = zarr.open_group(str(tmp_path / "old.zarr"), mode="r+")
    for part in ("online", "demos", "interventions"):  # as an earlier version wrote it
        for name in ("base_action", "chunk_index"):
            shutil.rmtree(tmp_path / "old.zarr" / part / name)
    attrs = dict(root.attrs)
    attrs.pop("instruction_dim")
    meta = json.loads((tmp_path / "old.zarr" / "zarr.json").read_text())
    meta["attributes"] = attrs
    (tmp_path / "old.zarr" / "zarr.json").write_text(json.dumps(meta))
    loaded = load_buffer(tmp_path / "old.zarr")
    assert loaded.spec == spec and len(loaded) == 3
    assert not loaded.with_base and "base_action" not in loaded.sample(8)
    loaded.with_base = True
    batch = loaded.sample(8, utd=2, reuse_output=True)
    assert np.all(batch["chunk_index"] == -1) and np.all(batch["base_action"] == 0)


def test_ray_gateway_checks_and_rings_instruction_chunks(tmp_path):
    from robot_rl.runtime.placement.ray_gateway import Gateway

    cfg = replace(TrainConfig(name="lang", runs_dir=str(tmp_path)),
                  {"env.id": "robot_rl/Reach-v0", "env.kwargs": {"instruction": True}})
    run = tmp_path / "lang"
    gateway = Gateway(json.dumps(to_dict(cfg)), str(run))
    try:
        assert gateway.spec.instruction_dim == 64 and gateway.spec.state_dim == 14
        gateway.join("a-1", 0, 1)
        builder = BlockBuilder(gateway.spec, 4, 8)
        obs = {"state": np.ones(14, np.float32), "instruction": np.linspace(0, 1, 64).astype(np.float32)}
        builder.add(0, obs, np.zeros(4, np.float32), 0.0, False, False, obs, base_action=np.full(4, 0.5, np.float32),
                    chunk_index=7)
        chunk = {k: v.copy() for k, v in builder.take().items()}
        assert gateway.push("a-1", 0, save_np(chunk)) == 1
        ring = shm.ChunkRing(json.loads((actor_dir(run) / "a-1.json").read_text())["ring"], gateway.specs)
        _, views = ring.peek()
        assert np.array_equal(views["instruction"], chunk["instruction"])
        assert np.array_equal(views["base_action"], chunk["base_action"]) and views["chunk_index"][0] == 7
        ring.close()
        bad = dict(chunk, instruction=np.zeros((2, 63), np.float32))
        with pytest.raises(ValueError, match="'instruction'"):
            gateway.push("a-1", 1, save_np(bad))
    finally:
        gateway.close()
        for path in actor_dir(run).glob("*.json"):
            shm.unlink_shm(json.loads(path.read_text())["ring"])
