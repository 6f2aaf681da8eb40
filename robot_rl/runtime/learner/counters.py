"""The learner's counters: its progress, saved in every checkpoint and restored on resume."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class LearnerCounters:
    """The learner's progress, saved in every checkpoint (``counters.json``) and restored on resume."""

    env_steps: int = 0
    """Transitions taken into the replay."""
    episodes: int = 0
    """Episodes finished by the actors."""
    updates: int = 0
    """``agent.update`` calls (one per env step past learning_starts)."""
    version: int = 0
    """Last published policy version (only grows, across restarts too)."""
    ingested: dict[str, int] = field(default_factory=dict)
    """Per actor uid: the next chunk sequence expected (everything before it is in the replay)."""
    streams: dict[str, int] = field(default_factory=dict)
    """Per actor uid: the replay stream id of its env 0 (keeps the envs of different actors apart)."""
    lost_chunks: int = 0
    """Chunks skipped because a ring overflowed with the spool off."""
    labelled_success: int = 0
    """Episodes the operator labelled a success (the success key or button, or the scripted human's label)."""
    labelled_failure: int = 0
    """Episodes the operator labelled a failure."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LearnerCounters:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)
