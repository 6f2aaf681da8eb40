"""``load_policy(cfg)``: the base policy a :class:`~robot_rl.policies.config.BasePolicyConfig` names."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.policies.base import BasePolicy
from robot_rl.policies.client import RemotePolicy, token_from_env
from robot_rl.policies.config import BasePolicyConfig


class DelayedPolicy:
    """``policy`` with ``latency_s`` added to every inference (the delay of a remote policy on a GPU box, for
    benchmarks and tests); the sleep releases the GIL as a network wait would."""

    def __init__(self, policy: BasePolicy, latency_s: float) -> None:
        self.policy, self.latency_s = policy, latency_s
        self.metadata = policy.metadata

    def infer(self, obs: Mapping[str, Any], instruction: str = "", noise: np.ndarray | None = None) -> np.ndarray:
        t0 = time.perf_counter()
        chunk = self.policy.infer(obs, instruction, noise)
        left = self.latency_s - (time.perf_counter() - t0)
        if left > 0:
            time.sleep(left)
        return chunk

    def reset(self) -> None:
        self.policy.reset()

    def close(self) -> None:
        self.policy.close()


def missing_policy(cfg: BasePolicyConfig) -> str:
    """Why ``cfg.path``, a local path, is no saved policy folder (no ``policy.json``), with the command that makes
    it where ``cfg.made_by`` names one; "" for a saved folder, a server, a LeRobot policy or no path."""
    path = cfg.path
    if not path or path.startswith(("ws://", "wss://", "lerobot:")) or (Path(path) / "policy.json").is_file():
        return ""
    where = "does not exist" if not Path(path).exists() else "holds no policy.json"
    message = (f"base_policy.path: {path!r} {where}: it is neither ws://HOST:PORT, lerobot:<type>:<folder> nor a "
               "saved policy folder (policy.json)")
    return f"{message}; make it first with: {cfg.made_by}" if cfg.made_by else message


def load_policy(cfg: BasePolicyConfig) -> BasePolicy:
    """``ws://`` / ``wss://`` -> a policy server; ``lerobot:<type>:<folder>`` -> a LeRobot policy; a folder with
    ``policy.json`` -> a policy saved by robot_rl (``robot-rl train-bc``)."""
    cfg.validate()
    path = cfg.path
    policy: BasePolicy
    if path.startswith(("ws://", "wss://")):
        policy = RemotePolicy(path, token=token_from_env(cfg.token_env), timeout_s=cfg.timeout_s, keys=cfg.keys,
                              metadata=cfg.metadata)
    elif path.startswith("lerobot:"):
        # lazy: loads torch and lerobot; only for lerobot: paths
        from robot_rl.policies.lerobot import load_lerobot_policy

        _, kind, folder = (path.split(":", 2) + ["", ""])[:3]
        if not kind or not folder:
            raise ValueError(f"base_policy.path: {path!r} is not lerobot:<policy type>:<folder>")
        policy = load_lerobot_policy(folder, kind, cfg.metadata, cfg.device)
    elif path:
        missing = missing_policy(cfg)
        if missing:
            raise ValueError(missing)
        from robot_rl.policies.vla_policy import load_vla  # lazy: loads torch; only for saved policy folders

        policy = load_vla(path, cfg.device)
    else:
        raise ValueError("base_policy.path is empty: name a saved policy folder or a policy server (ws://...)")
    return DelayedPolicy(policy, cfg.latency_s) if cfg.latency_s > 0 else policy
