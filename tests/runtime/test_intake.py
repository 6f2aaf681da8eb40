"""The learner's intake against an actor that is halfway through starting up: it makes its spool folder before it
registers (``<run>/actors/<uid>.json``). A scan in between must not retire the uid (it did: the actor's chunks
were never taken and its ring outlived the run)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.replay.rows import BlockBuilder, row_specs
from robot_rl.runtime.learner.counters import LearnerCounters
from robot_rl.runtime.learner.intake import Intake
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, ring_name
from robot_rl.runtime.transport.spool import SpoolWriter
from robot_rl.spaces import ObsSpec

SPEC = ObsSpec(3)
UID = "actor0-test"


def chunk(start: int, n: int = 4) -> dict[str, np.ndarray]:
    builder = BlockBuilder(SPEC, 1, 16)
    for t in range(start, start + n):
        builder.add(0, {"state": np.full(3, t, np.float32)}, np.zeros(1, np.float32), -1.0, False, False,
                    {"state": np.full(3, t + 1, np.float32)})
    return {k: v.copy() for k, v in builder.take().items()}


def make_intake(run: Path) -> Intake:
    replay = ReplayBuffer(SPEC, 1, ReplayConfig(online_capacity=100, demos_capacity=2, interventions_capacity=2))
    return Intake(run, SPEC, 1, replay, LearnerCounters(), spool=True, announce=lambda: None)


def register(run: Path) -> shm.ChunkRing:
    ring = shm.ChunkRing(ring_name(run, UID), row_specs(SPEC, 1), 4, 32, create=True)
    ring.beat()
    actor_dir(run).mkdir(parents=True, exist_ok=True)
    (actor_dir(run) / f"{UID}.json").write_text(json.dumps({"uid": UID, "index": 0, "pid": os.getpid(),
                                                            "ring": ring.name, "num_envs": 1, "spool": True}))
    return ring


def next_scan(intake: Intake) -> None:
    intake._last_scan = time.perf_counter() - 1.0  # the intake rescans every 0.5 s: no need to sleep


@pytest.fixture
def run(tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()
    yield run
    shm.unlink_shm(ring_name(run, UID))


def test_a_scan_between_spool_folder_and_registration_does_not_retire_the_actor(run):
    intake = make_intake(run)
    spool = SpoolWriter(run / "spool" / UID)  # the actor's first step: its (empty) spool folder
    next_scan(intake)
    assert intake.take() == 0
    assert UID not in intake.retired
    ring = register(run)  # ... then it registers and sends
    spool.write(0, chunk(0))
    spool.close()
    ring.put(chunk(0), 0)
    next_scan(intake)
    assert intake.take() == 4
    assert intake.counters.ingested[UID] == 1 and intake.counters.env_steps == 4
    assert ring.taken_seq == 1
    ring.mark_closed()
    ring.close()
    next_scan(intake)
    intake.take()  # the actor said goodbye and everything is taken: now it is retired and its ring unlinked
    assert UID in intake.retired and not (actor_dir(run) / f"{UID}.json").exists()
    with pytest.raises(FileNotFoundError):
        shm.open_shm(ring_name(run, UID))


def test_a_spool_of_an_earlier_life_is_drained_then_retired(run):
    intake = make_intake(run)
    spool = SpoolWriter(run / "spool" / UID)  # an actor of an earlier life: chunk 0 spooled, no registration
    spool.write(0, chunk(0))
    spool.close()
    next_scan(intake)
    assert intake.take() == 4
    assert UID in intake.retired and intake.counters.env_steps == 4
