"""Chunked execution of a base policy for one env: which action runs at each control step, and when the next
chunk is inferred.

Modes (:class:`~robot_rl.policies.config.ExecutionConfig`):

* ``sync``: execute ``execute_steps`` actions of a chunk, then infer the next one while the robot waits (the
  control loop blocks on the inference: simple, and the robot stands still for the whole latency);
* ``async``: the next inference is launched ``lead`` steps before the current chunk runs out, on a worker
  thread, conditioned on the observation at launch; the new chunk takes over where the old one ends. The
  control loop never waits. Its flaw: the chunk was planned from where the robot was at launch, but starts
  ``lead`` steps later;
* ``future`` (VLASH): as ``async``, but the observation's ``state`` is replaced by the state expected when the
  new chunk starts - the current state rolled forward through the actions still to execute before then
  (``predict_state``; for delta end-effector actions, the controller target moved by those deltas).

The first chunk of an episode is always inferred synchronously (the robot is at rest after a reset). A chunk that
arrives after its planned start is a *late chunk*; until it arrives every step is a *missed step* and the robot
holds (zero deltas, the last absolute commands) or continues with the old chunk's remaining actions
(``on_miss``). A held robot did not move, so a late chunk then starts at its first action; after ``continue`` the
steps already spent are skipped. With ``temporal_ensemble`` > 0 every step's action is the weighted mean of all
chunks' predictions for it (ACT). An inference that fails (server gone, timeout) counts as a failure and the
executor tries again at the next step.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_rl.policies.base import BasePolicy, PolicyError
from robot_rl.policies.config import ExecutionConfig
from robot_rl.utils.log import get_logger

log = get_logger(__name__)
StatePredictor = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``predict(state [D], actions [k, A]) -> state [D]``: the state after executing ``actions`` from ``state``."""
NoiseSource = Callable[[Mapping[str, Any], str], np.ndarray | None]
"""``noise(obs, instruction) -> noise`` for a policy that takes its initial noise as an input (steering)."""


@dataclass(frozen=True)
class ExecStep:
    """What one control step executes."""

    action: np.ndarray
    """float32 [A]: the action to send to the env."""
    base_action: np.ndarray
    """float32 [A]: the base policy's action for this step (equals ``action`` unless the robot is held)."""
    chunk_index: int
    """Index of ``base_action`` in its chunk; -1 on a missed step."""
    missed: bool
    """The next chunk was late: the robot held or continued."""


@dataclass
class _Chunk:
    actions: np.ndarray  # [H, A]
    start: int  # episode step of actions[0]


