"""Preallocated ring storage for one replay partition, with every frame stored once.

Layout: one *row* per observation. A transition lives in the row of its observation and points at the row of
its next observation (``next_row``). Consecutive transitions of an episode share rows (next obs of step t is the
obs of step t+1), so an episode of T steps takes T + 1 rows: memory per transition is (T + 1) / T frames per
camera. Rows that only hold an episode's final observation have ``valid = False`` and are never sampled as a
transition start.

Several concurrent episode streams (e.g. the N sims of a batched env) are kept apart by a ``stream`` id.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from robot_rl.spaces import ObsSpec, obs_leaf

SOURCES = ("online", "demo", "intervention")
SOURCE_CODE = {name: i for i, name in enumerate(SOURCES)}

# Per-row metadata arrays: name -> (dtype, per-row shape is scalar).
META_FIELDS: dict[str, np.dtype] = {
    "chunk_index": np.dtype(np.int32),
    "reward": np.dtype(np.float32),
    "terminated": np.dtype(bool),
    "truncated": np.dtype(bool),
    "intervened": np.dtype(bool),
    "source": np.dtype(np.uint8),
    "policy_version": np.dtype(np.int64),
    "episode_id": np.dtype(np.int64),
    "step": np.dtype(np.int64),
    "next_row": np.dtype(np.int64),
    "valid": np.dtype(bool),
}


# What a row holds beyond its observation, with the value of a row that holds no transition (yet): the executed
# action, and the base policy's proposal for this step with the step's index in the base's action chunk (-1 = no
# base policy acted: the fine-tuning agents read both, see robot_rl.policies).
ROW_DEFAULTS = {"chunk_index": -1, "next_row": -1}


def array_specs(spec: ObsSpec, action_dim: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Every stored array: name -> (per-row shape, dtype). Observation arrays are named as
    :meth:`ObsSpec.obs_arrays` names them (``state``, ``instruction``, ``pixels/<camera>``)."""
    out = spec.obs_arrays()
    out["action"] = ((action_dim,), np.dtype(np.float32))
    out["base_action"] = ((action_dim,), np.dtype(np.float32))
    out.update({name: ((), dtype) for name, dtype in META_FIELDS.items()})
    return out


def prefaulted_zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Zeroed array whose pages are mapped now (MAP_POPULATE), not on first write. Frame storage is written once
    per row while the learner waits; a first-touch page fault cost ~17 us per 4 KiB page on the project's
    machines (~440 us per 2 x 128x128 frame pair) against ~3 us per page populated up front."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if nbytes < (1 << 20) or not populate:
        return np.zeros(shape, dtype)
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
    return np.frombuffer(buf, dtype).reshape(shape)


