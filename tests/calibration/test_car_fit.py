"""The car fit alone, on a log made in the sim car driven through known lags, latency, trim, grip and odometry gain
(the same law the emulated car applies): the replay errs least at the true drivetrain, the fit finds it, the odometry's
latency and gain are read off the log, and the env kwargs randomize around the fit."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from robot_rl.calibration.car_excite import excitation_action
from robot_rl.calibration.car_fit import CarFitConfig, CarReplay, Drivetrain, fit_car
from robot_rl.calibration.car_log import CarLog
from robot_rl.robots.track import pure_pursuit
from robot_rl_controllers.driving import twist_to_wheel_speeds
from robot_rl_sim.car import DriveEnv
from robot_rl_sim.car_model import set_floor_grip
from robot_rl_sim.car_reality import DrivetrainLags

TRUE = Drivetrain(command_latency=0.05, speed_time_constant=0.15, yaw_rate_time_constant=0.2, trim_curvature=0.12,
                  floor_friction=0.74)


def sim_log(dt_: Drivetrain, odom_latency: float, gain_error: float, seconds: float) -> CarLog:
    """Commands at 20 Hz (the excitation on pure pursuit), odometry at 50 Hz, times from 1000 s."""
    env = DriveEnv(image_size=0)
    env.reset(seed=0)
    m, d = env.model, env.data
    set_floor_grip(m, dt_.floor_friction)
    dt = m.opt.timestep
    lags = DrivetrainLags(dt_.speed_time_constant, dt_.yaw_rate_time_constant, dt_.trim_curvature, dt)
    command_t, commands, pending, rows, target = [], [], [], [], (0.0, 0.0)
    for k in range(int(seconds / dt)):
        t = 1000.0 + k * dt
        if k % 10 == 0:
            xy, yaw = env.car_pose()
            a = excitation_action(k * dt, pure_pursuit(env.track, xy, yaw, env.track.project(xy)[0],
                                                       env.cfg.max_speed, env.cfg.max_yaw_rate, cruise=1.2))
            vw = (float(a[0]) * env.cfg.max_speed, float(a[1]) * env.cfg.max_yaw_rate)
            command_t.append(t)
            commands.append(vw)
            pending.append((t + dt_.command_latency, vw))
        while pending and pending[0][0] <= t:
            target = pending.pop(0)[1]
        left, right = twist_to_wheel_speeds(*lags.step(*target), env.drive)
        d.ctrl[env.wheel_ctrl[0]], d.ctrl[env.wheel_ctrl[1]] = float(left), float(right)
        mujoco.mj_step(m, d)
        if k % 4 == 3:
            xy, yaw = env.car_pose()
            q = d.qvel[env.car_v]
            fwd = math.cos(yaw) * q[0] + math.sin(yaw) * q[1]
            rows.append((t + dt, t + dt + odom_latency, xy[0], xy[1], yaw, fwd * (1 + gain_error),
                         q[5] * (1 + gain_error)))
    env.close()
    a = np.array(rows)
    pose = a[:, 2:5].copy()
    pose[:, 2] = np.unwrap(pose[:, 2])
    return CarLog(np.array(command_t), np.array(commands), a[:, 0], a[:, 1], pose, a[:, 5:7].copy())


@pytest.mark.timeout(240)
def test_the_car_fit_finds_the_drivetrain_that_made_the_log() -> None:
    log = sim_log(TRUE, odom_latency=0.03, gain_error=0.1, seconds=24.0)
    replay = CarReplay()
    assert replay.error(log, TRUE, 0.1) < 0.5 * replay.error(log, Drivetrain(), 0.1)
    cal = fit_car(log, CarFitConfig(fit_seconds=24.0, iterations=15), replay)
    got = cal.drivetrain
    assert cal.odom_latency == pytest.approx(0.03, abs=1e-6)
    assert cal.odometry_speed_scale_error == pytest.approx(0.1, abs=0.01)
    assert abs(got.command_latency - TRUE.command_latency) < 0.01, got
    for key in ("speed_time_constant", "yaw_rate_time_constant", "trim_curvature", "floor_friction"):
        assert getattr(got, key) == pytest.approx(getattr(TRUE, key), rel=0.15), (key, got)
    kwargs = cal.env_kwargs(control_hz=20.0, width=0.3)["randomization"]
    assert kwargs["action_latency_steps"] == 2  # 50 + 30 ms: 1.6 steps at 20 Hz
    lo, hi = kwargs["speed_lag"]
    assert lo < TRUE.speed_time_constant < hi


def test_the_grip_is_read_at_the_knee_of_a_noisy_scan() -> None:
    """A scan like a ROS log's: the log error rising 2.8 per unit of grip below the car's 0.74 and 0.1 above it,
    with 3 % of chaos on every point; the knee is read within 0.03 whatever the noise, from every point of the
    scan."""
    from robot_rl.calibration.car_fit import GRIP, grip_knee

    grips = np.linspace(*GRIP, 25)
    for seed in range(10):
        noise = np.random.default_rng(seed).normal(0.0, 0.03, grips.size)
        errors = 0.013 * np.exp(2.8 * np.maximum(0.0, 0.74 - grips) + 0.1 * np.maximum(0.0, grips - 0.74) + noise)
        assert abs(grip_knee(grips, errors) - 0.74) < 0.03, seed
