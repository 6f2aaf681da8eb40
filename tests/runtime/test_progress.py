"""A run's progress as its folder holds it: the latest checkpoint's counters plus every transition spooled after
it (what an actor that starts before its learner counts its warm-up and update debt from); and the warm-up a run
asks for, in a sim and on a robot."""

from __future__ import annotations

import json

import numpy as np

from robot_rl.runtime.progress import RunProgress, run_progress
from robot_rl.runtime.transport.spool import SpoolWriter
from robot_rl.training.config import SIM_RANDOM_STEPS, TrainConfig
from robot_rl.utils.manifest import write_manifest


def _spool(run, uid: str, valid_rows: list[int]) -> None:
    writer = SpoolWriter(run / "spool" / uid)
    for seq, n in enumerate(valid_rows):
        valid = np.zeros(8, bool)
        valid[:n] = True
        writer.write(seq, {"valid": valid, "reward": np.zeros(8, np.float32)})
    writer.flush()
    writer.close()


def test_the_checkpoint_and_the_chunks_spooled_after_it_are_the_runs_progress(tmp_path) -> None:
    assert run_progress(tmp_path) == RunProgress(0, 0)  # a new run
    _spool(tmp_path, "actor0-0-1-a", [8, 8, 5])  # a first actor life, cut before any checkpoint
    assert run_progress(tmp_path) == RunProgress(21, 0)
    ckpt = tmp_path / "checkpoints" / "0000000016"
    ckpt.mkdir(parents=True)  # a checkpoint holding its first two chunks (16 steps, 10 updates) ...
    (ckpt / "counters.json").write_text(json.dumps({"env_steps": 16, "updates": 10,
                                                    "ingested": {"actor0-0-1-a": 2}}))
    write_manifest(ckpt)
    (tmp_path / "checkpoints" / "latest").write_text(ckpt.name)
    _spool(tmp_path, "actor0-1-2-b", [3])  # ... and a second life's chunk after it
    assert run_progress(tmp_path) == RunProgress(16 + 5 + 3, 10)  # the first two chunks are not counted twice


def test_random_actions_are_asked_for_on_a_robot() -> None:
    assert TrainConfig().warmup_steps(drives_hardware=False) == SIM_RANDOM_STEPS
    assert TrainConfig().warmup_steps(drives_hardware=True) == 0
    assert TrainConfig(random_steps=50).warmup_steps(drives_hardware=True) == 50
