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

from robot_rl.runtime.transport.shm.chunk_ring import ChunkRing, ring_status
from robot_rl.runtime.transport.shm.segments import ALIGN, open_shm, unlink_run_shm, unlink_shm
from robot_rl.runtime.transport.shm.weight_board import WeightBoard, peek_learner_status
from robot_rl.runtime.transport.status import ActorStats, ActorStatus, LearnerStatus

__all__ = ["ALIGN", "ActorStats", "ActorStatus", "ChunkRing", "LearnerStatus", "WeightBoard", "open_shm",
           "peek_learner_status", "ring_status", "unlink_run_shm", "unlink_shm"]
