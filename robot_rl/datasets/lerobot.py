"""LeRobotDataset v3.0, written and read without lerobot (it cannot be installed beside this project's torch).

The layout follows LeRobot's own source at huggingface/lerobot 7427f318 (package 0.6.2, ``CODEBASE_VERSION
"v3.0"``; files src/lerobot/datasets/{utils,dataset_metadata,dataset_writer,video_utils,compute_stats}.py)::

    meta/info.json  meta/stats.json  meta/tasks.parquet  meta/episodes/chunk-000/file-000.parquet
    data/chunk-000/file-000.parquet  videos/observation.images.<camera>/chunk-000/file-000.mp4

Features written: ``observation.state`` (float32 [D]), ``observation.images.<camera>`` (video, AV1 via
libsvtav1, yuv420p, g=2, crf=30, as LeRobot encodes), ``action`` (float32 [A]), ``next.reward``, ``next.done``,
``next.truncated``, ``next.success``, and robot_rl's ``intervened`` (a human steered this step), ``source``
(0 online, 1 demo, 2 intervention) and ``final``; then LeRobot's ``timestamp``, ``frame_index``,
``episode_index``, ``index``, ``task_index``. Instructions are the tasks.

An episode of T transitions is written as T + 1 frames: the last (``final`` true) holds the observation after the
last action, so a round trip keeps every transition; its action repeats the last one and its ``next.*`` are
false/0. A LeRobot dataset without ``final`` reads as T - 1 transitions per episode (its last frame is the final
observation). Many episodes share a data file and a video file (up to the size limits); episodes never split.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.datasets.episodes import Episode
from robot_rl.replay.rows import SOURCE_CODE, SOURCES
from robot_rl.spaces import ObsSpec

CODEBASE_VERSION = "v3.0"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
CHUNKS_SIZE, DATA_MB, VIDEO_MB = 1000, 100, 200
STATS = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")
VIDEO = {"vcodec": "libsvtav1", "pix_fmt": "yuv420p", "g": 2, "crf": 30, "preset": 12}
FLAGS = ("next.done", "next.truncated", "next.success", "intervened", "final")


def _next_file(chunk: int, file: int) -> tuple[int, int]:
    return (chunk + 1, 0) if file >= CHUNKS_SIZE - 1 else (chunk, file + 1)


def _features(spec: ObsSpec, action_dim: int, fps: int) -> dict[str, dict[str, Any]]:
    f: dict[str, dict[str, Any]] = {
        "observation.state": {"dtype": "float32", "shape": [spec.state_dim],
                              "names": [f"state_{i}" for i in range(spec.state_dim)]}}
    for cam, (h, w, c) in sorted(spec.cameras.items()):
        f[f"observation.images.{cam}"] = {
            "dtype": "video", "shape": [h, w, c], "names": ["height", "width", "channels"],
            "info": {"video.height": h, "video.width": w, "video.codec": "av1", "video.pix_fmt": VIDEO["pix_fmt"],
                     "video.is_depth_map": False, "video.fps": fps, "video.channels": c, "has_audio": False,
                     "video.g": VIDEO["g"], "video.crf": VIDEO["crf"], "video.preset": VIDEO["preset"]}}
    f["action"] = {"dtype": "float32", "shape": [action_dim], "names": [f"action_{i}" for i in range(action_dim)]}
    f["next.reward"] = {"dtype": "float32", "shape": [1], "names": None}
    f.update({k: {"dtype": "bool", "shape": [1], "names": None} for k in FLAGS})
    f["source"] = {"dtype": "int64", "shape": [1], "names": {"codes": list(SOURCES)}}
    for k, dtype in (("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"),
                     ("index", "int64"), ("task_index", "int64")):
        f[k] = {"dtype": dtype, "shape": [1], "names": None}
    return f


def _frames(ep: Episode) -> dict[str, np.ndarray]:
    """An episode's T + 1 frames as columns (no video)."""
    t = ep.length
    pad = lambda x, v: np.concatenate([x, np.full((1, *x.shape[1:]), v, x.dtype)])  # noqa: E731
    success = np.zeros(t, bool)
    success[-1] = bool(ep.success)
    return {"observation.state": ep.observations["state"].astype(np.float32),
            "action": np.concatenate([ep.action, ep.action[-1:]]).astype(np.float32),
            "next.reward": pad(ep.reward.astype(np.float32), 0.0), "next.done": pad(ep.terminated, False),
            "next.truncated": pad(ep.truncated, False), "next.success": pad(success, False),
            "intervened": pad(ep.intervened, False), "final": np.arange(t + 1) == t,
            "source": pad(np.array([SOURCE_CODE[s] for s in ep.source], np.int64), SOURCE_CODE[ep.source[-1]])}