class ChunkExecutor:
    """Runs ``policy``'s chunks in one env, one :meth:`step` per control step (see the module docstring)."""

    def __init__(self, policy: BasePolicy, cfg: ExecutionConfig, period_s: float | None = None,
                 predict_state: StatePredictor | None = None, noise: NoiseSource | None = None) -> None:
        cfg.validate()
        if cfg.mode == "future" and predict_state is None:
            raise ValueError("execution.mode 'future' needs a state predictor: this env has no predict_state(state, "
                             "actions); use mode 'async'")
        self.policy, self.cfg, self.meta = policy, cfg, policy.metadata
        self.period_s = period_s if period_s else 1.0 / self.meta.control_hz
        self.horizon = self.meta.chunk_length
        self.execute = min(cfg.execute_steps or self.horizon, self.horizon)
        self.predict_state, self.noise = predict_state, noise
        self.t = 0
        self.episode = 0
        self.chunks: deque[_Chunk] = deque(maxlen=max(1, math.ceil(self.horizon / max(1, self.execute)) + 1))
        self.last_action: np.ndarray | None = None
        self.latencies: deque[float] = deque(maxlen=1000)
        self.inferences = self.missed_steps = self.late_chunks = self.failures = 0
        self.failed_in_a_row = 0
        self.first_error: str | None = None
        self._latency_ema = 0.0
        self._cond = threading.Condition()
        self._request: tuple | None = None
        self._result: tuple | None = None  # (episode, chunk or None, planned start)
        self._pending = False
        self._closed = False
        self._worker: threading.Thread | None = None
        if cfg.mode != "sync":
            self._worker = threading.Thread(target=self._work, name="chunk-inference", daemon=True)
            self._worker.start()

    # ------------------------------------------------------------- inference
    def _infer(self, obs: Mapping[str, Any], instruction: str) -> np.ndarray:
        noise = self.noise(obs, instruction) if self.noise is not None else None
        t0 = time.perf_counter()
        chunk = self.policy.infer(obs, instruction, noise)
        latency = time.perf_counter() - t0
        self.failed_in_a_row = 0
        self.latencies.append(latency)
        self._latency_ema = latency if self.inferences == 0 else 0.8 * self._latency_ema + 0.2 * latency
        self.inferences += 1
        return np.asarray(chunk, np.float32)

    def _work(self) -> None:
        while True:
            with self._cond:
                while self._request is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                episode, obs, instruction, start = self._request
                self._request = None
            try:
                chunk: np.ndarray | None = self._infer(obs, instruction)
            except (PolicyError, OSError, RuntimeError, ValueError) as exc:
                self._failed(exc)
                chunk = None
            with self._cond:
                self._result = (episode, chunk, start)
                self._pending = False

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        self.failed_in_a_row += 1
        if self.first_error is None:
            self.first_error = f"{type(exc).__name__}: {exc}"
        if self.failures == 1 or self.failures % 100 == 0:
            log.warning("base policy inference failed (%d so far): %s", self.failures, exc)

    def lead(self) -> int:
        """Steps before a chunk's end at which the next inference is launched."""
        if self.cfg.lead_steps >= 0:
            return self.cfg.lead_steps
        return min(self.execute, math.ceil(self._latency_ema / self.period_s) + 1)

    # --------------------------------------------------------------- control
    def reset(self) -> None:
        """A new episode: forget the chunks (an inference still running for the old episode is discarded)."""
        with self._cond:
            self.episode += 1
            if self._request is not None:  # not picked up by the worker yet: it never will be
                self._request, self._pending = None, False
            self._result = None
        self.chunks.clear()
        self.t = 0
        self.last_action = None
        self.policy.reset()

    def _take_result(self) -> None:
        with self._cond:
            result, self._result = self._result, None
        if result is None or result[0] != self.episode or result[1] is None:
            return
        _, actions, start = result
        if self.t > start:  # late: the robot held (start afresh) or continued (skip the spent steps)
            self.late_chunks += 1
            if self.cfg.on_miss == "hold":
                start = self.t
        self.chunks.append(_Chunk(actions, start))

    def _launch(self, obs: Mapping[str, Any], instruction: str) -> None:
        current = self.chunks[-1]
        start = max(current.start + self.execute, self.t)  # now, when the last chunk ran out (a failed inference)
        if self._pending or start - self.t > self.lead():
            return
        obs = copy.deepcopy(dict(obs))  # the env's buffers are reused by the next steps
        if self.cfg.mode == "future":
            done = min(self.t - current.start, self.execute)
            obs["state"] = np.asarray(self.predict_state(np.asarray(obs["state"]), current.actions[done:self.execute]),
                                      np.float32)
        with self._cond:
            self._pending = True
            self._request = (self.episode, obs, instruction, start)
            self._cond.notify()

    def _select(self) -> list[tuple[_Chunk, int]]:
        """The chunks whose actions make step t's action, with the index into each (oldest first)."""
        t = self.t
        if self.cfg.temporal_ensemble > 0:
            return [(c, t - c.start) for c in self.chunks if 0 <= t - c.start < self.horizon]
        for c in reversed(self.chunks):  # the newest chunk that has started and is not used up
            if 0 <= t - c.start < self.execute:
                return [(c, t - c.start)]
        if self.cfg.on_miss == "continue":
            for c in reversed(self.chunks):
                if 0 <= t - c.start < self.horizon:
                    return [(c, t - c.start)]
        return []

    def step(self, obs: Mapping[str, Any], instruction: str = "") -> ExecStep:
        """The action for this control step (call once per step, after :meth:`reset` at an episode's start)."""
        if self._worker is not None:
            self._take_result()
        newest = self.chunks[-1] if self.chunks else None
        if newest is None or (self.cfg.mode == "sync" and self.t - newest.start >= self.execute):
            try:  # the episode's first chunk, or sync mode's next one: the robot waits for it
                self.chunks.append(_Chunk(self._infer(obs, instruction), self.t))
            except (PolicyError, OSError, RuntimeError, ValueError) as exc:
                self._failed(exc)
        elif self.cfg.mode != "sync":
            self._launch(obs, instruction)
        if self.failed_in_a_row >= self.cfg.max_failed_inferences:
            raise PolicyError(f"base policy: {self.failed_in_a_row} inferences in a row failed "
                              f"({self.failures} of {self.failures + self.inferences} in all; "
                              f"execution.max_failed_inferences {self.cfg.max_failed_inferences}); the first: "
                              f"{self.first_error}")
        selected = self._select()
        if not selected:
            self.missed_steps += 1
            action = self.meta.hold_action(self.last_action)
            index, missed = -1, True
        elif len(selected) > 1:
            weights = np.exp(-self.cfg.temporal_ensemble * np.arange(len(selected)))
            action = (np.tensordot(weights, np.stack([c.actions[i] for c, i in selected]), 1) / weights.sum())
            index, missed = selected[-1][1], False
        else:
            (chunk, index), missed = selected[0], False
            action = chunk.actions[index]
        action = np.asarray(action, np.float32)
        self.t += 1
        self.last_action = action
        return ExecStep(action, action.copy(), int(index), missed)

    def stats(self) -> dict[str, float]:
        lat = np.asarray(self.latencies) * 1e3 if self.latencies else np.zeros(1)
        return {"inferences": self.inferences, "missed_steps": self.missed_steps, "late_chunks": self.late_chunks,
                "failures": self.failures, "latency_ms_p50": float(np.percentile(lat, 50)),
                "latency_ms_p99": float(np.percentile(lat, 99))}

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._worker is not None:
            self._worker.join(timeout=5)
