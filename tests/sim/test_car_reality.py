"""Car reality profiles (robot_rl_sim.car_reality): the bundled cars load, say where every value comes from, and grow
harder from mild to hard; a bad profile fails naming what is wrong; the drivetrain lag is a first-order lag, the same
stepped or over a whole series."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import pytest

from robot_rl_sim.car_reality import (
    CarRealityProfile,
    DrivetrainLags,
    FirstOrderLag,
    bundled_car_realities,
    load_car_reality,
)

NUMBERS = [f.name for f in fields(CarRealityProfile) if f.name not in ("name", "sources")]


def test_the_bundled_cars_load_and_every_value_has_its_source() -> None:
    assert bundled_car_realities() == ["hard", "mild", "typical"]
    for name in bundled_car_realities():
        reality = load_car_reality(name)
        assert reality.name == name and not reality.nominal
        changed = [k for k in NUMBERS if getattr(reality, k) != getattr(CarRealityProfile(), k)]
        assert sorted(changed) == sorted(reality.sources), name


def test_the_bundled_cars_grow_harder() -> None:
    mild, typical, hard = (load_car_reality(n) for n in ("mild", "typical", "hard"))
    for key in NUMBERS:
        a, b, c = (getattr(r, key) for r in (mild, typical, hard))
        if key == "floor_friction":  # less grip is harder
            assert a > b > c, key
        else:
            assert a < b < c, key


def test_nominal_is_the_training_sim_and_bad_profiles_fail_naming_the_problem(tmp_path) -> None:
    assert load_car_reality("").nominal and load_car_reality("nominal") == CarRealityProfile()
    with pytest.raises(ValueError, match="no bundled profile 'typcial'"):
        load_car_reality("typcial")
    bad = tmp_path / "car.yaml"
    bad.write_text("steering_lag: 0.1\n")
    with pytest.raises(ValueError, match=r"unknown fields \['steering_lag'\]"):
        load_car_reality(str(bad))
    bad.write_text("speed_time_constant: -0.1\n")
    with pytest.raises(ValueError, match=r"\['speed_time_constant'\] must be >= 0"):
        load_car_reality(str(bad))
    bad.write_text("odometry_speed_scale_error: -1.0\n")
    with pytest.raises(ValueError, match="must be > -1"):
        load_car_reality(str(bad))
    mine = tmp_path / "lab_car.yaml"
    mine.write_text("trim_curvature: -0.05\nsources: {trim_curvature: 'drove 5 m straight, drifted 0.6 m right'}\n")
    assert load_car_reality(str(mine)).trim_curvature == -0.05  # a car may drift either way


def test_the_lag_reaches_63_percent_after_one_time_constant_and_zero_is_no_lag() -> None:
    dt, tau = 0.005, 0.15
    lag = FirstOrderLag(tau, dt)
    for _ in range(round(tau / dt)):
        y = lag.step(1.0)
    assert y == pytest.approx(1.0 - math.exp(-1.0), abs=1e-9)
    assert FirstOrderLag(0.0, dt).step(0.7) == 0.7


@pytest.mark.parametrize("taus", [(0.15, 0.158), (0.0, 0.3)])
def test_a_whole_series_of_commands_is_driven_as_step_by_step(taus) -> None:
    """The calibration's replay drives a log's commands through the lags at once (``series``); the emulated car and
    the Drive task step them: the same law."""
    rng = np.random.default_rng(0)
    v, w = rng.uniform(-2, 2, 500), rng.uniform(-3, 3, 500)
    stepped = DrivetrainLags(*taus, 0.14, 0.005)
    expected = np.array([stepped.step(a, b) for a, b in zip(v, w, strict=True)])
    got = DrivetrainLags(*taus, 0.14, 0.005).series(v, w)
    assert np.allclose(np.stack(got, axis=1), expected, atol=1e-12)
    # from a car already moving (a log's window that starts mid-drive): the stepped lags' state, continued
    more = np.array([stepped.step(a, b) for a, b in zip(w, v, strict=True)])
    got = DrivetrainLags(*taus, 0.14, 0.005).series(w, v, start=tuple(expected[-1]))
    assert np.allclose(np.stack(got, axis=1), more, atol=1e-12)
