"""Transition chunks: what an actor sends to the learner, with every frame in it once.

A chunk has the replay's row layout (see ``robot_rl.replay.storage``): one row per observation; a transition
lives in the row of its observation and points at its next observation's row with ``next_row`` (chunk-relative);
rows holding only a final observation have ``valid = False``. ``stream`` says which env of the actor a row
belongs to, ``success`` the env's ``is_success`` after the transition and ``label`` the operator's label of the
episode at its last transition (0 none, 1 success, 2 failure; both for the episode statistics). All fields are plain
arrays with a declared spec (:func:`chunk_specs`), so a chunk can travel through shared memory, a file or the
network without pickling.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from robot_rl.replay.buffer import ReplayBuffer
from robot_rl.replay.storage import SOURCE_CODE, SOURCES, array_specs
from robot_rl.spaces import ObsSpec, obs_leaf, obs_row


def chunk_specs(spec: ObsSpec, action_dim: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Every chunk array: name -> (per-row shape, dtype)."""
    return {**array_specs(spec, action_dim), "stream": ((), np.dtype(np.int64)), "success": ((), np.dtype(bool)),
            "label": ((), np.dtype(np.int8))}


OPTIONAL = frozenset({"label"})
"""Chunk arrays a chunk written by an older robot_rl lacks (a resumed run's spool): read as zeros."""


class ChunkBuilder:
    """Collects transitions of one actor (one or several envs) into a chunk of at most ``max_transitions``."""

    def __init__(self, spec: ObsSpec, action_dim: int, max_transitions: int) -> None:
        self.spec, self.max_transitions = spec, max_transitions
        self.capacity = 2 * max_transitions  # worst case: every transition opens a new row pair
        self.arrays = {k: np.zeros((self.capacity, *shape), dtype)
                       for k, (shape, dtype) in chunk_specs(spec, action_dim).items()}
        self._obs_names = tuple(spec.obs_arrays())
        self._open: dict[int, int] = {}  # env index -> row of its current observation in this chunk
        self.rows = 0
        self.transitions = 0

    def __len__(self) -> int:
        return self.transitions

    @property
    def full(self) -> bool:
        return self.transitions >= self.max_transitions

    def _write_obs(self, stream: int, obs: Mapping[str, Any]) -> int:
        row = self.rows
        a = self.arrays
        for name in self._obs_names:
            a[name][row] = obs_leaf(obs, name)
        a["valid"][row] = a["success"][row] = False
        a["label"][row] = 0
        a["next_row"][row] = a["chunk_index"][row] = -1
        a["base_action"][row] = 0.0
        a["stream"][row] = stream
        self.rows += 1
        return row

    def add(self, stream: int, obs: Mapping[str, Any], action: np.ndarray, reward: float, terminated: bool,
            truncated: bool, next_obs: Mapping[str, Any], *, source: str = "online", intervened: bool = False,
            policy_version: int = 0, episode_id: int = 0, step: int = 0, success: bool = False,
            base_action: np.ndarray | None = None, chunk_index: int = -1, label: int = 0) -> None:
        """Adds one transition of env ``stream``; its observation row is shared with the previous transition's
        next observation when the episode continues inside this chunk. ``base_action``/``chunk_index``: a base
        policy's proposal for this step and its index in the base's action chunk; ``label``: the operator's label
        (index into :data:`robot_rl.envs.contract.LABELS`)."""
        if self.full:
            raise RuntimeError("chunk is full: take() it first")
        row = self._open.pop(stream, None)
        if row is None:
            row = self._write_obs(stream, obs)
        nxt = self._write_obs(stream, next_obs)
        a = self.arrays
        a["action"][row] = action
        a["reward"][row] = reward
        a["terminated"][row] = terminated
        a["truncated"][row] = truncated
        a["intervened"][row] = intervened or source == "intervention"
        a["source"][row] = SOURCE_CODE[source]
        a["policy_version"][row] = policy_version
        a["episode_id"][row] = episode_id
        a["step"][row] = step
        a["success"][row] = success
        a["label"][row] = label
        if base_action is not None:
            a["base_action"][row] = base_action
        a["chunk_index"][row] = chunk_index
        a["next_row"][row] = nxt
        a["valid"][row] = True
        if not (terminated or truncated):
            self._open[stream] = nxt
        self.transitions += 1

    def break_stream(self, stream: int) -> None:
        """The next transition of ``stream`` does not follow the last one (steps in between were not recorded)."""
        self._open.pop(stream, None)

    def take(self) -> dict[str, np.ndarray]:
        """The chunk's rows (views, valid until the next ``add``); starts a new chunk."""
        out = {k: v[: self.rows] for k, v in self.arrays.items()}
        self.rows = self.transitions = 0
        self._open.clear()
        return out


def check_chunk(chunk: Mapping[str, np.ndarray], spec: ObsSpec, action_dim: int) -> int:
    """Validates a chunk from a peer (shapes, dtypes, row links); returns its number of rows."""
    specs = chunk_specs(spec, action_dim)
    missing = sorted(set(specs) - set(chunk) - OPTIONAL)
    if missing:
        raise ValueError(f"chunk lacks array(s) {missing}")
    rows = len(chunk["valid"])
    for key, (shape, dtype) in specs.items():
        if key not in chunk:
            continue
        arr = chunk[key]
        if arr.dtype != dtype or tuple(arr.shape) != (rows, *shape):
            raise ValueError(f"chunk array {key!r}: expected {(rows, *shape)} {dtype}, found {arr.shape} {arr.dtype}")
    nxt = chunk["next_row"][chunk["valid"]]
    if np.any((nxt < 0) | (nxt >= rows)):
        raise ValueError("chunk has a transition whose next_row is outside the chunk")
    if np.any(chunk["source"] >= len(SOURCES)):
        raise ValueError("chunk has an unknown transition source code")
    return rows


def ingest_chunk(replay: ReplayBuffer, chunk: Mapping[str, np.ndarray], stream_base: int = 0) -> int:
    """Adds every transition of ``chunk`` to ``replay``; returns how many. ``stream_base`` keeps the envs of
    different actors apart in the replay's frame sharing."""
    names = tuple(replay.spec.obs_arrays())
    nxt = chunk["next_row"]
    rows = np.flatnonzero(chunk["valid"])
    for i in rows:
        j = nxt[i]
        replay.add(obs_row(chunk, names, i), chunk["action"][i], float(chunk["reward"][i]),
                   bool(chunk["terminated"][i]), bool(chunk["truncated"][i]), obs_row(chunk, names, j),
                   source=SOURCES[chunk["source"][i]], intervened=bool(chunk["intervened"][i]),
                   policy_version=int(chunk["policy_version"][i]), episode_id=int(chunk["episode_id"][i]),
                   step=int(chunk["step"][i]), stream=stream_base + int(chunk["stream"][i]),
                   base_action=chunk["base_action"][i], chunk_index=int(chunk["chunk_index"][i]))
    return len(rows)