def _stats(x: np.ndarray, image: bool = False) -> dict[str, Any]:
    """LeRobot's per-feature statistics (population std; images per channel in [0, 1], shape [C, 1, 1])."""
    x = np.asarray(x, np.float64)
    if image:
        x = x.reshape(-1, x.shape[-1]) / 255.0
    elif x.ndim == 1:
        x = x[:, None]
    q = np.quantile(x, [0.01, 0.10, 0.50, 0.90, 0.99], axis=0)
    out = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": np.array([len(x)]),
           **{k: q[i] for i, k in enumerate(("q01", "q10", "q50", "q90", "q99"))}}
    if image:
        out = {k: (v if k == "count" else v.reshape(-1, 1, 1)) for k, v in out.items()}
    return out


def _merge_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Episodes' stats combined as LeRobot does: count-weighted mean/variance, elementwise min/max, low quantiles
    by min and high by max (a bound)."""
    n = np.array([p["count"][0] for p in parts], np.float64)
    w = (n / n.sum()).reshape(-1, *[1] * np.ndim(parts[0]["mean"]))
    mean = (w * np.stack([p["mean"] for p in parts])).sum(0)
    var = (w * (np.stack([p["std"] for p in parts]) ** 2 + (np.stack([p["mean"] for p in parts]) - mean) ** 2)).sum(0)
    out = {"min": np.min([p["min"] for p in parts], 0), "max": np.max([p["max"] for p in parts], 0), "mean": mean,
           "std": np.sqrt(var), "count": np.array([int(n.sum())])}
    out.update({k: np.min([p[k] for p in parts], 0) for k in ("q01", "q10", "q50")})
    out.update({k: np.max([p[k] for p in parts], 0) for k in ("q90", "q99")})
    return out


class _VideoFile:
    """One camera's mp4 being written: episodes appended as consecutive frames of one AV1 stream."""

    def __init__(self, path: Path, fps: int, h: int, w: int) -> None:
        import av  # lazy: PyAV loads FFmpeg, for videos only

        os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its configuration to stderr otherwise
        # SVT-AV1 switches the thread that runs it to SCHED_FIFO where it may (root): put the caller's scheduling
        # back after every call, or an exporting process (and every thread it starts later) runs real-time
        self._sched = (os.sched_getscheduler(0), os.sched_getparam(0))
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.frames, self.bytes = path, 0, 0
        self.container = av.open(str(path), "w", options={"movflags": "faststart"})
        self.stream = self.container.add_stream(VIDEO["vcodec"], rate=fps, options={
            "g": str(VIDEO["g"]), "crf": str(VIDEO["crf"]), "preset": str(VIDEO["preset"])})
        self.stream.width, self.stream.height, self.stream.pix_fmt = w, h, VIDEO["pix_fmt"]

    def append(self, frames: np.ndarray) -> None:
        import av  # lazy: PyAV loads FFmpeg, for videos only

        for frame in frames:
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
            vf.pts = self.frames
            self.frames += 1
            for packet in self.stream.encode(vf):
                self.bytes += packet.size
                self.container.mux(packet)
        self._restore_scheduling()

    def close(self) -> None:
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()
        self._restore_scheduling()

    def _restore_scheduling(self) -> None:
        if os.sched_getscheduler(0) != self._sched[0]:
            os.sched_setscheduler(0, *self._sched)


