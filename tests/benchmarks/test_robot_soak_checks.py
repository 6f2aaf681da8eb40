"""The robot-path soak's motion check (benchmarks/robot_soak.py) finds motion nobody asked for and only that: a
jump of the tool in a stretch without commands or under a latched e-stop counts, motion while commands arrive and
during the settling time after the last one does not."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from robot_soak import SETTLE_S, unrequested_motion  # noqa: E402


def _track(seconds: float = 20.0, hz: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(0.0, seconds, 1.0 / hz)
    return t, np.zeros((len(t), 3))


def test_motion_under_commands_or_while_settling_is_requested() -> None:
    t, pos = _track()
    commands = list(np.arange(0.0, 5.0, 0.05))  # a policy at 20 Hz for 5 s
    pos[t < 5.0, 0] = 0.02 * t[t < 5.0]  # the arm moves while commanded
    settling = (t >= 5.0) & (t < 5.0 + SETTLE_S - 0.1)
    pos[settling, 0] = 0.1 + 0.003 * (t[settling] - 5.0)  # and comes to rest after the last command
    pos[t >= 5.0 + SETTLE_S - 0.1, 0] = pos[settling, 0][-1]
    got = unrequested_motion(t, pos, commands, [], 0.0)
    assert got["windows"] == 1 and got["peak_mm"] < 1e-6 and got["over_limit"] == 0, got


def test_a_jump_without_commands_and_a_drift_under_the_e_stop_are_found() -> None:
    t, pos = _track()
    commands = list(np.arange(0.0, 5.0, 0.05)) + list(np.arange(12.0, 20.0, 0.05))
    pos[(t > 9.0) & (t < 12.0), 1] = 0.004  # 4 mm while nobody commands (a driver restarted elsewhere)
    got = unrequested_motion(t, pos, commands, [], 0.0)
    assert got["over_limit"] == 1 and abs(got["peak_mm"] - 4.0) < 1e-6 and got["worst"]["why"] == "no command", got

    t, pos = _track()
    commands = list(np.arange(0.0, 20.0, 0.05))  # commands go on (rejected) under the e-stop
    pos[t > 14.0, 2] = 0.002
    got = unrequested_motion(t, pos, commands, [(10.0, 16.0)], 0.0)
    assert got["over_limit"] == 1 and got["worst"]["why"] == "e-stop latched", got
