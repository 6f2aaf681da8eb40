"""A policy exported to ONNX (``robot-rl export RUN --format onnx``), run with nothing but numpy and onnxruntime:
copy this file and the export folder to a robot PC.

    from runner import OnnxPolicy
    policy = OnnxPolicy("exported/")
    action = policy.act({"state": state, "pixels": {"front": frame}})      # in [-1, 1]
    action = policy.act({..., "instruction": "pick up the red cube"})      # a language policy: the text
    command = policy.to_env_units(action)                                  # in the env's action units

This module must not import torch or anything else from robot_rl (a test checks).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


class OnnxPolicy:
    """An exported policy folder (``deploy.json`` + ``policy.onnx``): ``act`` maps one observation (or a batch) to
    the action in ``[-1, 1]``."""

    def __init__(self, folder: str | Path, threads: int = 1) -> None:
        import onnxruntime as ort  # optional: export

        folder = Path(folder)
        self.meta: dict[str, Any] = json.loads((folder / "deploy.json").read_text())
        if self.meta.get("format") != "onnx":
            raise ValueError(f"{folder}: not an ONNX export (format {self.meta.get('format')!r})")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(folder / self.meta["file"]), options,
                                            providers=["CPUExecutionProvider"])
        self.inputs = self.meta["inputs"]
        self.instructions = {t: np.asarray(v, np.float32) for t, v in self.meta.get("instructions", {}).items()}
        """A language policy's instructions (text -> the embedding it was trained with), from the export."""
        low, high = self.meta.get("action_low"), self.meta.get("action_high")
        self.low = None if low is None else np.asarray(low, np.float32)
        self.high = None if high is None else np.asarray(high, np.float32)

    def _feeds(self, obs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], bool]:
        single = np.ndim(obs["state"]) == 1
        feeds = {}
        for spec in self.inputs:
            name = spec["name"]
            if name == "instruction":
                value = self.embedding(obs.get("instruction"))
            else:
                value = obs["pixels"][name.split(".", 1)[1]] if name.startswith("pixels.") else obs[name]
            array = np.asarray(value, dtype=spec["dtype"])
            if single:
                array = array[None]
            elif name == "instruction" and array.ndim == 1:  # one instruction for the whole batch
                array = np.broadcast_to(array, (len(obs["state"]), *array.shape))
            if list(array.shape[1:]) != spec["shape"]:
                raise ValueError(f"observation {name!r} has shape {list(array.shape[1:])}, the policy takes "
                                 f"{spec['shape']}")
            feeds[name] = np.ascontiguousarray(array)
        return feeds, single

    def embedding(self, instruction: Any) -> np.ndarray:
        """The instruction input: an embedding as given, or the text's from the export's table (the only one when
        the policy knows a single instruction and none is given)."""
        if instruction is None and len(self.instructions) == 1:
            return next(iter(self.instructions.values()))
        if isinstance(instruction, str):
            if instruction not in self.instructions:
                raise ValueError(f"instruction {instruction!r} is not one this policy was trained on: "
                                 f"{sorted(self.instructions)}")
            return self.instructions[instruction]
        if instruction is None:
            raise ValueError(f"this policy takes an instruction: one of {sorted(self.instructions)}")
        return np.asarray(instruction, np.float32)

    def act(self, obs: Mapping[str, Any]) -> np.ndarray:
        """The deterministic action for one observation (``state [D]``) or a batch (``state [N, D]``)."""
        feeds, single = self._feeds(obs)
        action = self.session.run(["action"], feeds)[0]
        return action[0] if single else action

    def to_env_units(self, action: np.ndarray) -> np.ndarray:
        """``[-1, 1]`` -> the env's action bounds recorded at export."""
        if self.low is None or self.high is None:
            raise ValueError("this export records no action bounds")
        return self.low + (np.asarray(action, np.float32) + 1.0) * 0.5 * (self.high - self.low)


def latency(policy: OnnxPolicy, obs: Mapping[str, Any], calls: int = 500) -> dict[str, float]:
    """Per-call latency of ``policy.act(obs)`` in microseconds (p50, p99) after a warm-up."""
    for _ in range(20):
        policy.act(obs)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        policy.act(obs)
        times.append(time.perf_counter() - t0)
    us = np.asarray(times) * 1e6
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99))}
