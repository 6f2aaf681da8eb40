"""Behaviour-cloning data for chunk policies: demo datasets (replay stores written by ``robot-rl record-demos``)
turned into (observation, instruction, next H actions) samples.

Each transition row's chunk is the row's action and those of the H - 1 transitions that follow it in its episode
(found through ``next_row``); steps past the episode's end are masked out of the loss. Every episode's instruction
text comes from the dataset's metadata (``dataset.json``; recorded with the env's instruction), embedded with the
model's own text encoder. Sampling draws a dataset uniformly, then a row uniformly, so short and long tasks weigh
the same. ``state_offset_max`` > 0 trains for future-state-aware execution (VLASH): the state (and the action
targets) come from a random 0..K steps later in the episode than the frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.datasets.record import read_meta
from robot_rl.replay.store import load_transitions
from robot_rl.text import make_text_encoder


@dataclass
class _Part:
    path: str
    env_id: str
    env_kwargs: dict[str, Any]
    rows: np.ndarray  # valid transition rows (into the merged arrays)
    instructions: list[str]


class ChunkDataset:
    """Demo datasets of one observation layout, in RAM."""

    def __init__(self, paths: list[str | Path], chunk_length: int, text_encoder: str = "hash",
                 cameras: tuple[str, ...] | None = None) -> None:
        if not paths:
            raise ValueError("no datasets given")
        self.chunk_length = chunk_length
        self.text = make_text_encoder(text_encoder)
        merged: dict[str, list[np.ndarray]] = {}
        self.parts: list[_Part] = []
        offset = 0
        text_rows: list[np.ndarray] = []
        texts: dict[str, int] = {}
        for path in paths:
            spec, action_dim, arrays = load_transitions(path)
            meta = read_meta(path) or {}
            if not self.parts:
                self.spec, self.action_dim = spec, action_dim
                self.cameras = tuple(cameras) if cameras else tuple(sorted(spec.cameras))
                missing = set(self.cameras) - set(spec.cameras)
                if missing:
                    raise ValueError(f"{path}: no camera(s) {sorted(missing)} (has {sorted(spec.cameras)})")
            elif (spec.state_dim, action_dim) != (self.spec.state_dim, self.action_dim) or any(
                    spec.cameras.get(c) != self.spec.cameras[c] for c in self.cameras):
                raise ValueError(f"{path}: state {spec.state_dim} / action {action_dim} / cameras {spec.cameras} do "
                                 f"not match {paths[0]} ({self.spec.state_dim} / {self.action_dim} / "
                                 f"{self.spec.cameras})")
            by_episode = {int(e["episode_id"]): e.get("instruction", "") for e in meta.get("episodes", [])}
            valid = np.flatnonzero(arrays["valid"])
            episode_text = [by_episode.get(int(e), "") for e in arrays["episode_id"]]
            if any(not episode_text[r] for r in valid):
                raise ValueError(f"{path}: episodes without an instruction in dataset.json (record the demos with "
                                 "the env's instruction on, e.g. env kwargs instruction: true)")
            ids = np.zeros(len(arrays["valid"]), np.int64)
            for r, text in enumerate(episode_text):
                ids[r] = texts.setdefault(text, len(texts)) if text else 0
            text_rows.append(ids)
            for key in ("state", "action", "valid", "next_row", *[f"pixels/{c}" for c in self.cameras]):
                value = arrays[key]
                if key == "next_row":
                    value = np.where(value >= 0, value + offset, -1)
                merged.setdefault(key, []).append(value)
            self.parts.append(_Part(str(path), meta.get("env_id", ""), dict(meta.get("env_kwargs", {})),
                                    valid + offset, sorted({episode_text[r] for r in valid})))
            offset += len(arrays["valid"])
        self.arrays = {k: np.concatenate(v) for k, v in merged.items()}
        self.text_ids = np.concatenate(text_rows)
        self.text_table = np.stack([self.text.encode(t) for t in texts]) if texts else np.zeros((1, self.text.dim))
        self._successors()

    def _successors(self) -> None:
        """``succ[k][r]``: the transition row k steps after row r in its episode (-1 past the end)."""
        valid, nxt = self.arrays["valid"], self.arrays["next_row"]
        step = np.where((nxt >= 0) & valid[np.maximum(nxt, 0)], nxt, -1)
        step[~valid] = -1
        succ = [np.where(valid, np.arange(len(valid)), -1)]
        for _ in range(self.chunk_length + 32):
            prev = succ[-1]
            succ.append(np.where(prev >= 0, step[np.maximum(prev, 0)], -1))
        self.succ = np.stack(succ)  # [H + 32 + 1, N]

    @property
    def transitions(self) -> int:
        return int(sum(len(p.rows) for p in self.parts))

    def state_stats(self) -> tuple[np.ndarray, np.ndarray]:
        states = self.arrays["state"][np.concatenate([p.rows for p in self.parts])]
        return states.mean(0), np.maximum(states.std(0), 1e-2)

    def sample(self, batch: int, rng: np.random.Generator, state_offset_max: int = 0) -> dict[str, np.ndarray]:
        """``frames`` camera -> uint8 [B, H, W, 3], ``state`` [B, D], ``text`` [B, E], ``actions`` [B, H, A] and
        ``mask`` [B, H]."""
        part = rng.integers(len(self.parts), size=batch)
        rows = np.array([p.rows[i] for p, i in ((self.parts[k], rng.integers(len(self.parts[k].rows)))
                                               for k in part)])
        at = rows
        if state_offset_max > 0:
            offset = rng.integers(0, state_offset_max + 1, size=batch)
            later = self.succ[offset, rows]
            at = np.where(later >= 0, later, rows)
        idx = self.succ[: self.chunk_length, at].T  # [B, H]
        mask = idx >= 0
        actions = self.arrays["action"][np.where(mask, idx, at[:, None])]
        return {"frames": {c: self.arrays[f"pixels/{c}"][rows] for c in self.cameras},
                "state": self.arrays["state"][at], "text": self.text_table[self.text_ids[rows]].astype(np.float32),
                "actions": actions, "mask": mask}

    def tasks(self) -> list[dict[str, Any]]:
        """The env (id, kwargs) and instructions of each dataset, for evaluation."""
        return [{"dataset": p.path, "env_id": p.env_id, "env_kwargs": p.env_kwargs, "instructions": p.instructions,
                 "transitions": len(p.rows)} for p in self.parts]
