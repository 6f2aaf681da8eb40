"""The emulated drivers' real-time step schedule (robot_rl_sim.step_clock): a step run late keeps its scheduled
time; a loop far behind moves its schedule instead of racing through the backlog."""

from __future__ import annotations

import time

import numpy as np
import pytest

from robot_rl_sim.step_clock import StepClock


def test_a_late_step_keeps_its_scheduled_time() -> None:
    clock = StepClock(0.01, resync_after=0.5)
    times = [clock.tick()]
    time.sleep(0.045)  # the machine was busy: the next steps run late
    times += [clock.tick() for _ in range(9)]
    assert np.allclose(np.diff(times), 0.01, atol=1e-6, rtol=0)  # the schedule, not when each step ran
    assert abs(times[0] - time.time()) < 0.5  # wall-clock scale


def test_a_loop_far_behind_moves_its_schedule() -> None:
    clock = StepClock(0.01, resync_after=0.05)
    first = clock.tick()
    time.sleep(0.2)
    late = clock.tick()
    assert late - first > 0.15  # the step is stamped when it runs, not 10 ms after the last
    assert clock.behind() < 0.05
    assert clock.tick() - late == pytest.approx(0.01, abs=1e-6)  # stamps on the time.time() scale: ~0.2 us resolution


def test_bad_periods_fail() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        StepClock(0.0)
