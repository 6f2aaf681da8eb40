"""LeRobotDataset v3.0 export and import: a pixel demo dataset (with an intervention episode added) round-trips
losslessly for states, actions, rewards and flags and within codec tolerance for frames; the written folder
validates against a reader written here from the documented format (not robot_rl's own reader); the imported
dataset loads as demos."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robot_rl.datasets.convert import export_dataset, import_dataset
from robot_rl.datasets.episodes import read_episodes
from robot_rl.datasets.record import record_demos
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.replay.store import EpisodeWriter, add_dataset
from robot_rl.spaces import obs_row

KWARGS = {"image_size": 32, "object_state": False}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """3 scripted PickColor demos with two 32x32 cameras, plus one episode a human took over half-way."""
    path = tmp_path_factory.mktemp("demos") / "pick.zarr"
    record_demos("robot_rl/PickColor-v0", 3, path, env_kwargs=KWARGS, progress=False)
    spec, action_dim, episodes = read_episodes(path)
    ep = next(iter(episodes))
    names = tuple(spec.obs_arrays())
    writer = EpisodeWriter(path, spec, action_dim, partition="interventions")
    steered = np.arange(ep.length) >= ep.length // 2
    writer.append([obs_row(ep.observations, names, i) for i in range(ep.length + 1)], ep.action, ep.reward,
                  ep.terminated, ep.truncated, source="intervention", episode_id=99, intervened=steered)
    return path


def test_round_trip_is_lossless_except_the_frames_codec(dataset, tmp_path):
    import os

    info = export_dataset(dataset, tmp_path / "le")
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the AV1 encoder's real-time switch was undone
    assert info["total_episodes"] == 4
    import_dataset(tmp_path / "le", tmp_path / "back.zarr")
    _, _, before = read_episodes(dataset)
    spec, action_dim, after = read_episodes(tmp_path / "back.zarr")
    pairs = list(zip(before, after, strict=True))
    for a, b in pairs:
        for key in ("action", "reward", "terminated", "truncated", "intervened"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
        np.testing.assert_array_equal(a.observations["state"], b.observations["state"])
        np.testing.assert_array_equal(a.observations["instruction"], b.observations["instruction"])
        assert a.success == b.success and a.instruction == b.instruction
        for cam in ("front", "wrist"):
            x, y = a.observations[f"pixels/{cam}"].astype(int), b.observations[f"pixels/{cam}"].astype(int)
            assert x.shape == y.shape and np.abs(x - y).mean() < 8, np.abs(x - y).mean()  # AV1 at crf 30
    steered = pairs[-1][1]
    assert steered.intervened.any() and not steered.intervened.all()
    # the imported demos load into a replay buffer as any recorded dataset does
    replay = ReplayBuffer(spec, action_dim, ReplayConfig(online_capacity=10, demos_capacity=500,
                                                         interventions_capacity=10))
    assert add_dataset(replay, str(tmp_path / "back.zarr")) == sum(a.length for a, _ in pairs)


def test_the_written_folder_follows_the_v3_layout(dataset, tmp_path):
    """An independent reader: only json, pyarrow and PyAV, and the layout LeRobot's source defines."""
    root = tmp_path / "le"
    export_dataset(dataset, root)
    info = json.loads((root / "meta/info.json").read_text())
    for key in ("codebase_version", "robot_type", "total_episodes", "total_frames", "total_tasks", "chunks_size",
                "data_files_size_in_mb", "video_files_size_in_mb", "fps", "splits", "data_path", "video_path",
                "features"):
        assert key in info, key
    assert info["codebase_version"] == "v3.0" and info["splits"] == {"train": f"0:{info['total_episodes']}"}
    feats = info["features"]
    for key, dtype in (("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"),
                       ("index", "int64"), ("task_index", "int64")):
        assert feats[key] == {"dtype": dtype, "shape": [1], "names": None}
    assert feats["observation.images.front"]["dtype"] == "video"
    assert feats["observation.images.front"]["info"]["video.codec"] == "av1"

    tasks = pq.read_table(root / "meta/tasks.parquet").to_pydict()
    assert sorted(tasks["task_index"]) == list(range(info["total_tasks"]))
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["episode_index"] for e in episodes] == list(range(info["total_episodes"]))
    data_file = root / info["data_path"].format(chunk_index=0, file_index=0)
    table = pq.read_table(data_file)
    assert table.num_rows == info["total_frames"]
    video_features = {k for k, f in feats.items() if f["dtype"] == "video"}
    assert set(table.column_names) == set(feats) - video_features  # videos are not in the parquet
    state_dim = feats["observation.state"]["shape"][0]
    kind = table.schema.field("observation.state").type  # a fixed-size list<float32>[D] (child named by pyarrow)
    assert pa.types.is_fixed_size_list(kind) and kind.list_size == state_dim and kind.value_type == pa.float32()
    d = table.to_pydict()
    np.testing.assert_array_equal(d["index"], np.arange(info["total_frames"]))
    np.testing.assert_allclose(d["timestamp"], np.asarray(d["frame_index"]) / info["fps"], atol=1e-6)
    stats = json.loads((root / "meta/stats.json").read_text())
    assert np.asarray(stats["observation.images.front"]["mean"]).shape == (3, 1, 1)
    front = stats["observation.images.front"]
    assert 0 <= np.min(front["min"]) and np.max(front["max"]) <= 1
    assert stats["action"]["count"] == [info["total_frames"]]
    for e in episodes:
        rows = [i for i, ep in enumerate(d["episode_index"]) if ep == e["episode_index"]]
        assert (e["dataset_from_index"], e["dataset_to_index"]) == (rows[0], rows[-1] + 1) and e["length"] == len(rows)
        assert d["frame_index"][rows[0]] == 0 and tasks["task"][tasks["task_index"].index(d["task_index"][rows[0]])] \
            in e["tasks"]
    for key in video_features:  # every video frame is a row, at the episode's timestamps
        path = root / info["video_path"].format(video_key=key, chunk_index=0, file_index=0)
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            times = [float(f.pts * stream.time_base) for f in container.decode(stream)]
        assert len(times) == info["total_frames"]
        for e in episodes:
            start, stop = e[f"videos/{key}/from_timestamp"], e[f"videos/{key}/to_timestamp"]
            inside = [t for t in times if start - 1e-4 <= t < stop - 1e-4]
            assert len(inside) == e["length"]
            np.testing.assert_allclose(np.asarray(inside) - start, np.arange(e["length"]) / info["fps"], atol=1e-4)


