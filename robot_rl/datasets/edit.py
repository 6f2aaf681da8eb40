"""Editing a recorded demo dataset after the fact: ``robot-rl demos discard PATH EPISODE...``.

The dataset is rewritten without the discarded episodes (the others keep their ids, frames and labels) under a
temporary name and swapped in atomically, so an interrupted edit leaves the original untouched.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from robot_rl.datasets.atomic import publish, temp_path
from robot_rl.datasets.record import META_FILE, read_meta
from robot_rl.replay.store import EpisodeWriter, load_transitions
from robot_rl.spaces import obs_row
from robot_rl.utils.state_io import atomic_write


def discard_episodes(path: str | Path, episodes: Iterable[int]) -> list[int]:
    """Removes ``episodes`` (ids) from the demo dataset at ``path``; returns the ids that remain."""
    path = Path(path)
    meta = read_meta(path)
    if meta is None:
        raise ValueError(f"{path} has no {META_FILE}: only datasets recorded with record-demos can be edited")
    drop = {int(e) for e in episodes}
    known = {int(e["episode_id"]) for e in meta["episodes"]}
    if drop - known:
        raise ValueError(f"{path}: no episode(s) {sorted(drop - known)} (episodes: {sorted(known)})")
    spec, action_dim, arrays = load_transitions(path, meta["partition"])
    tmp = temp_path(path)
    try:
        writer = EpisodeWriter(tmp, spec, action_dim, partition=meta["partition"])
        kept = [e for e in meta["episodes"] if int(e["episode_id"]) not in drop]
        for record in kept:
            ep = int(record["episode_id"])
            rows = np.flatnonzero(arrays["valid"] & (arrays["episode_id"] == ep))
            rows = rows[np.argsort(arrays["step"][rows], kind="stable")]
            frames = np.append(rows, arrays["next_row"][rows[-1]])
            names = tuple(spec.obs_arrays())
            observations = [obs_row(arrays, names, r) for r in frames]
            writer.append(observations, arrays["action"][rows], arrays["reward"][rows], arrays["terminated"][rows],
                          arrays["truncated"][rows], source="demo", episode_id=ep,
                          base_action=arrays["base_action"][rows], chunk_index=arrays["chunk_index"][rows])
        meta = {**meta, "episodes": kept, "discarded": int(meta.get("discarded", 0)) + len(drop),
                "discarded_later": sorted(set(meta.get("discarded_later", [])) | drop)}
        atomic_write(tmp / META_FILE, lambda f: f.write_text(json.dumps(meta, indent=1)))
        publish(tmp, path, overwrite=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [int(e["episode_id"]) for e in kept]
