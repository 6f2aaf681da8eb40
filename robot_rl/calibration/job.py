"""``robot-rl calibrate``: a robot log in, a calibrated sim out (:mod:`robot_rl.calibration.report`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_rl.calibration.camera import CameraCalibration, CameraFitConfig, fit_camera, held_frames
from robot_rl.calibration.fit import FitConfig, fit
from robot_rl.calibration.log import DriverLog, read_bag, read_images
from robot_rl.calibration.replay import ArmReplay
from robot_rl.calibration.report import GRIPPER_SLOW_REACH, env_kwargs, write_report
from robot_rl.calibration.response import fit_response, read_response
from robot_rl.robots.profile import load_profile


@dataclass
class CalibrateConfig:
    """``robot-rl calibrate``: what is read, fitted and written."""

    bag: str = ""
    """The robot's rosbag2 bag (a folder): joint position commands and joint states on the profile's topics, the
    arm excited and held (``robot-rl record-excitation`` records one)."""
    profile: str = "ros2_control_joint_position"
    """Robot profile (bundled name or YAML path) naming the bag's topics and joints; it commands joint positions."""
    out: str = "calibration"
    """Folder for reality.yaml, env_kwargs.json, calibration.json, report.md and joints.png."""
    task: str = "PickCube"
    """The sim arm task whose scene the log is replayed in (the arm is the same in every task)."""
    control_hz: float = 20.0
    """The training env's control rate (turns the fitted latency into control steps of delay)."""
    response: str = ""
    """A probe response of the robot (``robot-rl record-response`` writes one): the training sim's stiffness and
    steps of delay are fitted to move its end effector as the robot's moved under the same actions ("" = they are
    estimated from the joint fit, less closely)."""
    randomization_width: float = 0.3
    """Domain randomization ranges in env_kwargs.json: the fit times 1 ± this (a gripper slower than the sim's:
    ``GRIPPER_SLOW_REACH`` (1.5) x this below its fit, this above). At most 0.6, which keeps the gripper's slowest
    speed above zero."""
    fit: FitConfig = field(default_factory=FitConfig)
    """How the dynamics are fitted."""
    camera: CameraFitConfig = field(default_factory=CameraFitConfig)
    """How each camera's pose, lens and colour are fitted (the profile's cameras whose frames the bag holds)."""

    def validate(self) -> None:
        if not self.bag:
            raise ValueError("calibrate: --bag: the robot's bag (record one with robot-rl record-excitation)")
        if self.response and not Path(self.response).is_file():
            raise ValueError(f"calibrate: --response {self.response}: no such file (robot-rl record-response "
                             "writes one)")
        if not 0 <= self.randomization_width <= 0.6 or self.control_hz <= 0:
            raise ValueError("calibrate: randomization_width must be in [0, 0.6] (the gripper's range reaches "
                             f"{GRIPPER_SLOW_REACH} x below its fit), control_hz > 0")
        self.fit.validate()
        self.camera.validate()


def calibrate(cfg: CalibrateConfig) -> dict:
    """Reads the bag, fits, writes the report; returns the figures."""
    profile = load_profile(cfg.profile, "arm")
    log = read_bag(cfg.bag, profile)
    replay = ArmReplay(cfg.task)
    result = fit(log, cfg.fit, replay, efforts=profile.joint_states.effort == "motor_torque")
    cameras = [got for cam in profile.cameras if (got := fit_logged_camera(cfg, log, cam.name, cam.topic))]
    response = None
    if cfg.response:
        center = env_kwargs(result, cfg.control_hz, width=0.0)  # the joint fit's friction and gripper, as fitted
        center["randomization"].pop("obs_noise_std", None)
        response = fit_response(read_response(cfg.response, cfg.control_hz), cfg.task, center)
    return write_report(cfg.out, result, log, cfg.bag, replay, cfg.control_hz, cfg.randomization_width, response,
                        cameras)


def fit_logged_camera(cfg: CalibrateConfig, log: DriverLog, name: str, topic: str) -> CameraCalibration | None:
    """The camera fit of the bag's frames on ``topic`` (None: the bag has none); its latency is read off every
    frame (logged - stamped)."""
    images = read_images(cfg.bag, topic)
    if not images:
        return None
    latency = float(np.median([logged - stamp for stamp, logged, _ in images]))
    frames = held_frames(images, log, cfg.camera.frames, average=cfg.camera.hold_average)
    return fit_camera(frames, name, cfg.camera, cfg.task, latency)
