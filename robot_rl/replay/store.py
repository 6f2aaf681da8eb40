"""zarr persistence of the replay: whole-buffer save/load and crash-safe streaming append of episodes.

On disk (a zarr v3 group)::

    <store>/zarr.json            attrs: format, version, spec (state_dim, cameras, action_dim)
    <store>/<partition>/<array>  one array per stored field, rows = observation rows (see storage.py)
    <store>/commit.json          per-partition counters; written last and atomically

Only rows counted in ``commit.json`` are trusted, so an append or save that dies half way leaves the previous
committed content readable. Every load checks each array's presence, dtype, row shape, length and that its
chunks are on disk, and names the array and the expected vs found values when something is off.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from robot_rl.replay.buffer import PARTITIONS, ReplayBuffer, ReplayConfig
from robot_rl.replay.rows import BlockBuilder
from robot_rl.replay.storage import RingStorage, array_specs
from robot_rl.spaces import ObsSpec
from robot_rl.utils.state_io import atomic_write

FORMAT, VERSION = "robot_rl.replay", 1
COMMIT = "commit.json"
# Row arrays that stores written by earlier versions lack, with the value such rows read as.
ADDED_LATER = {"base_action": 0.0, "chunk_index": -1}


class ReplayStoreError(RuntimeError):
    """A replay store is missing, incomplete or does not match what the caller expects."""


def _chunk_rows(row_shape: tuple[int, ...], dtype: np.dtype) -> int:
    row_bytes = max(1, int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize)
    return int(max(64, min(65536, (4 << 20) // row_bytes))) if row_bytes < 16384 else 64


def _spec_attrs(spec: ObsSpec, action_dim: int) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "state_dim": spec.state_dim, "action_dim": action_dim,
            "cameras": {k: list(v) for k, v in spec.cameras.items()}, "instruction_dim": spec.instruction_dim}


def _write_partition(root: zarr.Group, name: str, storage: RingStorage, rows: int) -> None:
    group = root.require_group(name)
    for key, (shape, dtype) in array_specs(storage.spec, storage.action_dim).items():
        arr = group.create_array(key, shape=(rows, *shape), dtype=dtype,
                                 chunks=(_chunk_rows(shape, dtype), *shape), config={"write_empty_chunks": True})
        if rows:
            arr[:] = storage.arrays[key][:rows]


def save_buffer(buffer: ReplayBuffer, path: str | Path) -> None:
    """Writes every partition to a new store beside ``path``, then swaps it in with renames."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    root = zarr.open_group(str(tmp), mode="w", attributes=_spec_attrs(buffer.spec, buffer.action_dim))
    commit: dict[str, Any] = {"partitions": {}, "sampler": buffer.state()}
    for name, storage in buffer.partitions.items():
        _write_partition(root, name, storage, storage.size)
        commit["partitions"][name] = storage.counters()
    atomic_write(tmp / COMMIT, lambda f: f.write_text(json.dumps(commit)))
    old = path.with_name(f".{path.name}.old{os.getpid()}")
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def _open(path: Path) -> tuple[zarr.Group, dict[str, Any], ObsSpec, int]:
    if not path.exists():
        raise ReplayStoreError(f"replay store not found: {path}")
    commit_file = path / COMMIT
    if not commit_file.is_file():
        raise ReplayStoreError(f"replay store {path} is incomplete: no {COMMIT} (a write was interrupted?)")
    try:
        root = zarr.open_group(str(path), mode="r")
        attrs = dict(root.attrs)
        commit = json.loads(commit_file.read_text())
    except Exception as exc:  # zarr/json raise many types for a damaged store
        raise ReplayStoreError(f"replay store {path} cannot be read: {exc}") from exc
    if attrs.get("format") != FORMAT:
        raise ReplayStoreError(f"{path} is not a robot_rl replay store (format {attrs.get('format')!r})")
    spec = ObsSpec(int(attrs["state_dim"]), {k: tuple(v) for k, v in attrs["cameras"].items()},
                   int(attrs.get("instruction_dim", 0)))
    return root, commit, spec, int(attrs["action_dim"])


def _read_partition(root: zarr.Group, path: Path, name: str, rows: int, spec: ObsSpec,
                    action_dim: int) -> dict[str, np.ndarray]:
    """Validated arrays of one partition, first ``rows`` rows."""
    out = {}
    for key, (shape, dtype) in array_specs(spec, action_dim).items():
        where = f"replay store {path}: array '{name}/{key}'"
        try:
            arr = root[f"{name}/{key}"]
        except KeyError:
            if key in ADDED_LATER:  # a store written before the field existed: every row holds no base proposal
                out[key] = np.full((rows, *shape), ADDED_LATER[key], dtype)
                continue
            raise ReplayStoreError(f"{where} is missing (expected shape ({rows}, {', '.join(map(str, shape))}) "
                                   f"{dtype})") from None
        if arr.dtype != dtype or tuple(arr.shape[1:]) != shape or arr.shape[0] < rows:
            raise ReplayStoreError(f"{where}: expected shape ({rows}, {', '.join(map(str, shape))}) {dtype}, "
                                   f"found {tuple(arr.shape)} {arr.dtype}")
        needed = math.ceil(rows / arr.chunks[0]) if rows else 0
        if arr.nchunks_initialized < needed:
            raise ReplayStoreError(f"{where} is truncated: {arr.nchunks_initialized} of {needed} chunks on disk")
        try:
            out[key] = arr[:rows] if rows else np.zeros((0, *shape), dtype)
        except Exception as exc:
            raise ReplayStoreError(f"{where} is corrupted: {exc}") from exc
    return out


