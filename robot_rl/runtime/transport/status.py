"""What the shared-memory headers say, as values: an actor's statistics and liveness (its ring), the learner's
progress and liveness (the weight board). :mod:`robot_rl.runtime.transport.shm` reads and writes them."""

from __future__ import annotations

import time
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ActorStats:
    """What an actor reports about itself (also what a remote actor sends through the Ray gateway)."""

    env_steps: int = 0
    """Env steps this actor took (held steps excluded)."""
    version: int = 0
    """Policy version it acts with."""
    jitter_p99_us: int = 0
    """p99 of |control period - target| over the last ~2000 steps, microseconds."""
    infer_us: int = 0
    """Mean policy inference time, microseconds."""
    period_us: int = 0
    """Mean control period, microseconds."""
    episodes: int = 0
    """Episodes finished."""
    next_seq: int = 0
    """Sequence number of the next chunk it will send."""
    paused_us: int = 0
    """Time spent paused by the rate limiter, microseconds."""
    sent: int = 0
    """Transitions sent in chunks so far."""
    base_missed: int = 0
    """Base policy: control steps the robot held or continued because the next chunk was late."""
    base_late: int = 0
    """Base policy: chunks that arrived after their planned start."""
    base_infer_us: int = 0
    """Base policy: median inference time (launch to chunk), microseconds (0 = no base policy)."""
    spool_kb: int = 0
    """Kilobytes in this actor's spool that no checkpoint holds yet (the learner checkpoints early when it nears
    ``runtime.spool_max_mb``)."""
    stop_requested: int = 0
    """1 once the operator pressed stop on this actor's teleop device: the learner ends the run (everything this
    actor sent before is in its chunks)."""


    def values(self) -> list[int]:
        """The fields in order, as plain ints (what the header and the Ray gateway carry)."""
        return [int(getattr(self, name)) for name in STAT_FIELDS]


STAT_FIELDS = tuple(f.name for f in fields(ActorStats))


@dataclass(frozen=True)
class ActorStatus:
    """A snapshot of a ring's header: the actor's liveness and statistics, the consumer's progress."""

    heartbeat_ns: int
    pid: int
    closed: bool
    dropped: int
    taken_seq: int
    stats: ActorStats


@dataclass(frozen=True)
class LearnerStatus:
    """A snapshot of the weight board's header: the learner's liveness, progress and stop request."""

    beat_ns: int
    """Time of the learner's last heartbeat (``time.time_ns``); 0 = never."""
    pid: int
    updates: int
    """Agent updates done (one per env step past learning_starts)."""
    env_steps: int
    """Env steps the learner has taken in."""
    stop: bool
    """The run is complete: actors stop."""
    version: int
    """Newest published policy version (0 = none yet)."""

    @property
    def beat_age_s(self) -> float:
        return (time.time_ns() - self.beat_ns) / 1e9 if self.beat_ns else float("inf")