def _arrow_table(columns: dict[str, np.ndarray], features: dict[str, dict[str, Any]]) -> Any:
    import pyarrow as pa  # optional: data

    arrays, hf = {}, {}
    for name, values in columns.items():
        feat = features[name]
        if feat["shape"] == [1]:
            arrays[name] = pa.array(values.reshape(-1))
            hf[name] = {"dtype": feat["dtype"], "_type": "Value"}
        else:
            flat = pa.array(values.reshape(-1))  # a fixed-size list with HF datasets' child name, as LeRobot's
            kind = pa.list_(pa.field("item", flat.type), feat["shape"][0])
            arrays[name] = pa.FixedSizeListArray.from_arrays(flat, type=kind)
            hf[name] = {"feature": {"dtype": feat["dtype"], "_type": "Value"}, "length": feat["shape"][0],
                        "_type": "Sequence"}
    table = pa.table(arrays)
    return table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": hf}})})


def write_lerobot(episodes: Iterable[Episode], spec: ObsSpec, action_dim: int, out: str | Path, fps: int,
                  robot_type: str | None = None, default_task: str = "") -> dict[str, Any]:
    """Writes ``episodes`` as a LeRobotDataset v3.0 at ``out`` (which must not exist); returns ``info.json``."""
    # optional: data
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists: LeRobot export writes a new dataset folder")
    features = _features(spec, action_dim, fps)
    video_keys = [k for k, f in features.items() if f["dtype"] == "video"]
    tasks: dict[str, int] = {}
    data_pos, writer, data_bytes = (0, 0), None, 0
    videos: dict[str, _VideoFile] = {}
    video_pos = dict.fromkeys(video_keys, (0, -1))
    episode_rows, stats_parts, index = [], [], 0
    for ep_index, ep in enumerate(episodes):
        task = ep.instruction or default_task
        task_index = tasks.setdefault(task, len(tasks))
        cols = _frames(ep)
        n = ep.length + 1
        cols.update(timestamp=(np.arange(n) / fps).astype(np.float32), frame_index=np.arange(n),
                    episode_index=np.full(n, ep_index), index=index + np.arange(n), task_index=np.full(n, task_index))
        table = _arrow_table(cols, features)
        if writer is not None and data_bytes + table.nbytes > DATA_MB * 1e6:
            writer.close()
            writer, data_pos = None, _next_file(*data_pos)
        if writer is None:
            path = out / DATA_PATH.format(chunk_index=data_pos[0], file_index=data_pos[1])
            path.parent.mkdir(parents=True, exist_ok=True)
            writer, data_bytes = pq.ParquetWriter(str(path), table.schema, compression="snappy"), 0
        writer.write_table(table, row_group_size=n)
        data_bytes += table.nbytes
        row: dict[str, Any] = {"episode_index": ep_index, "tasks": [task], "length": n,
                               "data/chunk_index": data_pos[0], "data/file_index": data_pos[1],
                               "dataset_from_index": index, "dataset_to_index": index + n}
        ep_stats = {k: _stats(v) for k, v in cols.items()}
        for key in video_keys:
            cam = key.rsplit(".", 1)[1]
            video = videos.get(key)
            if video is None or video.bytes > VIDEO_MB * 1e6:
                if video is not None:
                    video.close()
                video_pos[key] = _next_file(*video_pos[key]) if video is not None else (0, 0)
                h, w, _ = features[key]["shape"]
                video = videos[key] = _VideoFile(out / VIDEO_PATH.format(video_key=key, chunk_index=video_pos[key][0],
                                                                         file_index=video_pos[key][1]), fps, h, w)
            start = video.frames
            video.append(ep.observations[f"pixels/{cam}"])
            row.update({f"videos/{key}/chunk_index": video_pos[key][0], f"videos/{key}/file_index": video_pos[key][1],
                        f"videos/{key}/from_timestamp": start / fps, f"videos/{key}/to_timestamp": video.frames / fps})
            ep_stats[key] = _stats(ep.observations[f"pixels/{cam}"][:: max(1, n // 100)], image=True)
        for feat, values in ep_stats.items():
            row.update({f"stats/{feat}/{k}": v.tolist() for k, v in values.items()})
        row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        episode_rows.append(row)
        stats_parts.append(ep_stats)
        index += n
    if writer is not None:
        writer.close()
    for video in videos.values():
        video.close()
    if not episode_rows:
        raise ValueError("no complete episode to export")
    (out / "meta/episodes/chunk-000").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(episode_rows), str(out / EPISODES_PATH.format(chunk_index=0, file_index=0)),
                   compression="snappy")
    write_tasks(tasks, out / "meta/tasks.parquet")
    stats = {feat: {k: v.tolist() for k, v in _merge_stats([p[feat] for p in stats_parts]).items()}
             for feat in stats_parts[0]}
    (out / "meta/stats.json").write_text(json.dumps(stats))
    info = {"codebase_version": CODEBASE_VERSION, "robot_type": robot_type, "total_episodes": len(episode_rows),
            "total_frames": index, "total_tasks": len(tasks), "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": DATA_MB, "video_files_size_in_mb": VIDEO_MB, "fps": fps,
            "splits": {"train": f"0:{len(episode_rows)}"}, "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if video_keys else None, "features": features}
    (out / "meta/info.json").write_text(json.dumps(info, indent=2))
    return info


def read_lerobot(folder: str | Path) -> tuple[ObsSpec, int, dict[str, Any], Iterator[Episode]]:
    """``(spec, action_dim, info, episodes)`` of a LeRobotDataset v3.0 (written here or by LeRobot): state from
    ``observation.state``, cameras from ``observation.images.*`` (decoded from the videos), the task as the
    instruction. See the module docstring for how the final observation is found."""
    import pyarrow.parquet as pq  # optional: data

    folder = Path(folder)
    info = json.loads((folder / "meta/info.json").read_text())
    if info.get("codebase_version") != CODEBASE_VERSION:
        raise ValueError(f"{folder}: LeRobot dataset version {info.get('codebase_version')!r}, only "
                         f"{CODEBASE_VERSION} is read")
    features = info["features"]
    if "observation.state" not in features or "action" not in features:
        raise ValueError(f"{folder}: needs observation.state and action features")
    cams = {k.rsplit(".", 1)[1]: k for k, f in features.items()
            if k.startswith("observation.images.") and f["dtype"] in ("video", "image")}
    spec = ObsSpec(int(features["observation.state"]["shape"][0]),
                   {c: tuple(features[k]["shape"]) for c, k in sorted(cams.items())})
    action_dim = int(features["action"]["shape"][0])
    task_of = read_tasks(folder / "meta/tasks.parquet")
    episodes = sorted((r for f in sorted((folder / "meta/episodes").rglob("*.parquet"))
                       for r in pq.read_table(str(f)).to_pylist()), key=lambda r: r["episode_index"])

    def load() -> Iterator[Episode]:
        data_cache: dict[str, dict[str, np.ndarray]] = {}
        for row in episodes:
            path = str(folder / info["data_path"].format(chunk_index=row["data/chunk_index"],
                                                         file_index=row["data/file_index"]))
            if path not in data_cache:
                data_cache.clear()
                table = pq.read_table(path)
                data_cache[path] = {c: np.asarray(table.column(c).to_pylist()) for c in table.column_names}
            d = data_cache[path]
            yield _episode(folder, info, cams, task_of, row, d)

    return spec, action_dim, info, load()


def _episode(folder: Path, info: dict[str, Any], cams: dict[str, str], task_of: dict[int, str],
             row: dict[str, Any], d: dict[str, np.ndarray]) -> Episode:
    """One episode from its metadata row and its data file's columns ``d``."""
    sel = np.flatnonzero(d["episode_index"] == row["episode_index"])
    sel = sel[np.argsort(d["frame_index"][sel])]

    def col(key: str, default: Any) -> np.ndarray:
        return d[key][sel] if key in d else np.full(len(sel), default)

    obs = {"state": d["observation.state"][sel].astype(np.float32)}
    for cam, key in cams.items():
        if info["features"][key]["dtype"] == "image":  # frames stored in the data files (PNG / JPEG bytes)
            obs[f"pixels/{cam}"] = np.stack([_image(item, folder) for item in d[key][sel]])
            continue
        video = folder / info["video_path"].format(video_key=key, chunk_index=row[f"videos/{key}/chunk_index"],
                                                   file_index=row[f"videos/{key}/file_index"])
        obs[f"pixels/{cam}"] = _decode(video, row[f"videos/{key}/from_timestamp"], len(sel), info["fps"])
    final = col("final", False).astype(bool)
    t = len(sel) - 1  # transitions: every frame but the last (the final observation)
    if final.any() and not final[-1]:
        raise ValueError(f"{folder}: episode {row['episode_index']} has a final frame before its end")
    done = col("next.done", False).astype(bool)[:t]
    if not final.any() and t > 0:
        done[-1] = True  # a LeRobot recording ends where its episode ends
    success = col("next.success", False).astype(bool)
    return Episode(episode_id=int(row["episode_index"]), observations=obs,
                   action=d["action"][sel][:t].astype(np.float32),
                   reward=col("next.reward", 0.0).astype(np.float32)[:t],
                   terminated=done, truncated=col("next.truncated", False).astype(bool)[:t],
                   intervened=col("intervened", False).astype(bool)[:t],
                   source=[SOURCES[int(s)] for s in col("source", SOURCE_CODE["demo"])[:t]],
                   success=bool(success.any()), instruction=str(task_of.get(int(d["task_index"][sel][0]), "")))


def _image(item: Any, folder: Path) -> np.ndarray:
    """An ``image`` feature's cell (HF datasets' ``{"bytes", "path"}``) as RGB uint8 ``[H, W, 3]``."""
    import cv2  # optional: cameras

    raw = item.get("bytes") if isinstance(item, dict) else item
    if raw is None:
        raw = (folder / item["path"]).read_bytes()
    bgr = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"{folder}: an image frame that does not decode")
    return bgr[..., ::-1].copy()


def write_tasks(tasks: dict[str, int], path: Path) -> None:
    """``meta/tasks.parquet`` as LeRobot writes it (a pandas DataFrame indexed by the task string, one
    ``task_index`` column), so ``pd.read_parquet`` gives LeRobot the index it looks tasks up in."""
    # optional: data
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"task_index": pa.array(list(tasks.values()), pa.int64()), "task": pa.array(list(tasks))})
    pandas = {"index_columns": ["task"], "column_indexes": [{"name": None, "field_name": None, "pandas_type":
              "unicode", "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
              "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
                           "numpy_type": "int64", "metadata": None},
                          {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object",
                           "metadata": None}],
              "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.3"}
    pq.write_table(table.replace_schema_metadata({"pandas": json.dumps(pandas)}), str(path))


