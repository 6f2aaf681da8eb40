"""Weight board: a learner that died in the middle of a publish leaves the sequence lock odd; the next learner
that attaches must still publish consistently (before the fix every later publish kept it odd: actors hung)."""

import os
import subprocess
import sys

import pytest
import torch

from robot_rl.runtime.transport import shm


def test_a_publish_after_a_learner_died_mid_publish_is_readable(tmp_path):
    name = f"rrl_test_{os.getpid()}_w"
    template = {"w": torch.zeros(4, 3), "fitted": torch.zeros(1)}
    board = shm.WeightBoard(name, template, create=True)
    try:
        board.publish({"w": torch.ones(4, 3), "fitted": torch.ones(1)}, 1)
        # A writer SIGKILLed between its two sequence increments (here: a real process that dies mid-write).
        code = ("import os, torch; from robot_rl.runtime.transport import shm\n"
                f"b = shm.WeightBoard({name!r}, {{'w': torch.zeros(4, 3), 'fitted': torch.zeros(1)}})\n"
                "b._begin_write(); b.payload[:8] = 255; os.kill(os.getpid(), 9)")
        assert subprocess.run([sys.executable, "-c", code]).returncode == -9
        with pytest.raises(TimeoutError):
            board.read(timeout=0.05)  # torn: readers must not see it
        learner = shm.WeightBoard(name, template)  # the restarted learner attaches the board its actors hold
        learner.publish({"w": torch.full((4, 3), 2.0), "fitted": torch.ones(1)}, 2)
        version, got = board.read(timeout=0.5)
        assert version == 2 and torch.equal(got["w"], torch.full((4, 3), 2.0))
        learner.close()
    finally:
        board.close(unlink=True)


def test_the_ibrl_handover_switch_reaches_an_actor_through_the_board():
    """The policy state's 0-d bool (ibrl's actor_alone) survives the byte-level publish and read."""
    from robot_rl.agents.ibrl import IBRLAgent, IBRLConfig
    from tests.agents.test_residual_agent import SMALL, SPEC

    cfg = IBRLConfig(**SMALL, critic_warmup_updates=2, actor_alone_after_updates=3)
    learner_agent, actor_agent = IBRLAgent(SPEC, 2, cfg, seed=0), IBRLAgent(SPEC, 2, cfg, seed=1)
    learner_agent.update_step = 5
    learner_agent._set_bound()
    name = f"rrl_test_{os.getpid()}_ibrl"
    board = shm.WeightBoard(name, learner_agent.policy_state(), create=True)
    try:
        board.publish(learner_agent.policy_state(), 1)
        reader = shm.WeightBoard(name, actor_agent.policy_state())
        _, state = reader.read(timeout=0.5)
        reader.close()
        assert state["ibrl.actor_alone"].dtype == torch.bool and not actor_agent.actor_alone
        actor_agent.load_policy_state(state)
        assert learner_agent.actor_alone and actor_agent.actor_alone
    finally:
        board.close(unlink=True)


def test_a_new_run_in_a_deleted_runs_folder_starts_without_its_shared_memory(tmp_path):
    """A run killed without clean-up, its folder deleted, a new run started at the same path: the new run must not
    attach the dead run's weight board (its heartbeat and stop flag would be the old run's)."""
    from robot_rl.runtime.run_folder import prepare_run
    from robot_rl.runtime.transport.names import board_name, run_key

    from .test_train import small_config

    cfg = small_config(tmp_path)
    run = tmp_path / cfg.name
    old = shm.open_shm(board_name(run), 4096, create=True)
    ring = shm.open_shm(f"rrl_{run_key(run)}_0123456789", 4096, create=True)
    old.close()
    ring.close()
    assert prepare_run(cfg, None) == run
    assert shm.unlink_run_shm(run_key(run)) == []  # nothing left to remove


def test_a_segment_caught_between_creation_and_sizing_reads_as_not_there_yet():
    """shm_open creates a segment empty and sizes it a moment later: a supervisor peeking at the learner's board
    in between (a resumed run, right after start) saw 'cannot mmap an empty file' and exited with a traceback."""
    import _posixshmem

    name = f"rrl_test_{os.getpid()}_empty"
    fd = _posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    os.close(fd)
    try:
        assert shm.peek_learner_status(name) is None
        with pytest.raises(FileNotFoundError):
            shm.WeightBoard(name, {"w": torch.zeros(2)})  # an actor retries, as while no board exists
        with pytest.raises(FileNotFoundError):
            shm.ChunkRing(name, {})
    finally:
        shm.unlink_shm(name)  # a creator killed in between leaves it empty: it can still be removed
    assert not os.path.exists(f"/dev/shm/{name}")