def test_refuses_an_existing_folder_and_other_versions(dataset, tmp_path):
    (tmp_path / "le").mkdir()
    with pytest.raises(FileExistsError):
        export_dataset(dataset, tmp_path / "le")
    export_dataset(dataset, tmp_path / "ok")
    info = json.loads((tmp_path / "ok/meta/info.json").read_text())
    (tmp_path / "ok/meta/info.json").write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    with pytest.raises(ValueError, match="v2.1"):
        import_dataset(tmp_path / "ok", tmp_path / "x.zarr")


def test_a_runs_replay_exports_with_its_sources(tmp_path):
    """A run folder: its latest checkpoint's replay (online rows and the demos it loaded) exports and imports."""
    from robot_rl.config import from_dict
    from robot_rl.runtime.supervisor import train
    from robot_rl.training.config import TrainConfig

    cfg = from_dict(TrainConfig, {
        "name": "r", "runs_dir": str(tmp_path), "total_env_steps": 120, "random_steps": 60, "learning_starts": 60,
        "eval_every": 0, "eval_episodes": 1, "checkpoint_every": 120, "progress": False, "demos": ["scripted:2"],
        "env": {"id": "robot_rl/Reach-v0", "max_episode_steps": 30, "kwargs": {"instruction": True}},
        "runtime": {"processes": False},
        "agent": {"num_critics": 2, "utd": 1, "batch_size": 16, "hidden_dims": [16]}})
    run_dir, _ = train(cfg)
    info = export_dataset(run_dir, tmp_path / "le")
    table = pq.read_table(tmp_path / "le" / info["data_path"].format(chunk_index=0, file_index=0)).to_pydict()
    assert set(table["source"]) == {0, 1}  # online and demo rows
    assert info["robot_type"] == "robot_rl/Reach-v0" and info["fps"] == 20
    # the online episodes carry their instruction's text too (the replay holds only its embedding)
    tasks = pq.read_table(tmp_path / "le" / "meta/tasks.parquet").column("task").to_pylist()
    assert tasks == ["move the gripper to the green ball"]
    meta = import_dataset(tmp_path / "le", tmp_path / "back.zarr")
    assert len(meta["episodes"]) == info["total_episodes"] >= 4


