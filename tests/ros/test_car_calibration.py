"""Car calibration recovers the car from its log: the emulated car runs the bundled ``typical`` car reality (hidden
from calibration) behind the ``diff_drive`` profile, in its own process beside the car safety node;
``record_car_excitation`` drives it around the track and records a bag over ROS 2; ``robot-rl calibrate-car`` reads
only the bag and must find each of the car's values (latencies within a control period, the odometry gain, the lags,
the trim and the floor grip within 15 %), and a sim that follows the car more closely than the nominal one."""

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
                           "--fit.iterations", "20"], capture_output=True, text=True, timeout=360)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((out / "calibration.json").read_text())
    got, truth = found["reality"], load_car_reality("typical")
    print(got, found["error_before"], found["error_after"])
    assert abs(got["command_latency"] - truth.command_latency) < 0.025, got  # DDS and the driver's step add a few ms
    assert abs(got["odom_latency"] - truth.odom_latency) < 0.01, got
    for key in ("speed_time_constant", "yaw_rate_time_constant", "trim_curvature", "floor_friction",
                "odometry_speed_scale_error"):
        assert abs(got[key] / getattr(truth, key) - 1) <= 0.15, (key, got)
    assert found["error_after"] < 0.5 * found["error_before"], found
    kwargs = json.loads((out / "env_kwargs.json").read_text())["randomization"]
    lo, hi = kwargs["speed_lag"]
    assert lo < truth.speed_time_constant < hi, kwargs
    # the car's 70 ms are 1.4 control steps at 20 Hz: the fit's latencies in whole steps, 1 or 2 as a few ms of DDS
    # and the driver's step fall on either side of 1.5
    steps = round((got["command_latency"] + got["odom_latency"]) * 20)
    assert kwargs["action_latency_steps"] == steps in (1, 2), (kwargs, got)
