"""Atomic checkpoints of a run: agent (+ optimizers, alpha, RNG), replay (zarr), counters.

Layout: ``<run>/checkpoints/<step>/{agent.safetensors, policy.safetensors, replay.zarr, counters.json}`` and
``<run>/checkpoints/latest`` naming the newest complete one. A checkpoint folder is built under a temporary
name and renamed into place, and ``latest`` is replaced atomically, so a crash at any point leaves the previous
checkpoint intact and referenced.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from robot_rl.agents.base import Agent
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.replay.store import load_buffer, save_buffer
from robot_rl.spaces import ObsSpec
from robot_rl.utils.failpoint import failpoint
from robot_rl.utils.run_dir import has_checkpoint, latest_checkpoint  # noqa: F401  (re-exported: tests, benchmarks)
from robot_rl.utils.state_io import atomic_write, fsync_tree, load_state, save_state


def save_checkpoint(run_dir: str | Path, agent: Agent, replay: ReplayBuffer | None, counters: dict[str, Any],
                    keep: int = 2, keep_policies: bool = False) -> Path:
    """Writes ``checkpoints/<env steps>`` atomically and deletes all but the last ``keep``; ``keep_policies``: each
    checkpoint's policy weights are also kept as ``checkpoints/policies/<env steps>.safetensors``."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{int(counters['env_steps']):010d}"
    tmp = root / f".{final.name}.tmp{os.getpid()}"
    for stale in root.glob(".*.tmp*"):  # a checkpoint a killed learner was writing: never referenced
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir()
    try:
        save_state(tmp / "agent.safetensors", agent.state_dict())
        save_file(agent.policy_state(), str(tmp / "policy.safetensors"))
        if replay is not None:
            save_buffer(replay, tmp / "replay.zarr")
        failpoint("checkpoint.replay_written")
        atomic_write(tmp / "counters.json", lambda f: f.write_text(json.dumps(counters)))
        fsync_tree(tmp)  # the replay's chunks and the policy too, not only what atomic_write synced
    except BaseException:  # e.g. a full disk: nothing half-written stays behind; ``latest`` still names the last
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    failpoint("checkpoint.renamed")
    atomic_write(root / "latest", lambda f: f.write_text(final.name))
    if keep_policies:
        (root / "policies").mkdir(exist_ok=True)
        shutil.copyfile(final / "policy.safetensors", root / "policies" / f"{final.name}.safetensors")
    for old in sorted(p for p in root.iterdir() if p.is_dir() and p.name.isdigit())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(path: str | Path, agent: Agent, replay_cfg: ReplayConfig | None, spec: ObsSpec,
                    action_dim: int) -> tuple[ReplayBuffer | None, dict[str, Any]]:
    """Restores ``agent`` in place; returns the replay (if saved) and the counters."""
    path = Path(path)
    agent.load_state_dict(load_state(path / "agent.safetensors"))
    replay = None
    if (path / "replay.zarr").exists():
        replay = load_buffer(path / "replay.zarr", replay_cfg, expected_spec=spec, expected_action_dim=action_dim)
    counters = json.loads((path / "counters.json").read_text())
    return replay, counters
