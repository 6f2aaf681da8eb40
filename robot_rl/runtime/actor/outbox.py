"""The actor's outbox: transitions into blocks, blocks to the spool (write-ahead log) and the shared-memory ring."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.replay.rows import BlockBuilder, row_specs
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, ring_name
from robot_rl.runtime.transport.spool import SpoolWriter
from robot_rl.spaces import ObsSpec
from robot_rl.utils.log import get_logger
from robot_rl.utils.state_io import atomic_write

log = get_logger(__name__)


class Outbox:
    """Collects an actor's transitions into blocks of ``chunk_steps`` and sends each, spooled first."""

    def __init__(self, run_dir: Path, uid: str, spec: ObsSpec, action_dim: int, rt: Any) -> None:
        """``rt``: the run's :class:`~robot_rl.runtime.config.RuntimeConfig`."""
        self.run_dir, self.uid, self.rt = run_dir, uid, rt
        self.builder = BlockBuilder(spec, action_dim, rt.chunk_steps)
        self.ring = shm.ChunkRing(ring_name(run_dir, uid), row_specs(spec, action_dim), rt.ring_slots,
                                  self.builder.capacity, create=True)
        self.spool = SpoolWriter(run_dir / "spool" / uid) if rt.spool else None
        self.seq = 0
        self.sent = 0  # transitions sent so far
        self.sent_by_seq: dict[int, int] = {}  # chunk seq -> transitions sent up to and including it
        self._last_flush = time.perf_counter()
        self._spool_warned = -float("inf")  # when a never-blocked actor last warned of a spool past its bound

    def register(self, index: int, num_envs: int) -> None:
        """Tells the learner where this actor's ring and spool are (``<run>/actors/<uid>.json``)."""
        path = actor_dir(self.run_dir) / f"{self.uid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        info = {"uid": self.uid, "index": index, "pid": os.getpid(), "ring": self.ring.name, "num_envs": num_envs,
                "spool": self.spool is not None}
        atomic_write(path, lambda f: f.write_text(json.dumps(info)))

    def not_taken(self) -> tuple[int, int]:
        """(the ring's taken mark, transitions sent up to the chunk before it): the learner counts a chunk before it
        marks it taken, so reading the mark first never undercounts."""
        taken = self.ring.taken_seq
        for seq in [q for q in self.sent_by_seq if q < taken - 1]:
            del self.sent_by_seq[seq]
        return taken, self.sent_by_seq.get(taken - 1, 0)

    def spool_full(self, holds: bool) -> bool:
        """At ``runtime.spool_max_mb``: an actor that ``holds`` (a sim) holds; a never-blocked one warns once a
        minute and goes on (its chunks are still spooled: a dropped chunk would be lost data)."""
        if self.spool is None or self.spool.nbytes <= self.rt.spool_max_mb * 2**20:
            return False
        if holds:
            return True
        now = time.monotonic()
        if now - self._spool_warned > 60.0:
            self._spool_warned = now
            log.warning("actor %s: its spool holds %.0f MB, past runtime.spool_max_mb %.0f: no checkpoint has "
                        "trimmed it (is the learner down?); still spooling until the disk is full", self.uid,
                        self.spool.nbytes / 2**20, self.rt.spool_max_mb)
        return False

    def flush_if_due(self) -> None:
        if time.perf_counter() - self._last_flush > self.rt.flush_seconds:
            self.flush()

    def flush(self) -> None:
        """Sends what the block holds."""
        self._last_flush = time.perf_counter()
        if len(self.builder) == 0:
            return
        chunk = self.builder.take()
        if self.spool is not None:
            self.spool.write(self.seq, chunk)  # before the ring: a chunk the learner reads is always spooled
        self.ring.put(chunk, self.seq)
        self.sent += int(np.count_nonzero(chunk["valid"]))
        self.sent_by_seq[self.seq] = self.sent
        self.seq += 1

    def spool_kb(self) -> int:
        return self.spool.nbytes // 1024 if self.spool else 0

    def close(self, report: Any) -> None:
        """Sends the rest, closes the spool, calls ``report`` (the last statistics) and marks the ring closed."""
        self.flush()
        if self.spool is not None:
            self.spool.flush()
            self.spool.close()
        if self.ring.header is not None:
            report()
            self.ring.mark_closed()