def read_tasks(path: Path) -> dict[int, str]:
    """``task_index -> task`` from ``meta/tasks.parquet``: the task strings as the pandas index (LeRobot's layout,
    named ``task`` or unnamed ``__index_level_0__``) or as a ``task`` column."""
    import pyarrow.parquet as pq  # optional: data

    table = pq.read_table(str(path))
    names = [c for c in ("task", "__index_level_0__") if c in table.column_names]
    if not names or "task_index" not in table.column_names:
        raise ValueError(f"{path}: no task strings (columns {table.column_names})")
    return dict(zip(table.column("task_index").to_pylist(), map(str, table.column(names[0]).to_pylist())))


def _decode(path: Path, start_s: float, frames: int, fps: int) -> np.ndarray:
    """``frames`` RGB frames of ``path`` from ``start_s`` on (frame k at start_s + k / fps)."""
    import av  # lazy: PyAV loads FFmpeg, for videos only

    out = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        first = round(start_s * fps)
        for frame in container.decode(stream):
            k = round(float(frame.pts * stream.time_base) * fps)
            if first <= k < first + frames:
                out.append(frame.to_ndarray(format="rgb24"))
            elif k >= first + frames:
                break
    if len(out) != frames:
        raise ValueError(f"{path}: {len(out)} frames from {start_s:.3f} s, the episode has {frames}")
    return np.stack(out)