def _check_spec(path: Path, spec: ObsSpec, action_dim: int, expected: ObsSpec | None,
                expected_action_dim: int | None) -> None:
    if expected is not None and expected != spec:
        found, want = array_specs(spec, action_dim), array_specs(expected, action_dim)
        diffs = [f"'{k}' expected {want.get(k, 'absent')}, found {found.get(k, 'absent')}"
                 for k in sorted(set(found) | set(want)) if found.get(k) != want.get(k)]
        raise ReplayStoreError(f"replay store {path} does not match the observation spec: {'; '.join(diffs)}")
    if expected_action_dim is not None and expected_action_dim != action_dim:
        raise ReplayStoreError(f"replay store {path}: array 'action' expected ({expected_action_dim},) float32 "
                               f"per row, found ({action_dim},)")


def check_store(path: str | Path, spec: ObsSpec, action_dim: int) -> None:
    """Raises :class:`ReplayStoreError` unless ``path`` is a replay store (or dataset) of these spaces; reads only
    its metadata."""
    path = Path(path)
    _, _, found_spec, found_action_dim = _open(path)
    _check_spec(path, found_spec, found_action_dim, spec, action_dim)


def load_buffer(path: str | Path, cfg: ReplayConfig | None = None, expected_spec: ObsSpec | None = None,
                expected_action_dim: int | None = None) -> ReplayBuffer:
    """A ReplayBuffer holding exactly what :func:`save_buffer` wrote (capacities grow to fit if needed)."""
    path = Path(path)
    root, commit, spec, action_dim = _open(path)
    _check_spec(path, spec, action_dim, expected_spec, expected_action_dim)
    cfg = cfg or ReplayConfig()
    parts = commit["partitions"]
    for name in PARTITIONS:  # a smaller configured capacity cannot hold the saved rows
        size = int(parts.get(name, {}).get("size", 0))
        if size > getattr(cfg, f"{name}_capacity"):
            cfg = dataclasses.replace(cfg, **{f"{name}_capacity": size})
    buffer = ReplayBuffer(spec, action_dim, cfg)
    for name, counters in parts.items():
        if name not in buffer.partitions:
            raise ReplayStoreError(f"replay store {path}: unknown partition {name!r}")
        arrays = _read_partition(root, path, name, int(counters["size"]), spec, action_dim)
        buffer.partitions[name].restore(arrays, counters)
    if "sampler" in commit:
        buffer.load_state(commit["sampler"])
    # A store holding a base policy's proposals samples them (a run with a base sets this itself).
    buffer.with_base = any(bool(np.any(p.arrays["chunk_index"][: p.size] >= 0)) for p in buffer.partitions.values())
    return buffer


def store_spec(path: str | Path) -> tuple[ObsSpec, int]:
    """``(spec, action_dim)`` of a store, from its attributes (no rows read)."""
    _, _, spec, action_dim = _open(Path(path))
    return spec, action_dim


def load_transitions(path: str | Path, partition: str | None = None, expected_spec: ObsSpec | None = None,
                     expected_action_dim: int | None = None) -> tuple[ObsSpec, int, dict[str, np.ndarray]]:
    """All committed rows of a store (one partition, or every partition concatenated), validated.

    Used to load demo datasets into a live buffer with :meth:`RingStorage.append_rows`.
    """
    path = Path(path)
    root, commit, spec, action_dim = _open(path)
    _check_spec(path, spec, action_dim, expected_spec, expected_action_dim)
    names = [partition] if partition else list(commit["partitions"])
    merged: dict[str, list[np.ndarray]] = {key: [] for key in array_specs(spec, action_dim)}
    offset = 0
    for name in names:
        if name not in commit["partitions"]:
            raise ReplayStoreError(f"replay store {path} has no partition {name!r} "
                                   f"(has {sorted(commit['partitions'])})")
        counters = commit["partitions"][name]
        arrays = _oldest_first(_read_partition(root, path, name, int(counters["size"]), spec, action_dim),
                               counters)
        arrays["next_row"][arrays["next_row"] >= 0] += offset
        offset += int(counters["size"])
        for key, value in arrays.items():
            merged[key].append(value)
    return spec, action_dim, {k: np.concatenate(v) for k, v in merged.items()}


def add_dataset(buffer: ReplayBuffer, path: str | Path, partition: str = "demos") -> int:
    """Appends every transition of a store on disk (e.g. a demo dataset) to ``buffer``'s ``partition``; returns how
    many rows were added."""
    _, _, arrays = load_transitions(path, expected_spec=buffer.spec, expected_action_dim=buffer.action_dim)
    before = buffer.partitions[partition].num_transitions
    buffer.partitions[partition].append_rows(arrays)
    return buffer.partitions[partition].num_transitions - before


