"""The transition, declared once: its row fields, and the one writer of rows.

Layout: one *row* per observation. A transition lives in the row of its observation and points at the row of its
next observation (``next_row``). Consecutive transitions of an episode share rows (the next observation of step t
is the observation of step t+1), so an episode of T steps takes T + 1 rows; a row holding only an episode's final
observation has ``valid = False``.

A *block* is a run of such rows as plain arrays (``next_row`` relative to the block): what an actor sends to the
learner (a chunk, through shared memory, a spool file or the network, never pickled), what an episode writer puts
on disk, and what :meth:`robot_rl.replay.ReplayBuffer.extend` copies into the replay in one vectorised write.
:class:`BlockBuilder` is the only code that writes a transition into rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_rl.spaces import ObsSpec, obs_leaf

SOURCES = ("online", "demo", "intervention")
"""Where a transition came from (``source`` holds the index)."""
SOURCE_CODE = {name: i for i, name in enumerate(SOURCES)}


@dataclass(frozen=True)
class Field:
    """One per-row array beside the observation."""

    dtype: np.dtype
    action_shaped: bool
    """``[action_dim]`` per row (else one scalar)."""
    empty: Any
    """The value of a row that holds no transition (yet)."""
    stored: bool
    """Kept in the replay and on disk (else it travels in blocks only: the learner's bookkeeping)."""
    doc: str


FIELDS: dict[str, Field] = {
    "action": Field(np.dtype(np.float32), True, 0.0, True, "the executed action"),
    "base_action": Field(np.dtype(np.float32), True, 0.0, True, "a base policy's proposal for this step"),
    "chunk_index": Field(np.dtype(np.int32), False, -1, True, "the step's index in the base's chunk (-1: no base)"),
    "reward": Field(np.dtype(np.float32), False, 0.0, True, "the reward"),
    "terminated": Field(np.dtype(bool), False, False, True, "the episode ended in a terminal state"),
    "truncated": Field(np.dtype(bool), False, False, True, "the episode was cut short (time limit, stop)"),
    "intervened": Field(np.dtype(bool), False, False, True, "a person's action, not the policy's"),
    "source": Field(np.dtype(np.uint8), False, 0, True, "index into SOURCES"),
    "policy_version": Field(np.dtype(np.int64), False, 0, True, "the weights' version that acted"),
    "episode_id": Field(np.dtype(np.int64), False, 0, True, "the episode's number"),
    "step": Field(np.dtype(np.int64), False, 0, True, "the step's index in its episode"),
    "next_row": Field(np.dtype(np.int64), False, -1, True, "the row of the next observation (-1: none)"),
    "valid": Field(np.dtype(bool), False, False, True, "the row holds a transition (not only a final observation)"),
    "stream": Field(np.dtype(np.int64), False, 0, False, "which env of the actor the row belongs to"),
    "success": Field(np.dtype(bool), False, False, False, "the env's is_success after the transition"),
    "label": Field(np.dtype(np.int8), False, 0, False, "the operator's label of the episode (0 none, 1 success, "
                                                        "2 failure) at its last transition"),
}
"""Every per-row array beside the observation's, by name."""

TRANSITION_DEFAULTS: dict[str, Any] = {"source": "online", "intervened": None, "policy_version": 0,
                                       "episode_id": 0, "step": 0, "base_action": None, "chunk_index": -1,
                                       "success": False, "label": 0}
"""What a transition carries beyond (obs, action, reward, terminated, truncated, next_obs), with its default:
the keywords of every ``add`` (``source`` by name; ``intervened`` None: whether the source is ``intervention``;
``base_action`` None: no base policy acted)."""

OPTIONAL = frozenset({"label"})
"""Block arrays a block written by an older robot_rl lacks (a resumed run's spool): read as zeros."""

STORED = tuple(name for name, f in FIELDS.items() if f.stored)


def row_specs(spec: ObsSpec, action_dim: int, stored_only: bool = False) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Every row array: name -> (per-row shape, dtype). Observation arrays are named as :meth:`ObsSpec.obs_arrays`
    names them (``state``, ``instruction``, ``pixels/<camera>``). ``stored_only``: what the replay and stores keep."""
    out = spec.obs_arrays()
    for name, f in FIELDS.items():
        if f.stored or not stored_only:
            out[name] = ((action_dim,) if f.action_shaped else (), f.dtype)
    return out


def transition_fields(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` completed with the defaults; a keyword that is not a transition field is an error."""
    unknown = set(meta) - set(TRANSITION_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown transition field(s) {sorted(unknown)}; a transition carries "
                        f"{sorted(TRANSITION_DEFAULTS)}")
    out = {**TRANSITION_DEFAULTS, **meta}
    if out["source"] not in SOURCE_CODE:
        raise ValueError(f"unknown transition source {out['source']!r}; use one of {list(SOURCES)}")
    return out


class BlockBuilder:
    """Writes transitions of one or several streams (an actor's envs) into a block of at most ``max_transitions``.

    A transition's observation row is shared with the previous transition's next observation when its stream's
    episode goes on inside the block."""

    def __init__(self, spec: ObsSpec, action_dim: int, max_transitions: int) -> None:
        self.spec, self.max_transitions = spec, max_transitions
        self.capacity = 2 * max_transitions  # worst case: every transition opens a new row pair
        self.arrays = {k: np.zeros((self.capacity, *shape), dtype)
                       for k, (shape, dtype) in row_specs(spec, action_dim).items()}
        self._obs_names = tuple(spec.obs_arrays())
        self._open: dict[int, int] = {}  # stream -> row of its current observation in this block
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
        for name, f in FIELDS.items():
            a[name][row] = f.empty
        a["stream"][row] = stream
        self.rows += 1
        return row

    def add(self, stream: int, obs: Mapping[str, Any], action: np.ndarray, reward: float, terminated: bool,
            truncated: bool, next_obs: Mapping[str, Any], **meta: Any) -> None:
        """Adds one transition of ``stream``; ``meta``: the fields of :data:`TRANSITION_DEFAULTS`."""
        if self.full:
            raise RuntimeError("block is full: take() it first")
        m = transition_fields(meta)
        row = self._open.pop(stream, None)
        if row is None:
            row = self._write_obs(stream, obs)
        nxt = self._write_obs(stream, next_obs)
        a = self.arrays
        a["action"][row] = action
        a["reward"][row] = reward
        a["terminated"][row] = terminated
        a["truncated"][row] = truncated
        a["intervened"][row] = m["source"] == "intervention" if m["intervened"] is None else m["intervened"]
        a["source"][row] = SOURCE_CODE[m["source"]]
        for name in ("policy_version", "episode_id", "step", "chunk_index", "success", "label"):
            a[name][row] = m[name]
        if m["base_action"] is not None:
            a["base_action"][row] = m["base_action"]
        a["next_row"][row] = nxt
        a["valid"][row] = True
        if not (terminated or truncated):
            self._open[stream] = nxt
        self.transitions += 1

    def break_stream(self, stream: int) -> None:
        """The next transition of ``stream`` does not follow the last one (steps in between were not recorded)."""
        self._open.pop(stream, None)

    def take(self) -> dict[str, np.ndarray]:
        """The block's rows (views, valid until the next ``add``); starts a new block."""
        out = {k: v[: self.rows] for k, v in self.arrays.items()}
        self.rows = self.transitions = 0
        self._open.clear()
        return out


def check_block(block: Mapping[str, np.ndarray], spec: ObsSpec, action_dim: int) -> int:
    """Validates a block from a peer (shapes, dtypes, row links); returns its number of rows."""
    specs = row_specs(spec, action_dim)
    missing = sorted(set(specs) - set(block) - OPTIONAL)
    if missing:
        raise ValueError(f"block lacks array(s) {missing}")
    rows = len(block["valid"])
    for key, (shape, dtype) in specs.items():
        if key not in block:
            continue
        arr = block[key]
        if arr.dtype != dtype or tuple(arr.shape) != (rows, *shape):
            raise ValueError(f"block array {key!r}: expected {(rows, *shape)} {dtype}, found {arr.shape} {arr.dtype}")
    nxt = block["next_row"][block["valid"]]
    if np.any((nxt < 0) | (nxt >= rows)):
        raise ValueError("block has a transition whose next_row is outside the block")
    if np.any(block["source"] >= len(SOURCES)):
        raise ValueError("block has an unknown transition source code")
    return rows
