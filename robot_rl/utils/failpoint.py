"""Failpoints: named instants at which a test cuts the power of a run.

``ROBOT_RL_FAILPOINT=NAME[:N]`` in a run's environment: the N-th time (default the first) a process of the run
reaches the point NAME, it SIGKILLs its whole process group (``robot-rl train`` and its children at once), as a
power cut at that exact instant would. Unset (always, outside tests), a failpoint is one dictionary lookup.
The points: ``checkpoint.replay_written`` (a checkpoint half-written), ``checkpoint.renamed`` (complete but not yet
``latest``), ``spool.trim`` (a spool half-trimmed after a checkpoint), ``evaluation.episode`` (mid-evaluation).
"""

from __future__ import annotations

import os
import signal

ENV = "ROBOT_RL_FAILPOINT"
_hits: dict[str, int] = {}


def failpoint(name: str) -> None:
    """Cuts the power here when the environment names this point (see the module's docstring)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == int(nth or 1):
        os.killpg(os.getpgrp(), signal.SIGKILL)
