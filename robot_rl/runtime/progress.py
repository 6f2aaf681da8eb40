"""A run's progress as its folder holds it: what survives a clean stop, SIGKILL, a full disk or a power cut that
also cleared ``/dev/shm``.

The latest checkpoint's counters say how many env steps and updates it holds and, per actor, which chunk comes
next; every chunk an actor spooled after that is an env step too (the spool is written before the ring). An actor
that starts before its learner (a restart, the next morning's resume) counts its warm-up and its update debt from
this, not from zero: random actions stop at the run's own ``random_steps`` and the update bound holds from the
first step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors import safe_open

from robot_rl.runtime.transport.spool import spool_file, spooled_seqs
from robot_rl.utils.run_dir import latest_checkpoint


@dataclass(frozen=True)
class RunProgress:
    """Env steps and updates of a run on disk."""

    env_steps: int = 0
    """Transitions in the latest checkpoint plus those spooled after it."""
    updates: int = 0
    """``agent.update`` calls the latest checkpoint holds."""


def run_progress(run_dir: str | Path) -> RunProgress:
    """The run's progress on disk (zeros for a new run). Reads only each spooled chunk's ``valid`` column."""
    run_dir = Path(run_dir)
    counters: dict = {}
    try:  # the checkpoint a resume would load (sizes checked; the learner also checks checksums)
        counters = json.loads((latest_checkpoint(run_dir) / "counters.json").read_text())
    except (FileNotFoundError, ValueError):  # none yet, or none intact (the learner then stops the run)
        counters = {}
    steps, ingested = int(counters.get("env_steps", 0)), counters.get("ingested", {})
    spool = run_dir / "spool"
    for folder in sorted(spool.iterdir()) if spool.is_dir() else ():
        for seq in spooled_seqs(folder):
            if seq < int(ingested.get(folder.name, 0)):
                continue  # in the checkpoint already (trimmed after it is written)
            try:
                with safe_open(str(spool_file(folder, seq)), "numpy") as chunk:
                    steps += int(np.count_nonzero(chunk.get_tensor("valid")))
            except FileNotFoundError:  # trimmed meanwhile by a learner's checkpoint: counted in it
                continue
    return RunProgress(steps, int(counters.get("updates", 0)))
