"""The base policy's proposals on recorded episodes (demonstrations), so a fine-tuning agent that reads
``base_action`` / ``chunk_index`` (e.g. the residual agent: a demo's residual is ``a - base``) can learn from
rows no base policy acted on.

Each episode is replayed through the base the way the actor's synchronous executor runs it: a chunk is inferred
on the episode's first observation, its first ``execute_steps`` actions label the next steps, then the next chunk
is inferred on the observation reached. A base that takes a noise input decodes from zero noise (its
deterministic decode), so labels do not depend on a seed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from robot_rl.datasets.record import read_meta
from robot_rl.policies.base import BasePolicy
from robot_rl.replay.storage import RingStorage
from robot_rl.spaces import obs_row

log = logging.getLogger(__name__)


def episode_starts(part: RingStorage, rows: np.ndarray) -> np.ndarray:
    """The rows among ``rows`` that start an episode: transitions that are no stored transition's successor."""
    a = part.arrays
    used = np.arange(part.size)
    successors = a["next_row"][used[a["valid"][: part.size]]]
    rows = rows[a["valid"][rows]]
    return rows[~np.isin(rows, successors)]


def label_base_proposals(part: RingStorage, policy: BasePolicy, rows: np.ndarray,
                         instructions: Mapping[int, str] | None = None, execute_steps: int = 0) -> int:
    """Writes the base's proposal and chunk index into every transition of the episodes starting among ``rows``
    whose first transition has none yet (``chunk_index < 0``); returns how many were labelled. ``instructions``:
    episode id -> instruction text (the dataset's metadata); ``execute_steps``: actions per chunk (0 = the whole
    chunk). Labels follow the synchronous executor's timing (no temporal ensembling, no late chunks)."""
    meta = policy.metadata
    per_chunk = min(execute_steps or meta.chunk_length, meta.chunk_length)
    noise = np.zeros(meta.noise_shape, np.float32) if meta.accepts_noise else None
    names = tuple(part.spec.obs_arrays())
    a = part.arrays
    labelled = 0
    for start in episode_starts(part, np.asarray(rows, np.int64)):
        if a["chunk_index"][start] >= 0:
            continue
        text = (instructions or {}).get(int(a["episode_id"][start]), "")
        policy.reset()
        row, t, chunk = int(start), 0, None
        while row >= 0 and a["valid"][row]:
            k = t % per_chunk
            if k == 0:
                chunk = policy.infer(obs_row(a, names, row), text, noise)
            a["base_action"][row] = chunk[k]
            a["chunk_index"][row] = k
            labelled += 1
            row, t = int(a["next_row"][row]), t + 1
    return labelled


def dataset_instructions(path: str) -> dict[int, str]:
    """Episode id -> instruction text from a recorded dataset's metadata (empty when it has none)."""
    meta = read_meta(path) or {}
    return {int(e["episode_id"]): str(e.get("instruction", "")) for e in meta.get("episodes", [])}
