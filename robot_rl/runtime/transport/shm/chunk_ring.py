"""The chunk ring: single-producer (the actor) / single-consumer (the learner) ring of chunk slots in shared memory.

The producer copies a chunk into the next free slot and then advances ``head``; the consumer reads slots up to
``head`` in place and then advances ``tail``. On x86-64 aligned 8-byte stores are atomic and not reordered with
earlier stores, so no lock is needed. A full ring never blocks the actor: the chunk is counted as dropped and the
learner fetches it from the actor's spool (see :mod:`robot_rl.runtime.transport.spool`). The ring's header also
carries the actor's heartbeat and statistics.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping

import numpy as np

from robot_rl.runtime.transport.barrier import fence, require_ordering
from robot_rl.runtime.transport.shm.segments import ALIGN, open_shm, unlink_shm
from robot_rl.runtime.transport.status import ActorStats, ActorStatus

# Header words of a chunk ring (int64 each).
# Written by the actor: HEAD, HEARTBEAT .. PAUSED_US, SENT (transitions in chunks so far), BASE_* (base policy);
# by the learner: TAIL, TAKEN_SEQ (next chunk sequence it expects).
_HEAD, _TAIL, _SLOTS, _ROWS, _HEARTBEAT, _PID, _CLOSED, _ENV_STEPS, _VERSION, _DROPPED, _JITTER_P99_US, _INFER_US, \
    _PERIOD_US, _EPISODES, _NEXT_SEQ, _PAUSED_US, _TAKEN_SEQ, _SENT, _BASE_MISSED, _BASE_LATE, \
    _BASE_INFER_US, _SPOOL_KB, _STOP_REQUESTED = range(23)
_HEADER_WORDS = 24


# ActorStats' fields, in order
_STAT_WORDS = np.array([_ENV_STEPS, _VERSION, _JITTER_P99_US, _INFER_US, _PERIOD_US, _EPISODES, _NEXT_SEQ,
                        _PAUSED_US, _SENT, _BASE_MISSED, _BASE_LATE, _BASE_INFER_US, _SPOOL_KB, _STOP_REQUESTED])


class ChunkRing:
    """A ring of ``slots`` chunk slots of ``rows`` rows each, in one shared-memory segment."""

    def __init__(self, name: str, specs: Mapping[str, tuple[tuple[int, ...], np.dtype]], slots: int = 0,
                 rows: int = 0, create: bool = False) -> None:
        require_ordering()
        self.name, self.specs = name, dict(specs)
        if create:
            size = self._size(slots, rows)
            self.shm = open_shm(name, size, create=True)
        else:
            self.shm = open_shm(name)
            probe = np.ndarray((_HEADER_WORDS,), np.int64, self.shm.buf)
            slots, rows = int(probe[_SLOTS]), int(probe[_ROWS])
            del probe
            if self.shm.size < self._size(slots, rows):
                raise ValueError(f"shared-memory ring {name} is smaller than its declared layout")
        self.slots, self.rows = slots, rows
        buf = self.shm.buf
        self.header = np.ndarray((_HEADER_WORDS,), np.int64, buf)
        self.meta = np.ndarray((slots, 2), np.int64, buf, offset=_HEADER_WORDS * 8)  # seq, rows
        base = _HEADER_WORDS * 8 + slots * 16
        base = -(-base // ALIGN) * ALIGN
        self.arrays = {}
        for key, (shape, dtype) in self.specs.items():
            self.arrays[key] = np.ndarray((slots, rows, *shape), dtype, buf, offset=base)
            base += -(-slots * rows * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize // ALIGN) * ALIGN
        if create:
            self.header[:] = 0
            self.header[_SLOTS], self.header[_ROWS] = slots, rows
            self.header[_PID] = os.getpid()

    def _size(self, slots: int, rows: int) -> int:
        size = -(-(_HEADER_WORDS * 8 + slots * 16) // ALIGN) * ALIGN
        for shape, dtype in self.specs.values():
            size += -(-slots * rows * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize // ALIGN) * ALIGN
        return size

    # ------------------------------------------------------------- producer
    def put(self, chunk: Mapping[str, np.ndarray], seq: int) -> bool:
        """Copies ``chunk`` into the next slot; False (nothing written) when the ring is full."""
        head = int(self.header[_HEAD])
        tail = int(self.header[_TAIL])
        fence()  # acquire: the consumer's reads of the slot it freed are done before we overwrite it
        if head - tail >= self.slots:
            self.header[_DROPPED] += 1
            return False
        n = len(chunk["valid"])
        if n > self.rows:
            raise ValueError(f"chunk of {n} rows does not fit a ring slot of {self.rows} rows")
        slot = head % self.slots
        for key, arr in self.arrays.items():
            arr[slot, :n] = chunk[key]
        self.meta[slot] = (seq, n)
        fence()  # release: the slot's data is visible before the head that publishes it
        self.header[_HEAD] = head + 1
        return True

    def beat(self) -> None:
        """The actor is alive (read by the learner and the Ray gateway)."""
        self.header[_HEARTBEAT] = time.time_ns()

    def report(self, stats: ActorStats) -> None:
        """The actor's statistics (see :class:`ActorStats`)."""
        self.header[_STAT_WORDS] = stats.values()  # one store per word, in one call

    def mark_closed(self) -> None:
        """The producer is done: the consumer drains what is left, then retires the ring."""
        self.header[_CLOSED] = 1

    # ------------------------------------------------------------- consumer
    def pending(self) -> int:
        return int(self.header[_HEAD] - self.header[_TAIL])

    def peek(self) -> tuple[int, dict[str, np.ndarray]] | None:
        """``(seq, views of the oldest unread chunk)`` or None; call :meth:`release` when done with it."""
        tail = int(self.header[_TAIL])
        head = int(self.header[_HEAD])
        fence()  # acquire: the slot's data is read after the head that published it
        if tail >= head:
            return None
        slot = tail % self.slots
        seq, n = (int(x) for x in self.meta[slot])
        return seq, {key: arr[slot, :n] for key, arr in self.arrays.items()}

    def release(self) -> None:
        fence()  # release: our reads of the slot are done before the producer may reuse it
        self.header[_TAIL] += 1

    @property
    def taken_seq(self) -> int:
        """The next chunk sequence the consumer expects (chunks before it are safe in the learner). Read it before
        the learner's counts: the learner stores its counts before this word."""
        taken = int(self.header[_TAKEN_SEQ])
        fence()
        return taken

    @taken_seq.setter
    def taken_seq(self, seq: int) -> None:
        self.header[_TAKEN_SEQ] = int(seq)

    # --------------------------------------------------------------- status
    @property
    def closed(self) -> bool:
        return bool(self.header[_CLOSED])

    @property
    def dropped(self) -> int:
        """Chunks the producer could not put because the ring was full (they are in its spool)."""
        return int(self.header[_DROPPED])

    def stats(self) -> ActorStats:
        return ActorStats(*self.header[_STAT_WORDS].tolist())

    @property
    def stop_requested(self) -> bool:
        """The actor's operator pressed stop (one header word: the learner reads it every step)."""
        return bool(self.header[_STOP_REQUESTED])

    def status(self) -> ActorStatus:
        h = self.header
        return ActorStatus(heartbeat_ns=int(h[_HEARTBEAT]), pid=int(h[_PID]), closed=bool(h[_CLOSED]),
                           dropped=int(h[_DROPPED]), taken_seq=int(h[_TAKEN_SEQ]), stats=self.stats())

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


def ring_status(name: str) -> ActorStatus | None:
    """The status of ring ``name`` (e.g. a finished actor's counters); None if it is gone."""
    try:
        ring = ChunkRing(name, {})
    except FileNotFoundError:
        return None
    try:
        return ring.status()
    finally:
        ring.close()
