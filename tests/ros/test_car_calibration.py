"""Car calibration recovers the car from its log: the emulated car runs the bundled ``typical`` car reality (hidden
from calibration) behind the ``diff_drive`` profile, in its own process beside the car safety node;
``record_car_excitation`` drives it around the track and records a bag over ROS 2; ``robot-rl calibrate-car`` reads
only the bag and must find each of the car's values (latencies within a control period, the odometry gain within
15 %, the lags within 25 %, the trim within 50 %), and a sim that follows the car more closely than the nominal
one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros

CLI = [sys.executable, "-m", "robot_rl.cli"]


@pytest.mark.timeout(420)
def test_car_calibration_finds_a_hidden_car_reality_from_30_s_of_log(graph, tmp_path) -> None:
    from robot_rl.calibration.car_excite import CarExcitationConfig, record_car_excitation
    from robot_rl_sim.car_reality import load_car_reality

    graph.start("car_hardware", "-p", "profile:=rehearsal/diff_drive", "-p", "reality:=typical")
    graph.start("car_safety", "-p", "profile:=rehearsal/diff_drive")
    bag = record_car_excitation(CarExcitationConfig(out=str(tmp_path / "log"), seconds=30.0))["bag"]
    codes = graph.stop()
    assert all(c in (0, -2) for c in codes.values()), codes
    out = tmp_path / "calibration"
    done = subprocess.run([*CLI, "calibrate-car", "--bag", bag, "--out", str(out), "--fit.fit-seconds", "30",
                           "--fit.iterations", "15"], capture_output=True, text=True, timeout=360)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((out / "calibration.json").read_text())
    got, truth = found["reality"], load_car_reality("typical")
    print(got, found["rms_before"], found["rms_after"])
    assert abs(got["command_latency"] - truth.command_latency) < 0.025, got  # DDS and the driver's step add a few ms
    assert abs(got["odom_latency"] - truth.odom_latency) < 0.01, got
    assert abs(got["odometry_speed_scale_error"] / truth.odometry_speed_scale_error - 1) <= 0.15, got
    # the lags from 30 s of log: +12 % and +4 % on one run, +8 % and +16 % on another (+15 % and +8 % from the
    # benchmark's 120 s): the fit is not yet tighter than that
    for key in ("speed_time_constant", "yaw_rate_time_constant"):
        assert abs(got[key] / getattr(truth, key) - 1) <= 0.25, (key, got)
    # the trim needs more log than this test's 30 s: 0.086 and 0.165 for 0.14 here, -3 % from the benchmark's 120 s
    # (docs/benchmarks/sim-to-real.md)
    assert abs(got["trim_curvature"] / truth.trim_curvature - 1) <= 0.5, got
    assert found["rms_after"] < 0.5 * found["rms_before"], found
    kwargs = json.loads((out / "env_kwargs.json").read_text())["randomization"]
    lo, hi = kwargs["speed_lag"]
    assert lo < truth.speed_time_constant < hi and kwargs["action_latency_steps"] == 1, kwargs
