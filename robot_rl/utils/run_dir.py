"""Where a run folder keeps its checkpoints: ``<run>/checkpoints/<env steps>/`` (each with a manifest, written last)
and ``<run>/checkpoints/latest`` naming the newest (written by robot_rl.runtime.checkpoint);
``<run>/best/policy.safetensors`` holds the policy of its best evaluation so far (that evaluation in the file's
metadata). Plain path functions, so anything that reads a run folder (evaluation, dataset export, policy export,
distillation) finds an intact checkpoint without importing the training runtime."""

from __future__ import annotations

import json
from pathlib import Path

from robot_rl.utils.manifest import MANIFEST, manifest_problem


class NoCompleteCheckpoint(FileNotFoundError):
    """The run has checkpoints, none of them intact: the message names each one and what is wrong with it."""


def checkpoint_folders(run_dir: str | Path) -> list[Path]:
    """The run's checkpoint folders, newest (most env steps) first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and p.name.isdigit()), reverse=True)


def has_checkpoint(run_dir: str | Path) -> bool:
    """Whether the run has a checkpoint folder (intact or not: :func:`intact_checkpoint` tells)."""
    return bool(checkpoint_folders(run_dir))


def intact_checkpoint(run_dir: str | Path, checksums: bool = True) -> tuple[Path, list[tuple[Path, str]]]:
    """The newest checkpoint whose files match its manifest, and the newer ones skipped with what is wrong with
    each. Raises :class:`NoCompleteCheckpoint` when no checkpoint is intact (or FileNotFoundError when there is
    none). ``checksums=False``: file sizes only (no file read)."""
    folders = checkpoint_folders(run_dir)
    if not folders:
        raise FileNotFoundError(f"no checkpoint in {run_dir} (no folder under {Path(run_dir) / 'checkpoints'})")
    skipped = []
    for folder in folders:
        problem = manifest_problem(folder, checksums) if (folder / MANIFEST).is_file() else _unverified(folder)
        if problem is None:
            return folder, skipped
        skipped.append((folder, problem))
    raise NoCompleteCheckpoint(f"no intact checkpoint in {run_dir}: " + "; ".join(
        f"{folder.name}: {problem}" for folder, problem in skipped))


def latest_checkpoint(run_dir: str | Path) -> Path:
    """The newest intact checkpoint (sizes checked against its manifest; a resume also checks checksums)."""
    return intact_checkpoint(run_dir, checksums=False)[0]


def _unverified(folder: Path) -> str | None:
    """A checkpoint written before checkpoints had a manifest (every folder written since has one before it is
    renamed into place): what it must hold, at least."""
    for name in ("agent.safetensors", "policy.safetensors"):
        if not (folder / name).is_file() or (folder / name).stat().st_size == 0:
            return f"{name} is missing or empty (and there is no {MANIFEST})"
    try:
        json.loads((folder / "counters.json").read_text())["env_steps"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"counters.json cannot be read ({exc}) (and there is no {MANIFEST})"
    return None


BEST = "best"
"""The run's sub-folder with the policy of its best evaluation so far (the learner's ``keep_best``)."""
POLICIES = ("latest", "best")
"""Which of a run's policies to load: the newest intact checkpoint's, or the best evaluation's."""


def policy_file(run_dir: str | Path, which: str = "latest") -> Path:
    """The weights file of the run's ``latest`` policy (the newest intact checkpoint's) or its ``best`` one (the
    best evaluation's, kept by the learner)."""
    if which == "latest":
        return latest_checkpoint(run_dir) / "policy.safetensors"
    if which != "best":
        raise ValueError(f"policy: {which!r} is not one of {', '.join(POLICIES)}")
    path = Path(run_dir) / BEST / "policy.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"no best policy in {run_dir}: the learner keeps one at each evaluation "
                                f"(keep_best); a robot's learner does not evaluate")
    return path
