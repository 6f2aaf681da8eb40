"""The weight board: the learner writes versioned policy weights under a sequence lock; actors copy them out
whenever the version changes, never blocking the writer. Its header doubles as the learner's status."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

import numpy as np
import torch

from robot_rl.runtime.transport.barrier import fence, require_ordering
from robot_rl.runtime.transport.shm.segments import open_shm, unlink_shm
from robot_rl.runtime.transport.status import LearnerStatus

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
