"""Local transport over POSIX shared memory: a chunk ring per actor and one weight board per run.

No pickling anywhere: both sides lay out the same named arrays from the same spec and copy raw bytes.

* :class:`ChunkRing`: single-producer (the actor) / single-consumer (the learner) ring of chunk slots. The
  producer copies a chunk into the next free slot and then advances ``head``; the consumer reads slots up to
  ``head`` in place and then advances ``tail``. On x86-64 aligned 8-byte stores are atomic and not reordered
  with earlier stores, so no lock is needed. A full ring never blocks the actor: the chunk is counted as
  dropped and the learner fetches it from the actor's spool (see :mod:`robot_rl.runtime.transport.spool`).
  The ring's header also carries the actor's heartbeat and statistics.
* :class:`WeightBoard`: the learner writes versioned policy weights under a sequence lock; actors copy them
  out whenever the version changes, never blocking the writer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

import numpy as np
import torch

from robot_rl.runtime.transport.barrier import fence, require_ordering
from robot_rl.runtime.transport.status import ActorStats, ActorStatus, LearnerStatus

__all__ = ["ActorStats", "ActorStatus", "ChunkRing", "LearnerStatus", "WeightBoard", "open_shm", "peek_learner_status",
           "ring_status", "unlink_shm"]

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


def unlink_run_shm(key: str) -> list[str]:
    """Unlinks every segment named ``rrl_<key>_*`` (a run folder's board and rings) left by processes that died
    without cleaning up; only for a run no process can be using (a new run in a folder that held none). Linux:
    the segments are files in /dev/shm; elsewhere nothing is found. Returns the names."""
    names = [p.name for p in Path("/dev/shm").glob(f"rrl_{key}_*")]
    for name in names:
        unlink_shm(name)
    return names


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


# Header words of the weight board.
_W_SEQ, _W_VERSION, _W_NBYTES, _W_TIME_NS, _W_LEARNER_PID, _W_LEARNER_BEAT, _W_UPDATES, _W_ENV_STEPS, \
    _W_STOP = range(9)
_W_HEADER_WORDS = 16


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
        size = _W_HEADER_WORDS * 8 + total
        require_ordering()
        self.shm = open_shm(name, size, create=True) if create else open_shm(name)
        self.header = np.ndarray((_W_HEADER_WORDS,), np.int64, self.shm.buf)
        if create:
            self.header[:] = 0
            self.header[_W_NBYTES] = total
        elif int(self.header[_W_NBYTES]) == 0:  # the learner created it a moment ago and is still writing
            self.header = self.payload = None  # type: ignore[assignment]
            self.shm.close()
            raise FileNotFoundError(f"weight board {name} is not initialised yet")
        elif int(self.header[_W_NBYTES]) != total:
            raise ValueError(f"weight board {name} holds {int(self.header[_W_NBYTES])} bytes, this policy needs "
                             f"{total}: actor and learner configs differ, or a killed earlier run of the same "
                             f"name left it behind (remove /dev/shm/{name} if no process of that run is alive)")
        self.payload = np.ndarray((total,), np.uint8, self.shm.buf, offset=_W_HEADER_WORDS * 8)

    @property
    def version(self) -> int:
        return int(self.header[_W_VERSION])

    def _begin_write(self) -> None:
        if self.header[_W_SEQ] % 2 == 0:  # odd: write in progress (already odd if a learner died mid-publish)
            self.header[_W_SEQ] += 1
        fence()  # the odd sequence is visible before any payload byte changes

    def publish(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        self._begin_write()
        for k in self.keys:
            src = state[k].detach().to("cpu").contiguous().view(torch.uint8).reshape(-1).numpy()
            self.payload[self.offsets[k]:self.offsets[k] + src.size] = src
        self.header[_W_VERSION] = version
        self.header[_W_TIME_NS] = time.time_ns()
        fence()  # the payload is visible before the even sequence that declares it consistent
        self.header[_W_SEQ] += 1

    def read(self, timeout: float = 1.0) -> tuple[int, dict[str, torch.Tensor]] | None:
        """``(version, tensors)`` copied under the sequence lock; None if no version is published yet."""
        deadline = time.monotonic() + timeout
        while True:
            s1 = int(self.header[_W_SEQ])
            fence()
            if s1 % 2 == 0:
                version = int(self.header[_W_VERSION])
                data = self.payload.copy()
                fence()
                if int(self.header[_W_SEQ]) == s1:
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

    # --------------------------------------------------------------- status
    def beat(self, updates: int, env_steps: int) -> None:
        """The learner is alive, with its progress (the actors' rate limiter reads it)."""
        h = self.header
        h[_W_UPDATES], h[_W_ENV_STEPS] = int(updates), int(env_steps)
        h[_W_LEARNER_PID] = os.getpid()
        h[_W_LEARNER_BEAT] = time.time_ns()
        fence()  # the counts are visible before anything the caller stores next (a ring's taken_seq)

    def mirror(self, status: LearnerStatus) -> None:
        """Writes another board's status here (a remote actor's local board mirrors the learner's)."""
        h = self.header
        h[_W_UPDATES], h[_W_ENV_STEPS], h[_W_LEARNER_BEAT] = status.updates, status.env_steps, status.beat_ns
        if status.stop:
            h[_W_STOP] = 1

    def request_stop(self) -> None:
        """The run is complete (or must end): every actor stops."""
        self.header[_W_STOP] = 1

    def status(self) -> LearnerStatus:
        return _learner_status(self.header)

    def close(self, unlink: bool = False) -> None:
        self.header = self.payload = None  # type: ignore[assignment]
        try:
            self.shm.close()
        except BufferError:
            pass
        if unlink:
            unlink_shm(self.name)


def _learner_status(h: np.ndarray) -> LearnerStatus:
    return LearnerStatus(beat_ns=int(h[_W_LEARNER_BEAT]), pid=int(h[_W_LEARNER_PID]), updates=int(h[_W_UPDATES]),
                         env_steps=int(h[_W_ENV_STEPS]), stop=bool(h[_W_STOP]), version=int(h[_W_VERSION]))


def peek_learner_status(name: str) -> LearnerStatus | None:
    """The status of weight board ``name`` without knowing its layout (the supervisor's progress line); None
    while no board exists."""
    try:
        segment = open_shm(name)
    except FileNotFoundError:
        return None
    try:
        header = np.ndarray((_W_HEADER_WORDS,), np.int64, segment.buf)
        status = _learner_status(header)
        del header
        return status
    finally:
        segment.close()


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
