"""Local transport over POSIX shared memory: a chunk ring per actor and one weight board per run.

No pickling anywhere: both sides lay out the same named arrays from the same spec and copy raw bytes.

* :class:`ChunkRing`: single-producer (the actor) / single-consumer (the learner) ring of chunk slots. The
  producer copies a chunk into the next free slot and then advances ``head``; the consumer reads slots up to
  ``head`` in place and then advances ``tail``. On x86-64 aligned 8-byte stores are atomic and not reordered
  with earlier stores, so no lock is needed. A full ring never blocks the actor: the chunk is counted as
  dropped and the learner fetches it from the actor's spool (see :mod:`robot_rl.runtime.spool`).
  The ring's header also carries the actor's heartbeat and statistics.
* :class:`WeightBoard`: the learner writes versioned policy weights under a sequence lock; actors copy them
  out whenever the version changes, never blocking the writer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from multiprocessing import resource_tracker, shared_memory

import numpy as np
import torch

ALIGN = 64


def open_shm(name: str, size: int = 0, create: bool = False) -> shared_memory.SharedMemory:
    """Creates or attaches a segment that outlives its creator: the run's processes unlink it explicitly.

    (Python's resource tracker would otherwise unlink it when *any* process that touched it exits, which is
    exactly wrong when an actor dies and the learner still has chunks to drain.)"""
    if create:
        try:  # a leftover of a crashed earlier run with the same name
            old = shared_memory.SharedMemory(name=name)
            old.close()
            old.unlink()
        except FileNotFoundError:
            pass
    shm = shared_memory.SharedMemory(name=name, create=create, size=size)
    try:
        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - tracker absent or already unregistered
        pass
    return shm


def unlink_shm(name: str) -> None:
    try:
        shm = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return
    shm.close()
    shm.unlink()  # also drops the registration that attaching made


def _layout(fields: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> tuple[dict[str, tuple[int, tuple, np.dtype]],
                                                                             int]:
    offsets, offset = {}, 0
    for name, (shape, dtype) in fields.items():
        offsets[name] = (offset, tuple(shape), np.dtype(dtype))
        offset += -(-int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize // ALIGN) * ALIGN
    return offsets, offset


# Header words of a chunk ring (int64 each).
# Written by the actor: HEAD, HEARTBEAT .. PAUSED_US, SENT (transitions in chunks so far);
# by the learner: TAIL, TAKEN_SEQ (next chunk sequence it expects).
HEAD, TAIL, SLOTS, ROWS, HEARTBEAT, PID, CLOSED, ENV_STEPS, VERSION, DROPPED, JITTER_P99_US, INFER_US, \
    PERIOD_US, EPISODES, NEXT_SEQ, PAUSED_US, TAKEN_SEQ, SENT = range(18)
HEADER_WORDS = 24


class ChunkRing:
    """A ring of ``slots`` chunk slots of ``rows`` rows each, in one shared-memory segment."""

    def __init__(self, name: str, specs: Mapping[str, tuple[tuple[int, ...], np.dtype]], slots: int = 0,
                 rows: int = 0, create: bool = False) -> None:
        self.name, self.specs = name, dict(specs)
        if create:
            size = self._size(slots, rows)
            self.shm = open_shm(name, size, create=True)
        else:
            self.shm = open_shm(name)
            probe = np.ndarray((HEADER_WORDS,), np.int64, self.shm.buf)
            slots, rows = int(probe[SLOTS]), int(probe[ROWS])
            if self.shm.size < self._size(slots, rows):
                raise ValueError(f"shared-memory ring {name} is smaller than its declared layout")
        self.slots, self.rows = slots, rows
        buf = self.shm.buf
        self.header = np.ndarray((HEADER_WORDS,), np.int64, buf)
        self.meta = np.ndarray((slots, 2), np.int64, buf, offset=HEADER_WORDS * 8)  # seq, rows
        base = HEADER_WORDS * 8 + slots * 16
        base = -(-base // ALIGN) * ALIGN
        self.arrays = {}
        for key, (shape, dtype) in self.specs.items():
            self.arrays[key] = np.ndarray((slots, rows, *shape), dtype, buf, offset=base)
            base += -(-slots * rows * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize // ALIGN) * ALIGN
        if create:
            self.header[:] = 0
            self.header[SLOTS], self.header[ROWS] = slots, rows

    def _size(self, slots: int, rows: int) -> int:
        size = -(-(HEADER_WORDS * 8 + slots * 16) // ALIGN) * ALIGN
        for shape, dtype in self.specs.values():
            size += -(-slots * rows * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize // ALIGN) * ALIGN
        return size

    # ------------------------------------------------------------- producer
    def put(self, chunk: Mapping[str, np.ndarray], seq: int) -> bool:
        """Copies ``chunk`` into the next slot; False (nothing written) when the ring is full."""
        head = int(self.header[HEAD])
        if head - int(self.header[TAIL]) >= self.slots:
            self.header[DROPPED] += 1
            return False
        n = len(chunk["valid"])
        if n > self.rows:
            raise ValueError(f"chunk of {n} rows does not fit a ring slot of {self.rows} rows")
        slot = head % self.slots
        for key, arr in self.arrays.items():
            arr[slot, :n] = chunk[key]
        self.meta[slot] = (seq, n)
        self.header[HEAD] = head + 1  # publish: the data above is complete before this store
        return True

    # ------------------------------------------------------------- consumer
    def pending(self) -> int:
        return int(self.header[HEAD] - self.header[TAIL])

    def peek(self) -> tuple[int, dict[str, np.ndarray]] | None:
        """``(seq, views of the oldest unread chunk)`` or None; call :meth:`release` when done with it."""
        tail = int(self.header[TAIL])
        if tail >= int(self.header[HEAD]):
            return None
        slot = tail % self.slots
        seq, n = (int(x) for x in self.meta[slot])
        return seq, {key: arr[slot, :n] for key, arr in self.arrays.items()}

    def release(self) -> None:
        self.header[TAIL] += 1

    def drain(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        while (item := self.peek()) is not None:
            yield item
            self.release()

    def close(self, unlink: bool = False) -> None:
        self.header = self.meta = None  # type: ignore[assignment]
        self.arrays = {}
        try:
            self.shm.close()
        except BufferError:  # a view is still alive somewhere; the OS frees the mapping at exit
            pass
        if unlink:
            unlink_shm(self.name)


# Header words of the weight board.
W_SEQ, W_VERSION, W_NBYTES, W_TIME_NS, W_LEARNER_PID, W_LEARNER_BEAT, W_UPDATES, W_ENV_STEPS, W_STOP = range(9)
W_HEADER_WORDS = 16


class WeightBoard:
    """Versioned policy weights in shared memory, written by the learner and read by any number of actors.

    The header doubles as the learner's status (heartbeat, update and env-step counters, stop flag) that the
    actors read to pace themselves.
    """

    def __init__(self, name: str, template: Mapping[str, torch.Tensor], create: bool = False) -> None:
        self.name = name
        self.keys = sorted(template)
        self.shapes = {k: tuple(template[k].shape) for k in self.keys}
        self.dtypes = {k: template[k].dtype for k in self.keys}
        self.offsets, total = {}, 0
        for k in self.keys:
            self.offsets[k] = total
            total += template[k].numel() * template[k].element_size()
        self.nbytes = total
        size = W_HEADER_WORDS * 8 + total
        self.shm = open_shm(name, size, create=True) if create else open_shm(name)
        self.header = np.ndarray((W_HEADER_WORDS,), np.int64, self.shm.buf)
        if create:
            self.header[:] = 0
            self.header[W_NBYTES] = total
        elif int(self.header[W_NBYTES]) == 0:  # the learner created it a moment ago and is still writing
            self.header = self.payload = None  # type: ignore[assignment]
            self.shm.close()
            raise FileNotFoundError(f"weight board {name} is not initialised yet")
        elif int(self.header[W_NBYTES]) != total:
            raise ValueError(f"weight board {name} holds {int(self.header[W_NBYTES])} bytes, this policy needs "
                             f"{total}: actor and learner configs differ")
        self.payload = np.ndarray((total,), np.uint8, self.shm.buf, offset=W_HEADER_WORDS * 8)

    @property
    def version(self) -> int:
        return int(self.header[W_VERSION])

    def publish(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        h = self.header
        if h[W_SEQ] % 2 == 0:  # odd: write in progress (already odd if a learner died mid-publish: stays so)
            h[W_SEQ] += 1
        for k in self.keys:
            src = state[k].detach().to("cpu").contiguous().view(torch.uint8).reshape(-1).numpy()
            self.payload[self.offsets[k]:self.offsets[k] + src.size] = src
        h[W_VERSION] = version
        h[W_TIME_NS] = time.time_ns()
        h[W_SEQ] += 1  # even: consistent

    def read(self, timeout: float = 1.0) -> tuple[int, dict[str, torch.Tensor]] | None:
        """``(version, tensors)`` copied under the sequence lock; None if no version is published yet."""
        deadline = time.monotonic() + timeout
        while True:
            s1 = int(self.header[W_SEQ])
            if s1 % 2 == 0:
                version = int(self.header[W_VERSION])
                data = self.payload.copy()
                if int(self.header[W_SEQ]) == s1:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"weight board {self.name}: no consistent read within {timeout} s")
            time.sleep(0.0005)
        if version == 0:
            return None
        out = {}
        raw = torch.from_numpy(data)
        for k in self.keys:
            n = int(np.prod(self.shapes[k], dtype=np.int64)) * torch.empty((), dtype=self.dtypes[k]).element_size()
            out[k] = raw[self.offsets[k]:self.offsets[k] + n].view(self.dtypes[k]).reshape(self.shapes[k])
        return version, out

    def close(self, unlink: bool = False) -> None:
        self.header = self.payload = None  # type: ignore[assignment]
        try:
            self.shm.close()
        except BufferError:
            pass
        if unlink:
            unlink_shm(self.name)
