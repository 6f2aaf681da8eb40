"""An excitation of a car for calibration, and ``robot-rl record-car-excitation``: the car laps its track under pure
pursuit on its map pose through the robot env and the safety node, its speed switched between full and 40 % every
1.5 s and its yaw rate kicked left and right for 0.4 s every 2 s, while the driver's commands and odometry are
recorded into a rosbag2 bag (what ``robot-rl calibrate-car`` reads). A person driving laps with a gamepad under
``ros2 bag record`` of the same two topics makes a log as good."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.robots.profile import load_profile
from robot_rl.robots.track import pure_pursuit
from robot_rl.utils.log import get_logger

logger = get_logger(__name__)


@dataclass
class CarExcitationConfig:
    """``robot-rl record-car-excitation``: how the car is driven and where the log goes."""

    profile: str = "rehearsal/diff_drive"
    """Car profile (bundled name or YAML path) naming the driver's topics."""
    out: str = "car_calibration_log"
    """Folder the bag is recorded into (one bag: ``episode_000000``); must not exist yet."""
    seconds: float = 60.0
    """How long the car is driven."""
    cruise: float = 1.2
    """m/s pure pursuit drives at on the straights (slower in the corners)."""
    reset_service: str = "car_hardware/reset"
    """``std_srvs/Trigger`` that puts the car at a start pose ("" = a person places it, asked on the terminal)."""
    connect_timeout: float = 60.0
    """s to wait for the car's odometry, TF and scan."""

    def validate(self) -> None:
        if min(self.seconds, self.connect_timeout, self.cruise) <= 0:
            raise ValueError("record-car-excitation: seconds, connect_timeout and cruise must be > 0")
        if Path(self.out).exists():
            raise ValueError(f"record-car-excitation: {self.out} exists; give a new folder")


def excitation_action(t: float, pursuit: np.ndarray) -> np.ndarray:
    """Pure pursuit's action modulated: the speed at full or 40 % (1.5 s each), the yaw rate kicked by ±0.25 of its
    range for 0.4 s every 2 s, alternating sides."""
    action = np.array(pursuit, np.float32)
    action[0] *= 1.0 if int(t / 1.5) % 2 == 0 else 0.4
    k = int(t / 2.0)
    if t - 2.0 * k < 0.4:
        action[1] += 0.25 if k % 2 == 0 else -0.25
    return np.clip(action, -1.0, 1.0)


def record_car_excitation(cfg: CarExcitationConfig) -> dict:
    """Drives the car by :func:`excitation_action` and records its driver's traffic (see the module docstring)."""
    from nav_msgs.msg import Odometry  # optional: ros2

    from robot_rl.envs.ros_car_env import RosCarEnv  # optional: ros2 (imports rclpy)
    from robot_rl.ros.bag import BagRecorder  # optional: ros2
    from robot_rl.ros.link import RosLink  # optional: ros2

    cfg.validate()
    profile = load_profile(cfg.profile, "car")
    if profile.command.interface == "diff_drive":
        from geometry_msgs.msg import TwistStamped as Command  # optional: ros2
    else:
        from ackermann_msgs.msg import AckermannDriveStamped as Command  # optional: ros2 (built messages)
    env = RosCarEnv(profile=cfg.profile, reset_service=cfg.reset_service, connect_timeout=cfg.connect_timeout,
                    max_episode_steps=10**9)
    link = RosLink("record_car_excitation")
    steps = 0
    try:
        env.reset()
        recorder = BagRecorder(link.node, {profile.command.topic: Command, profile.odom.topic: Odometry}, cfg.out)
        recorder.start_episode()
        # the car stands still until the recorder hears the driver's commands: its subscription to the safety
        # node's publisher can take seconds to match on a loaded machine, and a log whose first seconds of driving
        # lack their commands replays a car that moved by itself
        deadline = time.monotonic() + cfg.connect_timeout
        while not all(recorder.heard(t) for t in (profile.command.topic, profile.odom.topic)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"record-car-excitation: no commands on {profile.command.topic} or no odometry on "
                                   f"{profile.odom.topic} reached the recorder within {cfg.connect_timeout:.0f} s")
            env.step(np.zeros(2, np.float32))
        lim = profile.limits
        start = time.monotonic()
        while (t := time.monotonic() - start) < cfg.seconds:
            xy, yaw = env.pose()
            pursuit = pure_pursuit(env.track, xy, yaw, env.track.project(xy)[0], lim.max_speed, lim.max_yaw_rate,
                                   cruise=cfg.cruise)
            env.step(excitation_action(t, pursuit))
            steps += 1
        env.step(np.zeros(2, np.float32))
        time.sleep(0.5)
        recorder.end_episode(excitation=True)
        recorder.close()
    finally:
        link.close()
        env.close()
    logger.info(f"car excitation recorded: {steps} steps over {cfg.seconds:.0f} s -> {cfg.out}")
    return {"bag": str(Path(cfg.out) / "episode_000000"), "seconds": cfg.seconds, "steps": steps}