def _oldest_first(arrays: Mapping[str, np.ndarray], counters: Mapping[str, int]) -> dict[str, np.ndarray]:
    size, cursor = int(counters["size"]), int(counters["cursor"])
    if not (size == int(counters["capacity"]) and cursor != 0):
        return {k: np.array(v) for k, v in arrays.items()}
    order = (np.arange(size) + cursor) % size
    new_index = np.empty(size, np.int64)
    new_index[order] = np.arange(size)
    out = {k: v[order] for k, v in arrays.items()}
    nxt = out["next_row"]
    nxt[nxt >= 0] = new_index[nxt[nxt >= 0]]
    return out


SCALAR_ONLY = frozenset({"source", "episode_id"})
"""Transition fields an episode holds once."""


class EpisodeWriter:
    """Appends whole episodes to a store on disk, one commit per episode (crash-safe streaming append).

    ``append(observations, actions, rewards, terminated, truncated, **meta)`` takes T + 1 observations (the
    last is the final next-obs) and T of everything else; the episode is durable when the call returns.
    """

    def __init__(self, path: str | Path, spec: ObsSpec, action_dim: int, partition: str = "demos") -> None:
        self.path, self.spec, self.action_dim, self.partition = Path(path), spec, action_dim, partition
        if (self.path / COMMIT).exists():
            self.root, self.commit, found, found_a = _open(self.path)
            _check_spec(self.path, found, found_a, spec, action_dim)
            self.root = zarr.open_group(str(self.path), mode="r+")
        else:
            self.root = zarr.open_group(str(self.path), mode="w", attributes=_spec_attrs(spec, action_dim))
            self.commit = {"partitions": {}}
        if partition not in self.commit["partitions"]:
            _write_partition(self.root, partition, RingStorage(spec, action_dim, 2), 0)
            self.commit["partitions"][partition] = {"cursor": 0, "size": 0, "num_transitions": 0,
                                                    "total_added": 0, "capacity": 0}
            self._write_commit()

    @property
    def num_episodes(self) -> int:
        return int(self.commit["partitions"][self.partition].get("episodes", 0))

    def append(self, observations: list[Mapping[str, Any]], actions: np.ndarray, rewards: np.ndarray,
               terminated: np.ndarray, truncated: np.ndarray, **meta: Any) -> None:
        """``meta``: transition fields (:data:`robot_rl.replay.rows.TRANSITION_DEFAULTS`), each one value for the
        whole episode or one per step (``base_action [T, A]``, ``chunk_index [T]``, ``intervened [T]``);
        ``source`` defaults to ``"demo"`` and ``episode_id`` to the next episode's number."""
        t = len(actions)
        if np.any(np.asarray(terminated[:-1])) or np.any(np.asarray(truncated[:-1])):
            raise ValueError("only the last step of an episode may be terminated or truncated")
        if len(observations) != t + 1:
            raise ValueError(f"an episode of {t} actions needs {t + 1} observations, got {len(observations)}")
        meta = {"source": "demo", **meta}
        if meta.get("episode_id") is None:
            meta["episode_id"] = self.num_episodes
        per_step = {k for k, v in meta.items() if k not in SCALAR_ONLY and np.ndim(v) > (k == "base_action")}
        builder = BlockBuilder(self.spec, self.action_dim, t)
        for i in range(t):
            builder.add(0, observations[i], actions[i], rewards[i], bool(terminated[i]), bool(truncated[i]),
                        observations[i + 1], step=i, **{k: v[i] if k in per_step else v for k, v in meta.items()})
        rows = builder.take()
        counters = self.commit["partitions"][self.partition]
        start = int(counters["size"])
        group = self.root[self.partition]
        rows["next_row"][: t] += start
        for key, (shape, dtype) in array_specs(self.spec, self.action_dim).items():
            if key not in group and key in ADDED_LATER:  # appending to a store written before the field existed
                group.create_array(key, shape=(start, *shape), dtype=dtype, fill_value=ADDED_LATER[key],
                                   chunks=(_chunk_rows(shape, dtype), *shape), config={"write_empty_chunks": True})
                if start:
                    group[key][:] = np.full((start, *shape), ADDED_LATER[key], dtype)
            # Empty (all-fill-value) chunks must still be written, or a truncated store would look complete.
            arr = group[key].with_config({"write_empty_chunks": True})
            arr.resize((start + t + 1, *arr.shape[1:]))
            arr[start:] = rows[key]
        size = start + t + 1
        counters.update(size=size, cursor=0, capacity=size, num_transitions=counters["num_transitions"] + t,
                        total_added=counters["total_added"] + t, episodes=self.num_episodes + 1)
        self._write_commit()

    def _write_commit(self) -> None:
        atomic_write(self.path / COMMIT, lambda f: f.write_text(json.dumps(self.commit)))
