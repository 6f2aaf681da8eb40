"""Reality profiles (robot_rl_sim.reality): the bundled robots load, say where every value comes from, and grow
harder from mild to hard; a bad profile fails naming what is wrong."""

from __future__ import annotations

from dataclasses import fields

import pytest

from robot_rl_sim.reality import RealityProfile, bundled_realities, load_reality

NUMBERS = [f.name for f in fields(RealityProfile) if f.name not in ("name", "sources")]


def test_the_bundled_robots_load_and_every_value_has_its_source() -> None:
    assert bundled_realities() == ["hard", "mild", "typical"]
    for name in bundled_realities():
        reality = load_reality(name)
        assert reality.name == name and not reality.nominal
        changed = [k for k in NUMBERS if getattr(reality, k) != getattr(RealityProfile(), k)]
        assert sorted(changed) == sorted(reality.sources), name  # every value that differs is sourced


def test_the_bundled_robots_grow_harder() -> None:
    mild, typical, hard = (load_reality(n) for n in ("mild", "typical", "hard"))
    for key in NUMBERS:
        a, b, c = (getattr(r, key) for r in (mild, typical, hard))
        if key in ("tracking_bandwidth_scale", "gripper_speed"):  # slower is harder
            assert a > b > c, key
        else:
            assert a < b < c, key


def test_nominal_is_the_training_sim_and_bad_profiles_fail_naming_the_problem(tmp_path) -> None:
    assert load_reality("").nominal and load_reality("nominal") == RealityProfile()
    with pytest.raises(ValueError, match="no bundled profile 'typcial'"):
        load_reality("typcial")
    bad = tmp_path / "mine.yaml"
    bad.write_text("command_latency: 0.01\ncamera_lag: 0.1\n")
    with pytest.raises(ValueError, match=r"unknown fields \['camera_lag'\]"):
        load_reality(str(bad))
    bad.write_text("joint_noise: -0.1\n")
    with pytest.raises(ValueError, match=r"\['joint_noise'\] must be >= 0"):
        load_reality(str(bad))
    mine = tmp_path / "lab_arm.yaml"
    mine.write_text("state_latency: 0.02\nsources: {state_latency: measured with ros2 topic delay}\n")
    assert load_reality(str(mine)) == RealityProfile(name="lab_arm", state_latency=0.02,
                                                     sources={"state_latency": "measured with ros2 topic delay"})
