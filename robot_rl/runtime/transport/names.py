"""Names every process of a run derives from the run folder alone: shared-memory segments and folders."""

from __future__ import annotations

import hashlib
from pathlib import Path


def run_key(run_dir: str | Path) -> str:
    """Short id of a run folder (POSIX shared-memory names must be short and slash-free)."""
    return hashlib.sha1(str(Path(run_dir).resolve()).encode()).hexdigest()[:12]


def board_name(run_dir: str | Path) -> str:
    return f"rrl_{run_key(run_dir)}_w"


def ring_name(run_dir: str | Path, uid: str) -> str:
    return f"rrl_{run_key(run_dir)}_{hashlib.sha1(uid.encode()).hexdigest()[:10]}"


def actor_dir(run_dir: str | Path) -> Path:
    """Where actors register (one ``<uid>.json`` each) so the learner can find their rings and spools."""
    return Path(run_dir) / "actors"