def test_tasks_are_indexed_by_their_string_as_lerobot_reads_them(dataset, tmp_path):
    """LeRobot reads meta/tasks.parquet with pandas and looks a task up by its string (``tasks.loc[task]``)."""
    pd = pytest.importorskip("pandas")
    root = tmp_path / "le"
    export_dataset(dataset, root)
    tasks = pd.read_parquet(root / "meta/tasks.parquet")
    data = pq.read_table(root / "data/chunk-000/file-000.parquet").to_pydict()
    _, _, episodes = read_episodes(dataset)
    for ep in episodes:
        assert ep.instruction  # PickColor says which cube
        index = int(tasks.loc[ep.instruction].task_index)
        assert index in data["task_index"]


@pytest.mark.parametrize("named_index", [False, True], ids=["lerobot-0.4", "lerobot-0.6"])
def test_a_dataset_in_lerobots_layout_with_image_cameras_imports(tmp_path, named_index):
    """Written the way LeRobot's writer lays it out: an ``image`` camera (PNG bytes in the data file, not a
    video), tasks.parquet from a pandas DataFrame indexed by the task (unnamed in 0.4.x, named ``task`` in 0.6.x)."""
    import cv2

    pd = pytest.importorskip("pandas")
    root = tmp_path / "ds"
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    (root / "data/chunk-000").mkdir(parents=True)
    rng = np.random.default_rng(0)
    lengths, rows, frames = [3, 4], [], []
    for ep, n in enumerate(lengths):
        for k in range(n):
            img = rng.integers(0, 256, (8, 8, 3), np.uint8)
            frames.append(img)
            rows.append({"observation.state": rng.normal(size=3).astype(np.float32).tolist(),
                         "action": rng.normal(size=2).astype(np.float32).tolist(),
                         "observation.images.top": {"bytes": cv2.imencode(".png", img[..., ::-1])[1].tobytes(),
                                                    "path": None},
                         "timestamp": k / 10, "frame_index": k, "episode_index": ep, "index": len(rows),
                         "task_index": 0})
    pq.write_table(pa.Table.from_pylist(rows), root / "data/chunk-000/file-000.parquet")
    starts = np.cumsum([0, *lengths])
    pq.write_table(pa.Table.from_pylist([
        {"episode_index": e, "tasks": ["stack the blocks"], "length": n, "data/chunk_index": 0,
         "data/file_index": 0, "dataset_from_index": int(starts[e]), "dataset_to_index": int(starts[e + 1])}
        for e, n in enumerate(lengths)]), root / "meta/episodes/chunk-000/file-000.parquet")
    index = pd.Index(["stack the blocks"], name="task" if named_index else None)
    pd.DataFrame({"task_index": [0]}, index=index).to_parquet(root / "meta/tasks.parquet")
    scalar = {"shape": [1], "names": None}
    (root / "meta/info.json").write_text(json.dumps({
        "codebase_version": "v3.0", "fps": 10, "total_episodes": 2, "total_frames": len(rows), "total_tasks": 1,
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "video_path": None,
        "features": {"observation.state": {"dtype": "float32", "shape": [3], "names": None},
                     "action": {"dtype": "float32", "shape": [2], "names": None},
                     "observation.images.top": {"dtype": "image", "shape": [8, 8, 3],
                                                "names": ["height", "width", "channels"]},
                     "timestamp": {"dtype": "float32", **scalar}, "frame_index": {"dtype": "int64", **scalar},
                     "episode_index": {"dtype": "int64", **scalar}, "index": {"dtype": "int64", **scalar},
                     "task_index": {"dtype": "int64", **scalar}}}))
    import_dataset(root, tmp_path / "back.zarr")
    spec, action_dim, episodes = read_episodes(tmp_path / "back.zarr")
    assert spec.cameras == {"top": (8, 8, 3)} and action_dim == 2
    episodes = list(episodes)
    assert [ep.length + 1 for ep in episodes] == lengths
    got = np.concatenate([ep.observations["pixels/top"] for ep in episodes])
    np.testing.assert_array_equal(got, np.stack(frames))  # PNG: lossless
    assert all(ep.instruction == "stack the blocks" for ep in episodes)
