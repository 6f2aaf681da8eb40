"""Whole episodes out of a replay-format store (a demo dataset, or a run's checkpointed replay): the rows of each
episode in order, with its T + 1 observations, for converters to other formats (robot_rl.datasets.lerobot)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_rl.datasets.record import read_meta
from robot_rl.replay.rows import SOURCES
from robot_rl.replay.store import _open, load_transitions, store_spec
from robot_rl.spaces import ObsSpec


@dataclass
class Episode:
    """One episode: ``observations`` by flat name (``state``, ``instruction``, ``pixels/<camera>``) with T + 1 rows
    (the last is the final next observation), everything else T rows."""

    episode_id: int
    observations: dict[str, np.ndarray]
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    intervened: np.ndarray
    source: list[str]
    partition: str = "demos"
    success: bool | None = None
    instruction: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def length(self) -> int:
        return len(self.action)


def store_partitions(path: str | Path) -> list[str]:
    """The partitions a store holds data in."""
    _, commit, _, _ = _open(Path(path))
    return [name for name, c in commit["partitions"].items() if int(c.get("size", 0)) > 0]


def read_episodes(path: str | Path, partitions: list[str] | None = None,
                  instructions: dict[str, np.ndarray] | None = None) -> tuple[ObsSpec, int, Iterator[Episode]]:
    """``(spec, action_dim, episodes)`` of a store: every complete chain of rows per (partition, episode id), in
    the order they were recorded. Success labels and instructions come from a demo dataset's metadata when it has
    them; otherwise success is the last step's ``terminated`` (robot_rl's tasks terminate on success), and the
    instruction the text whose embedding ``instructions`` (text -> embedding) gives."""
    path = Path(path)
    meta = read_meta(path) or {}
    labels = {int(e["episode_id"]): e for e in meta.get("episodes", [])}
    names = partitions or store_partitions(path)
    spec, action_dim = store_spec(path)

    def episodes() -> Iterator[Episode]:
        # instruction embedding -> its text: given, and learnt from the labelled episodes
        texts = {np.asarray(v, np.float32).tobytes(): t for t, v in (instructions or {}).items()}
        for name in names:
            _, _, a = load_transitions(path, name)
            valid = np.flatnonzero(a["valid"])
            ids = a["episode_id"][valid]
            _, first = np.unique(ids, return_index=True)
            for ep in ids[np.sort(first)]:
                rows = valid[ids == ep]
                rows = rows[np.argsort(a["step"][rows], kind="stable")]
                final = int(a["next_row"][rows[-1]])
                if final < 0:
                    continue  # the episode's last observation never arrived (a run cut mid-episode)
                obs_rows = np.append(rows, final)
                label = labels.get(int(ep), {}) if name == meta.get("partition") else {}
                key = a["instruction"][rows[0]].tobytes() if "instruction" in a else b""
                if label.get("instruction"):
                    texts[key] = label["instruction"]
                terminated = a["terminated"][rows].astype(bool)
                success = label.get("success", bool(terminated[-1]) if not label else None)
                yield Episode(
                    episode_id=int(ep), partition=name,
                    observations={k: np.asarray(a[k][obs_rows]) for k in spec.obs_arrays()},
                    action=a["action"][rows].astype(np.float32), reward=a["reward"][rows].astype(np.float32),
                    terminated=terminated, truncated=a["truncated"][rows].astype(bool),
                    intervened=a["intervened"][rows].astype(bool), source=[SOURCES[s] for s in a["source"][rows]],
                    success=success, instruction=str(label.get("instruction") or texts.get(key, "")))

    return spec, action_dim, episodes()
