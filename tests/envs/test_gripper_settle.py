"""A reset waits for a slow gripper to open (robot_rl.envs.gripper_settle), and not forever for one that stops short."""

import pytest

from robot_rl.envs.gripper_settle import GripperSettle


def test_a_slow_gripper_is_waited_for_until_open() -> None:
    settle = GripperSettle(target=0.08, tolerance=0.002, stall=0.5)
    t, opening = 0.0, 0.02
    while not settle.settled(t, opening):  # 0.05 m/s, observed at 10 Hz
        t, opening = t + 0.1, min(0.08, opening + 0.005)
        assert t < 2.0
    assert opening > 0.078 and t == pytest.approx(1.2, abs=0.11)


def test_a_gripper_stopped_short_settles_after_the_stall_time() -> None:
    settle = GripperSettle(target=0.08, tolerance=0.002, stall=0.5)
    times = [0.1 * k for k in range(12)]
    got = [settle.settled(t, 0.06 + 0.0001 * (k % 2)) for k, t in enumerate(times)]  # jitter below the tolerance
    assert got.index(True) == 5  # 0.5 s still


def test_no_gripper_is_always_settled_and_bad_settings_are_refused() -> None:
    assert GripperSettle(0.08, 0.002, 0.5).settled(0.0, None)
    with pytest.raises(ValueError, match="tolerance"):
        GripperSettle(0.08, 0.0, 0.5)
