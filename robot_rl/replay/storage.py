"""Preallocated ring storage for one replay partition, with every frame stored once.

The rows are those of :mod:`robot_rl.replay.rows`: an episode of T steps takes T + 1 rows (memory per transition
is (T + 1) / T frames per camera); rows that only hold an episode's final observation are never sampled as a
transition start. Concurrent episode streams (the N sims of a batched env, the envs of several actors) are kept
apart by a ``stream`` id, so a stream's episode goes on across blocks without a second frame.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping

import numpy as np
import torch

from robot_rl.replay.rows import FIELDS, STORED, row_specs
from robot_rl.spaces import ObsSpec


def array_specs(spec: ObsSpec, action_dim: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Every stored array: name -> (per-row shape, dtype): the rows of :mod:`robot_rl.replay.rows` the replay keeps."""
    return row_specs(spec, action_dim, stored_only=True)


META = tuple(n for n, f in FIELDS.items() if f.stored and not f.action_shaped and n not in
             ("next_row", "valid", "chunk_index"))
"""The scalar fields a sample carries (``chunk_index`` only with the base policy's, the row links never)."""


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
        for name, f in FIELDS.items():
            if f.stored and f.empty:
                self.arrays[name].fill(f.empty)
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
    def extend(self, block: Mapping[str, np.ndarray], take: np.ndarray, stream_base: int = 0) -> int:
        """Writes the transitions of ``block`` (rows of :mod:`robot_rl.replay.rows`) at the rows ``take`` selects,
        with their observation rows, in one vectorised copy; returns how many transitions. A stream's first
        observation in the block that shows the state its open episode here ended on shares that row (no second
        frame); ``stream_base`` keeps the streams of different actors apart."""
        tx = np.flatnonzero(take)
        if not len(tx):
            return 0
        a, n = self.arrays, len(block["valid"])
        links = block["next_row"]
        member = np.zeros(n, bool)
        member[tx] = True
        member[links[tx]] = True
        rows = np.flatnonzero(member)
        streams = stream_base + block["stream"][rows].astype(np.int64)
        first_of_stream = np.unique(streams, return_index=True)[1]
        dest = np.full(n, -1, np.int64)
        reused = []
        for k in first_of_stream:  # a few streams per block
            s, r = int(streams[k]), int(rows[k])
            p = self._pending.pop(s, None)
            if p is not None and np.array_equal(a["state"][p], block["state"][r]):
                reused.append((r, p))
        new = rows[~np.isin(rows, [r for r, _ in reused])]
        if len(new) + len(reused) > self.capacity:
            raise ValueError(f"a block of {len(new)} new rows does not fit a replay partition of capacity "
                             f"{self.capacity}: raise the partition's capacity")
        pos = (self.cursor + np.arange(len(new))) % self.capacity
        for r, p in reused:
            if p in pos:  # the ring would overwrite the row it continues (a tiny ring): write it again instead
                raise ValueError(f"replay partition of capacity {self.capacity} is too small for a block of "
                                 f"{len(new)} rows: raise the partition's capacity")
            dest[r] = p
        dest[new] = pos
        # Rows overwritten: their transitions leave, and an open episode ending there does not go on.
        self.num_transitions -= int(np.count_nonzero(a["valid"][pos]))
        if self._pending:
            gone = set(pos.tolist())
            self._pending = {s: p for s, p in self._pending.items() if p not in gone}
        for name in self._obs_names:
            self._copy_rows(a[name], pos, block[name], new)
        for name, f in FIELDS.items():
            if f.stored:
                a[name][pos] = f.empty
        at = dest[tx]
        for name in STORED:
            if name not in ("next_row", "valid"):
                a[name][at] = block[name][tx]
        a["next_row"][at] = dest[links[tx]]
        a["valid"][at] = True
        self.cursor = int((self.cursor + len(new)) % self.capacity)
        self.size = min(self.size + len(new), self.capacity)
        self.num_transitions += len(tx)
        self.total_added += len(tx)
        # Each stream's episode stays open at its last transition's next observation unless that one ended it.
        tx_streams = stream_base + block["stream"][tx].astype(np.int64)
        last = len(tx) - 1 - np.unique(tx_streams[::-1], return_index=True)[1]
        for i in tx[last]:
            if not (block["terminated"][i] or block["truncated"][i]):
                self._pending[int(stream_base + block["stream"][i])] = int(dest[links[i]])
        return len(tx)

    @staticmethod
    def _copy_rows(dst: np.ndarray, at: np.ndarray, src: np.ndarray, rows: np.ndarray) -> None:
        """``dst[at] = src[rows]`` with one copy of the frames where the rows allow it (fancy indexing on both
        sides copies them twice: the block's rows gathered into a temporary, then scattered)."""
        if len(rows) > 1 and at[-1] - at[0] == len(at) - 1:  # one span of the ring (no wrap inside)
            span = dst[at[0]:at[-1] + 1]
            if rows[-1] - rows[0] == len(rows) - 1:
                span[...] = src[rows[0]:rows[-1] + 1]
            else:
                np.take(src, rows, axis=0, out=span, mode="clip")  # "raise" would buffer the output
        else:
            dst[at] = src[rows]

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
        for name in ("action", *META):
            if name not in summed:
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
