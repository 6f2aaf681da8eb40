"""Checkpoints a person can trust: every checkpoint carries a manifest of its files; a resume verifies it, reports a
damaged checkpoint once by file and cause, falls back to the newest intact one (losing no transition: the spools
keep what the oldest kept checkpoint lacks), and stops with one line and exit 2 when none is intact."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import pytest

from robot_rl.runtime.checkpoint import NoCompleteCheckpoint, checkpoint_folders, latest_checkpoint, resume_point
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.supervisor import train
from robot_rl.utils.manifest import manifest_problem, write_manifest

from .delivery import CLI, assert_exactly_once, clear_shm, kill_group, start_train, wait_for
from .test_faults import config, resume
from .test_train import small_config


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _largest(folder: Path) -> Path:
    return max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


DAMAGE = {  # what a disk error or a copy cut short leaves, and the file the one line must name
    "truncated agent.safetensors": (lambda c: _truncate(c / "agent.safetensors"), "agent.safetensors"),
    "truncated replay store": (lambda c: _truncate(_largest(c / "replay.zarr")), "replay.zarr/"),
    "empty counters.json": (lambda c: (c / "counters.json").write_text(""), "counters.json"),
    "missing latest link": (lambda c: (c.parent / "latest").unlink(), "latest"),
}


def test_the_manifest_names_a_truncated_a_changed_and_a_missing_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.bin").write_bytes(b"x" * 100)
    (tmp_path / "sub" / "b.bin").write_bytes(b"y" * 10)
    write_manifest(tmp_path)
    assert manifest_problem(tmp_path) is None
    (tmp_path / "sub" / "b.bin").write_bytes(b"z" * 10)  # same size, other bytes: only the checksum sees it
    assert manifest_problem(tmp_path, checksums=False) is None
    assert "sub/b.bin" in manifest_problem(tmp_path) and "checksum" in manifest_problem(tmp_path)
    (tmp_path / "a.bin").write_bytes(b"x" * 40)
    assert manifest_problem(tmp_path) == "a.bin has 40 bytes where 100 were written"
    (tmp_path / "a.bin").unlink()
    assert manifest_problem(tmp_path) == "a.bin is missing"


@pytest.fixture(scope="module")
def three_checkpoints(tmp_path_factory) -> Path:
    """A run with its last three checkpoints kept (near 200, 300 and 400 env steps)."""
    tmp = tmp_path_factory.mktemp("ckpt")
    run, _ = train(small_config(tmp, checkpoint_every=100))
    assert len(checkpoint_folders(run)) == 3
    return run


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_checkpoint_is_named_once_and_the_newest_intact_one_resumes(three_checkpoints, tmp_path, caplog,
                                                                               damage):
    run = tmp_path / "run"
    shutil.copytree(three_checkpoints, run)
    newest, older = checkpoint_folders(run)[:2]
    hurt, named = DAMAGE[damage]
    hurt(newest)
    caplog.set_level(logging.INFO)
    learner = Learner(small_config(tmp_path), run, resume=True)
    try:
        lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(lines) == 1 and named in lines[0], lines
        if damage == "missing latest link":  # nothing damaged: the newest checkpoint, and the link written again
            assert learner.counters.env_steps == int(newest.name)
            assert latest_checkpoint(run) == newest and (run / "checkpoints" / "latest").read_text() == newest.name
        else:
            assert learner.counters.env_steps == int(older.name)
            assert f"resuming from {older.name}" in lines[0]
            assert not newest.exists() and newest.with_name(newest.name + ".damaged").is_dir()
            assert (run / "checkpoints" / "latest").read_text() == older.name
    finally:
        learner.close(unlink=True)


def test_no_intact_checkpoint_stops_with_one_line_and_exit_2(three_checkpoints, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(three_checkpoints, run)
    for folder in checkpoint_folders(run):
        (folder / "counters.json").write_text("")
    with pytest.raises(NoCompleteCheckpoint, match="counters.json has 0 bytes"):
        resume_point(run)
    out = subprocess.run([*CLI, "train", "--resume", str(run)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if "no intact checkpoint" in line]
    assert len(errors) == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert out.stderr.count("restart") == 0, out.stderr[-3000:]  # no restart spent on what cannot go away


@pytest.mark.timeout(400)
def test_falling_back_after_a_power_cut_loses_no_transition(tmp_path):
    """Checkpoints every 150 env steps, a power cut, the newest checkpoint's agent file cut short: the resume
    loads the one before and the spools deliver everything after it, each transition once."""
    cfg = config(tmp_path, "fall", {"total_env_steps": 100_000, "checkpoint_every": 150}, control_hz=300.0)
    run, log = tmp_path / "fall", tmp_path / "fall.log"
    proc = start_train(cfg, log=log)
    try:
        wait_for(lambda: len(checkpoint_folders(run)) >= 2, 240, "two checkpoints", proc, log)
    finally:
        kill_group(proc)
    clear_shm(run)
    newest = checkpoint_folders(run)[0]
    _truncate(newest / "agent.safetensors")
    done = resume(run, "--total-env-steps", "600")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("agent.safetensors has") == 1, done.stderr[-3000:]
    assert assert_exactly_once(run) >= 600


def test_the_spool_bound_counts_only_what_no_checkpoint_holds(tmp_path) -> None:
    """The spools keep what the older kept checkpoints lack, but the bound (``runtime.spool_max_mb``: a sim actor
    waits at it) counts only the chunks after the newest checkpoint: otherwise a pressure checkpoint trims too
    little to release a waiting actor."""
    import numpy as np

    from robot_rl.runtime.transport.spool import SpoolWriter, mark_checkpointed, pending_bytes, spooled_seqs, trim

    writer = SpoolWriter(tmp_path / "actor0")
    for seq in range(6):
        writer.write(seq, {"obs": np.zeros(1000, np.float32)})
    writer.flush()
    size = pending_bytes(tmp_path / "actor0") / 6
    assert size > 4000
    mark_checkpointed(tmp_path / "actor0", 3)  # the newest checkpoint holds chunks 0-3
    trim(tmp_path / "actor0", 1)  # the oldest kept one holds 0-1
    assert spooled_seqs(tmp_path / "actor0") == [2, 3, 4, 5]
    assert pending_bytes(tmp_path / "actor0") == 2 * size
    writer.close()