def available_ram() -> int | None:
    """Bytes of RAM a new allocation can get: the kernel's MemAvailable (free pages plus the page cache it can
    reclaim; the free pages alone undercount on a machine that has read a lot of files), else the free pages, else
    None (unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    if hasattr(os, "sysconf"):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


class RingStorage:
    """Fixed-capacity ring of observation rows (see module docstring). Oldest rows are overwritten first."""

    def __init__(self, spec: ObsSpec, action_dim: int, capacity: int) -> None:
        if capacity < 2:
            raise ValueError(f"replay capacity must be >= 2, got {capacity}")
        self.spec, self.action_dim, self.capacity = spec, action_dim, int(capacity)
        specs = array_specs(spec, action_dim)
        need = self.bytes_needed(spec, action_dim, capacity)
        available = available_ram()
        if spec.cameras and available is not None and need > available:
            raise MemoryError(f"a replay partition of capacity {capacity} with cameras needs {need / 2**30:.1f} GiB "
                              f"but {available / 2**30:.1f} GiB of RAM is available: lower replay.*_capacity")
        self.arrays: dict[str, np.ndarray] = {
            name: (prefaulted_zeros if len(shape) >= 3 else np.zeros)((self.capacity, *shape), dtype)
            for name, (shape, dtype) in specs.items()}
        for name, value in ROW_DEFAULTS.items():
            self.arrays[name].fill(value)
        self._obs_names = tuple(spec.obs_arrays())
        self.base_fields = False  # samples carry the base policy's proposals (ReplayBuffer.with_base)
        self.n_step, self.discount = 1, 1.0  # n-step returns in samples (ReplayBuffer.set_n_step)
        self.cursor = 0  # next row to write
        self.size = 0  # rows in use
        self.num_transitions = 0  # valid rows currently stored
        self.total_added = 0  # transitions ever added (monotonic)
        self._pending: dict[int, int] = {}  # stream -> row holding that stream's latest next-obs

    @staticmethod
    def bytes_needed(spec: ObsSpec, action_dim: int, capacity: int) -> int:
        """Memory of a partition of ``capacity`` rows (what ``__init__`` checks against the available RAM)."""
        return sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                   for shape, dtype in array_specs(spec, action_dim).values()) * int(capacity)

    # ----------------------------------------------------------------- writing
    def _write_obs(self, obs: Mapping[str, Any]) -> int:
        row = self.cursor
        if self.arrays["valid"][row] and self.size == self.capacity:
            self.num_transitions -= 1
        for stream, pending_row in list(self._pending.items()):
            if pending_row == row:  # the ring caught up with a stream's open episode
                del self._pending[stream]
        a = self.arrays
        a["valid"][row] = False
        a["next_row"][row] = a["chunk_index"][row] = -1
        a["base_action"][row] = 0.0
        for name in self._obs_names:
            a[name][row] = obs_leaf(obs, name)
        self.cursor = (row + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return row

    def add(self, obs: Mapping[str, Any], action: np.ndarray, reward: float, terminated: bool, truncated: bool,
            next_obs: Mapping[str, Any], *, intervened: bool = False, source: str = "online",
            policy_version: int = 0, episode_id: int = 0, step: int = 0, stream: int = 0,
            base_action: np.ndarray | None = None, chunk_index: int = -1) -> int:
        """Stores one transition; returns its row. ``obs`` is written only if it does not continue ``stream``.
        ``base_action``/``chunk_index``: a base policy's proposal for this step and its index in the base's chunk."""
        row = self._pending.pop(stream, None)
        if row is None or not np.array_equal(self.arrays["state"][row], obs["state"]):
            row = self._write_obs(obs)
        next_row = self._write_obs(next_obs)
        a = self.arrays
        a["action"][row] = action
        a["reward"][row] = reward
        a["terminated"][row] = terminated
        a["truncated"][row] = truncated
        a["intervened"][row] = intervened
        a["source"][row] = SOURCE_CODE[source]
        a["policy_version"][row] = policy_version
        a["episode_id"][row] = episode_id
        a["step"][row] = step
        if base_action is not None:
            a["base_action"][row] = base_action
        a["chunk_index"][row] = chunk_index
        a["next_row"][row] = next_row
        a["valid"][row] = True
        self.num_transitions += 1
        self.total_added += 1
        if not (terminated or truncated):
            self._pending[stream] = next_row
        return row

    # ---------------------------------------------------------------- reading
    def sample_rows(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` uniformly random transition rows (vectorised rejection of final-obs-only rows)."""
        if self.num_transitions == 0:
            raise ValueError("cannot sample from an empty replay partition")
        rows = rng.integers(0, self.size, n)
        bad = ~self.arrays["valid"][rows]
        while bad.any():  # final-obs rows are ~1/T of the ring, so this converges in a few rounds
            rows[bad] = rng.integers(0, self.size, int(bad.sum()))
            bad[bad] = ~self.arrays["valid"][rows[bad]]
        return rows

    def gather(self, rows: np.ndarray, out: dict[str, np.ndarray] | None = None,
               offset: int = 0, pixels: bool = True) -> dict[str, np.ndarray]:
        """Transitions at ``rows`` as flat arrays. With ``out`` (flat preallocated arrays), writes into
        ``out[name][offset:offset + len(rows)]`` instead of allocating. ``pixels=False`` leaves the camera frames
        out (an agent that reads none skips the largest gathers)."""
        a = self.arrays
        if self.n_step > 1:
            end, ret, disc, term = self.n_step_chain(rows)
        else:
            end = rows
        nxt = a["next_row"][end]
        result = out if out is not None else {}
        sel = slice(offset, offset + len(rows))

        def put(key: str, src: np.ndarray, index: np.ndarray) -> None:
            if src.ndim >= 3:  # frames: torch's gather is multi-threaded and ~2.5x faster than np.take here
                t_index = torch.from_numpy(index)
                if out is None:
                    result[key] = torch.index_select(torch.from_numpy(src), 0, t_index).numpy()
                else:
                    torch.index_select(torch.from_numpy(src), 0, t_index, out=torch.from_numpy(out[key][sel]))
            elif out is None:
                result[key] = src[index]
            else:
                out[key][sel] = src[index]

        for name in self._obs_names:
            if not pixels and name.startswith("pixels/"):
                continue
            put(f"obs/{name}", self.arrays[name], rows)
            put(f"next_obs/{name}", self.arrays[name], nxt)
        summed = ("reward", "terminated") if self.n_step > 1 else ()  # written below from the n-step chain
        for name in ("action", *META_FIELDS):
            if name not in ("next_row", "valid", "chunk_index", *summed):
                put(name, self.arrays[name], rows)
        if self.n_step > 1:
            for key, value in (("reward", ret), ("terminated", term), ("discount", disc)):
                if out is None:
                    result[key] = value
                else:
                    out[key][sel] = value
        if self.base_fields:
            # The base policy's proposals at this and at the next observation (a residual agent's critic target
            # needs the latter). Where the base never saw the next observation (an episode's final one, or a
            # transition not arrived yet) the last proposal stands in for it, and next_chunk_index reads -1.
            put("base_action", a["base_action"], rows)
            put("chunk_index", a["chunk_index"], rows)
            stand_in = np.where(a["valid"][nxt], nxt, end)
            put("next_base_action", a["base_action"], stand_in)
            put("next_chunk_index", a["chunk_index"], nxt)
        return result

    def n_step_chain(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Follows each row's episode up to ``n_step`` transitions: the last row of the chain, the discounted
        reward sum, the discount of the bootstrap (``discount ** k`` for k transitions) and whether the chain
        ended in a termination. A chain stops at a terminal, a truncation, a transition not stored (yet) or one
        that is not the episode's next step."""
        a = self.arrays
        end = rows.copy()
        ret = a["reward"][rows].astype(np.float32)
        term = a["terminated"][rows].copy()
        disc = np.full(len(rows), self.discount, np.float32)
        going = ~(term | a["truncated"][rows])
        for _ in range(self.n_step - 1):
            nxt = a["next_row"][end]
            safe = np.maximum(nxt, 0)
            # the next row's transition continues this one (a stream that stopped and restarted from an equal
            # observation shares the row, but its next transition is not the next step)
            going &= ((nxt >= 0) & a["valid"][safe] & (a["step"][safe] == a["step"][end] + 1)
                      & (a["episode_id"][safe] == a["episode_id"][end]))
            if not going.any():
                break
            step = nxt[going]
            ret[going] += disc[going] * a["reward"][step]
            disc[going] *= self.discount
            term[going] = a["terminated"][step]
            end[going] = step
            going[going] = ~(a["terminated"][step] | a["truncated"][step])
        return end, ret, disc, term

    def append_rows(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Bulk-appends rows read from a store (e.g. a demo dataset); ``next_row`` is relative to ``arrays``."""
        n = len(arrays["valid"])
        if n > self.capacity - self.size:
            raise ValueError(f"{n} rows do not fit: partition capacity {self.capacity}, {self.size} rows in use; "
                             "raise the partition's capacity")
        start = self.cursor
        for name, dst in self.arrays.items():
            dst[start:start + n] = arrays[name]
        nxt = self.arrays["next_row"][start:start + n]
        nxt[nxt >= 0] += start
        added = int(np.count_nonzero(arrays["valid"]))
        self.cursor = (start + n) % self.capacity
        self.size += n
        self.num_transitions += added
        self.total_added += added

    # ------------------------------------------------------------ persistence
    def counters(self) -> dict[str, int]:
        return {"cursor": self.cursor, "size": self.size, "num_transitions": self.num_transitions,
                "total_added": self.total_added, "capacity": self.capacity}

    def restore(self, arrays: Mapping[str, np.ndarray], counters: Mapping[str, int]) -> None:
        """Fills the ring from saved rows (``arrays[name][:size]``), re-packing if the capacity differs."""
        size, cursor = int(counters["size"]), int(counters["cursor"])
        if size > self.capacity:
            raise ValueError(f"saved partition has {size} rows but the replay capacity is {self.capacity}; "
                             "raise replay capacity")
        wrapped = size == int(counters["capacity"]) and cursor != 0
        if wrapped and size < self.capacity:  # into a larger ring: oldest row first
            order = (np.arange(size) + cursor) % size
            self.cursor = size
        else:  # same layout: copy as is, bit for bit
            order = np.arange(size)
            self.cursor = cursor if wrapped else size % self.capacity
        new_index = np.empty(size, np.int64)
        new_index[order] = np.arange(size)
        for name, dst in self.arrays.items():
            dst[:size] = arrays[name][order]
        nxt = self.arrays["next_row"][:size]
        nxt[nxt >= 0] = new_index[nxt[nxt >= 0]]
        self.size = size
        self.num_transitions = int(self.arrays["valid"][:size].sum())
        self.total_added = int(counters.get("total_added", self.num_transitions))
        self._pending.clear()
