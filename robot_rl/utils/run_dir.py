"""Where a run folder keeps its checkpoints: ``<run>/checkpoints/latest`` names the newest complete one (written by
robot_rl.runtime.checkpoint). Plain path functions, so anything that reads a run folder (dataset export, policy
export, distillation) finds its checkpoint without importing the training runtime."""

from __future__ import annotations

from pathlib import Path


def has_checkpoint(run_dir: str | Path) -> bool:
    """Whether the run has a complete checkpoint (``checkpoints/latest`` is written last)."""
    return (Path(run_dir) / "checkpoints" / "latest").is_file()


def latest_checkpoint(run_dir: str | Path) -> Path:
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if not pointer.is_file():
        raise FileNotFoundError(f"no checkpoint in {run_dir} (missing {pointer})")
    path = root / pointer.read_text().strip()
    if not path.is_dir():
        raise FileNotFoundError(f"{pointer} names {path.name}, which does not exist")
    return path
