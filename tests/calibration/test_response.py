"""The training sim fitted to a robot's probe response (robot_rl.calibration.response): a sim arm with hidden
stiffness and delay plays the robot; the fit finds them, and calibrate's env kwargs take them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_rl.calibration.response import PROBE, fit_response, probe_response, read_response


def _sim(stiffness: float, delay: int):
    from robot_rl.envs.make import EnvConfig, make_env

    return make_env(EnvConfig(id="robot_rl/PickCube-v0", kwargs={"randomization": {
        "stiffness_scale": [stiffness, stiffness], "action_latency_steps": delay, "joint_friction": [0.3, 0.3]}}))


@pytest.mark.timeout(120)
def test_the_fit_finds_a_hidden_stiffness_and_delay() -> None:
    env = _sim(3.0, 1)
    try:
        robot = probe_response(env, repeats=2)
    finally:
        env.close()
    assert 0.05 < robot[7, 0] < 0.07 and robot[7, 2] > -0.005  # pushed 3 x 2 cm along x, held; then down
    assert robot[-1, 2] < -0.05
    assert np.linalg.norm(robot[0]) < 1e-3  # one step of delay: nothing moved after the first action
    got = fit_response(robot, base_kwargs={"randomization": {"joint_friction": [0.3, 0.3]}}, max_latency_steps=2)
    assert got["action_latency_steps"] == 1 and 2.3 < got["stiffness_scale"] < 3.9, got
    assert got["rms_mm"] < 1.0 and len(got["candidates"]) == 3 * 19
    worst = max(c["rms_mm"] for c in got["candidates"])
    assert worst > 10 * max(got["rms_mm"], 0.1)  # the grid tells stiff from soft, delayed from not


def test_a_response_of_another_probe_or_shape_is_refused(tmp_path) -> None:
    path = tmp_path / "response.json"
    path.write_text(json.dumps({"probe": PROBE[:4].tolist(), "path_m": np.zeros((4, 3)).tolist()}))
    with pytest.raises(ValueError, match="another probe"):
        read_response(path)
    with pytest.raises(ValueError, match="shape"):
        fit_response(np.zeros((4, 3)))
    path.write_text(json.dumps({"probe": PROBE.tolist(), "path_m": np.zeros((len(PROBE), 3)).tolist(),
                                "control_period_s": 0.1}))
    assert read_response(path).shape == (len(PROBE), 3)
    with pytest.raises(ValueError, match="10.0 Hz"):
        read_response(path, control_hz=20.0)


def test_env_kwargs_take_the_response_fit() -> None:
    from robot_rl.calibration.fit import Calibration
    from robot_rl.calibration.replay import Dynamics
    from robot_rl.calibration.report import env_kwargs

    cal = Calibration(dynamics=Dynamics(command_latency=0.015, bandwidth_scale=0.5, coulomb_friction=0.3,
                                        viscous_friction=0.2), state_latency=0.01, joint_noise=1e-4,
                      gripper_speed=0.05, sim_gripper_speed=0.2, rms_before=0.01, rms_after=0.001, window=40.0,
                      evaluations=10, seconds=1.0)
    joint_only = env_kwargs(cal)["randomization"]
    probed = env_kwargs(cal, response={"stiffness_scale": 4.0, "action_latency_steps": 1})["randomization"]
    assert probed["stiffness_scale"] == [2.8, 5.2] and probed["action_latency_steps"] == 1
    assert probed["action_latency_jitter"] == 0
    assert probed["joint_friction"] == joint_only["joint_friction"]  # the rest is the joint fit's
    assert joint_only["stiffness_scale"][1] < 1.0  # without a probe: the joint loop's estimate
    assert env_kwargs(cal)["ee_velocity"] == "step"  # the robot's EE velocity reads as the step's mean
    # a gripper slower than the policy trained with fails grasps, a faster one does not: the range reaches further down
    assert joint_only["gripper_speed"] == [0.0275, 0.065]
    assert env_kwargs(cal, width=0.0)["randomization"]["gripper_speed"] == [0.05, 0.05]


def test_calibrate_refuses_a_width_that_would_reach_a_gripper_speed_of_zero() -> None:
    """A gripper speed of 0 draws the sim's own, fastest gripper: the range's slowest end stays above it."""
    from robot_rl.calibration.job import CalibrateConfig

    CalibrateConfig(bag="bag", randomization_width=0.6).validate()
    with pytest.raises(ValueError, match=r"randomization_width must be in \[0, 0.6\]"):
        CalibrateConfig(bag="bag", randomization_width=0.7).validate()


def test_a_delay_becomes_whole_steps_and_a_step_of_jitter_between_them() -> None:
    """The commands' delay becomes the training sim's whole control steps, one more step of jitter when it falls
    more than a fifth of a step past them."""
    from robot_rl.calibration.report import whole_steps

    assert whole_steps(0.064, 20.0) == (1, 1)
    assert whole_steps(0.105, 20.0) == (2, 0)
    assert whole_steps(0.0, 20.0) == (0, 0)


def test_the_images_lag_becomes_the_nearest_whole_steps_always_the_same() -> None:
    """The images' lag behind the state: the camera's latency less the state's, the nearest whole control steps."""
    from robot_rl.calibration.report import frame_lag_steps

    assert frame_lag_steps(0.130, 0.035, 20.0) == 2  # 1.9 steps: the nearest, not the floor
    assert frame_lag_steps(0.075, 0.011, 20.0) == 1  # the typical robot's frames beside its state: 1.3 steps
    assert frame_lag_steps(0.130, 0.010, 20.0) == 2  # 2.4 steps
    assert frame_lag_steps(0.005, 0.010, 20.0) == 0  # a state later than the frames: no lag
