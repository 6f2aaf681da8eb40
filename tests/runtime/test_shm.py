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
