"""Test doubles of the base-policy contract over a known dynamics: x_{t+1} = x_t + 0.1 a_t."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from robot_rl.policies.base import PolicyMetadata
from robot_rl.policies.client import wait_for_server
from robot_rl.policies.vla_model import VLAConfig

GAIN = 0.1
# A VLA small enough to train in seconds (tests/conftest.py's tiny_vla; its envs: PickColor with TINY_ENV_KWARGS)
TINY_VLA = VLAConfig(image_size=32, channels=(8, 16, 32), width=32, depth=1, head_depth=1, heads=2, chunk_length=5,
                     flow_steps=2)
TINY_ENV_KWARGS = {"image_size": 32, "object_state": False}


def roll(state: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """The toy dynamics' state after ``actions`` (what a future-aware executor must predict)."""
    return state + GAIN * np.asarray(actions).sum(axis=0)


class GoalPolicy:
    """Steers x towards ``goal`` with chunks of H steps planned from the state it is given; records every call's
    conditioning state; sleeps ``latency_s`` per inference (released GIL, like a remote server or a GPU)."""

    def __init__(self, horizon: int = 8, latency_s: float = 0.0, goal=(1.0, -1.0), control_hz: float = 20.0):
        self.metadata = PolicyMetadata(action_dim=2, chunk_length=horizon, control_hz=control_hz, state_dim=2,
                                       accepts_noise=True)
        self.latency_s, self.goal = latency_s, np.asarray(goal, np.float32)
        self.seen: list[np.ndarray] = []
        self.noises: list[np.ndarray | None] = []
        self.lock = threading.Lock()

    def infer(self, obs, instruction="", noise=None):
        state = np.asarray(obs["state"], np.float32).copy()
        with self.lock:
            self.seen.append(state)
            self.noises.append(noise)
        if self.latency_s:
            time.sleep(self.latency_s)
        chunk, x = [], state.copy()
        for _ in range(self.metadata.chunk_length):  # plan: close 30 % of the gap per step
            a = np.clip(0.3 * (self.goal - x) / GAIN, -1, 1)
            chunk.append(a)
            x = x + GAIN * a
        return np.asarray(chunk, np.float32)

    def reset(self):
        pass

    def close(self):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(policy: str | Path) -> Iterator[str]:
    """``robot-rl serve-policy POLICY`` in its own process on a free local port for the block; yields its URL.
    A block that ends normally also checks that the server printed no traceback."""
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "serve-policy", str(policy), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_server(url, 60)
        yield url
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert "Traceback" not in err, err
