"""Atomic, verified checkpoints of a run: agent (+ optimizers, alpha, RNG), replay (zarr), counters.

Layout: ``<run>/checkpoints/<step>/{agent.safetensors, policy.safetensors, replay.zarr, counters.json,
manifest.json}`` and ``<run>/checkpoints/latest`` naming the newest. A checkpoint folder is built under a temporary
name, its manifest (size and SHA-256 of every file) written last, and renamed into place, so a crash at any point
leaves the previous checkpoint intact. A resume verifies the manifest and falls back to the newest intact
checkpoint (:func:`resume_point`); the spools keep what the oldest kept checkpoint lacks, so falling back loses
no transition.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from robot_rl.agents.base import Agent
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.replay.store import load_buffer, save_buffer
from robot_rl.spaces import ObsSpec
from robot_rl.utils.disk import naming
from robot_rl.utils.failpoint import failpoint
from robot_rl.utils.log import get_logger
from robot_rl.utils.manifest import write_manifest
from robot_rl.utils.run_dir import (  # noqa: F401  (re-exported: tests, benchmarks)
    BEST,
    NoCompleteCheckpoint,
    checkpoint_folders,
    has_checkpoint,
    intact_checkpoint,
    latest_checkpoint,
)
from robot_rl.utils.state_io import atomic_write, fsync_tree, load_state, save_state

log = get_logger(__name__)

DAMAGED_SUFFIX = ".damaged"
"""A checkpoint a resume skipped is renamed ``<step>.damaged`` (kept for a person to look at, never loaded)."""


def save_checkpoint(run_dir: str | Path, agent: Agent, replay: ReplayBuffer | None, counters: dict[str, Any],
                    keep: int = 3, keep_policies: bool = False) -> Path:
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
        with naming(final / "policy.safetensors"):
            save_file(agent.policy_state(), str(tmp / "policy.safetensors"))
        if replay is not None:
            with naming(final / "replay.zarr"):
                save_buffer(replay, tmp / "replay.zarr")
        failpoint("checkpoint.replay_written")
        atomic_write(tmp / "counters.json", lambda f: f.write_text(json.dumps(counters)))
        write_manifest(tmp)  # last: a folder whose files match its manifest is complete
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
    for old in checkpoint_folders(run_dir)[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def evaluation_score(evaluation: dict[str, float]) -> tuple[float, float]:
    """How good an evaluation is: its success rate first (a task without a success check: -inf), then its mean
    return."""
    def finite(x: Any) -> float:
        return float(x) if x is not None and math.isfinite(float(x)) else -math.inf

    return finite(evaluation.get("success_rate")), finite(evaluation.get("return_mean"))


def best_evaluation(run_dir: str | Path) -> dict[str, Any] | None:
    """The env steps and evaluation of the run's best policy (``<run>/best/policy.safetensors``'s metadata), or
    None when the run has kept none."""
    try:
        with safe_open(str(Path(run_dir) / BEST / "policy.safetensors"), "pt") as f:
            meta = f.metadata() or {}
        return {"env_steps": int(meta["env_steps"]), "evaluation": json.loads(meta["evaluation"])}
    except (OSError, ValueError, KeyError, SafetensorError):
        return None


def save_best_policy(run_dir: str | Path, agent: Agent, evaluation: dict[str, float], env_steps: int) -> Path:
    """``agent``'s policy weights as the run's best, that evaluation and its env steps in the file's metadata: one
    file, written atomically, so a crash leaves the previous best whole."""
    path = Path(run_dir) / BEST / "policy.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"env_steps": str(env_steps), "evaluation": json.dumps(evaluation)}
    atomic_write(path, lambda f: save_file(agent.policy_state(), str(f), metadata=meta))
    return path


def oldest_kept_counters(run_dir: str | Path) -> dict[str, Any] | None:
    """The counters of the oldest checkpoint kept (None if it cannot be read): the spools are trimmed only up to
    it, so a resume that falls back to any kept checkpoint still finds every transition after it."""
    folders = checkpoint_folders(run_dir)
    try:
        return json.loads((folders[-1] / "counters.json").read_text()) if folders else None
    except (OSError, ValueError):
        return None


def resume_point(run_dir: str | Path) -> Path | None:
    """The checkpoint a resume loads: the newest whose files match its manifest (None when the run has no
    checkpoint yet). Newer damaged ones are reported in one line, by file and cause, and renamed
    ``<step>.damaged``; ``latest`` is pointed at the one used. Raises :class:`NoCompleteCheckpoint` (one line)
    when none is intact: a restart cannot fix that."""
    if not has_checkpoint(run_dir):
        return None
    path, skipped = intact_checkpoint(run_dir)
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    named = pointer.read_text().strip() if pointer.is_file() else None
    if skipped:
        newest = int(skipped[0][0].name)
        log.warning("checkpoint %s; resuming from %s, %d env steps earlier: the actors' spools deliver those again "
                    "and their updates are redone (kept for a look as %s)",
                    "; ".join(f"{folder.name} skipped: {why}" for folder, why in skipped), path.name,
                    newest - int(path.name), ", ".join(f.name + DAMAGED_SUFFIX for f, _ in skipped))
        for folder, _ in skipped:
            kept = folder.with_name(folder.name + DAMAGED_SUFFIX)
            shutil.rmtree(kept, ignore_errors=True)  # one damaged at the same step before: the newer one is kept
            os.replace(folder, kept)
    elif named != path.name:
        log.warning("%s %s; resuming from the newest intact checkpoint, %s", pointer,
                    "is missing" if named is None else f"names {named!r}", path.name)
    if named != path.name:
        atomic_write(pointer, lambda f: f.write_text(path.name))
    return path


def load_agent_from(run_dir: str | Path, agent: Agent) -> Path:
    """``agent`` (networks, optimizers, temperature) as another run's newest intact checkpoint left it, nothing
    else of that run (``init_from``: a policy trained elsewhere fine-tuned here). Returns the checkpoint."""
    path = latest_checkpoint(run_dir)
    try:
        agent.load_state_dict(load_state(path / "agent.safetensors"))
    except (RuntimeError, KeyError, ValueError) as exc:  # another agent, other sizes: the state does not fit
        raise ValueError(f"init_from: {path} holds another agent than this run builds (agent and observation "
                         f"settings must match): {str(exc).splitlines()[0][:300]}") from None
    if hasattr(agent, "initialised_from_another_run"):  # optional: what an agent counts per run starts again
        agent.initialised_from_another_run()
    log.info("agent initialised from %s", path)
    return path


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
