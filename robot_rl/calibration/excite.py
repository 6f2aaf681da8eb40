"""An excitation of the arm for calibration, and ``robot-rl record-excitation``: the arm's joints are moved
around where they are by a sum of sines (several frequencies per joint, none shared between joints), with holds
between bursts, the gripper closed and opened, through the profile's joint position controller, while the commands
and joint states are recorded into a rosbag2 bag (what ``robot-rl calibrate`` reads). Then, with cameras in the
profile, the arm is moved to a few poses around where it started and held at each while the cameras' frames are
recorded (the camera fit, :mod:`robot_rl.calibration.camera`, renders the arm as held there)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.robots.profile import ArmProfile, load_profile
from robot_rl.utils.log import get_logger

logger = get_logger(__name__)


@dataclass
class ExcitationConfig:
    """``robot-rl record-excitation``: how the arm is moved and where the log goes."""

    profile: str = "ros2_control_joint_position"
    """Robot profile (bundled name or YAML path); it must command joint positions."""
    out: str = "calibration_log"
    """Folder the bag is recorded into (one bag: ``episode_000000``); must not exist yet."""
    seconds: float = 60.0
    """How long the arm is moved (a few minutes of log calibrate best; 20 s suffice for a rough fit)."""
    amplitude: float = 0.12
    """rad: each joint's largest excursion from where it starts."""
    rate_hz: float = 100.0
    """Commands per second."""
    burst: float = 6.0
    """s of motion between holds."""
    hold: float = 1.5
    """s each hold lasts (the arm settles against friction; the joint noise is measured there)."""
    gripper_every: float = 4.0
    """s between gripper commands (close, open, ...); 0: the gripper is not moved."""
    camera_poses: int = 12
    """Poses the arm is held at after the bursts while the profile's cameras are recorded (0: no images): the
    arm seen from the camera in several poses tells the camera's position from its rotation and lens."""
    camera_amplitude: float = 0.25
    """rad: each joint's largest offset from where it started at the camera poses (the arm seen across more of the
    image and at more depths tells the camera's position from its rotation and focal length)."""
    camera_frames: int = 1
    """Frames of each camera recorded per pose, once the arm has settled (the camera fit takes one per pose: twelve
    poses put the ``typical`` fixed camera's offset within 5 %, six left it 3-19 % off along its axis)."""
    connect_timeout: float = 20.0
    """s to wait for the driver's joint states and command subscriptions."""

    def validate(self) -> None:
        if (min(self.seconds, self.amplitude, self.rate_hz, self.burst, self.connect_timeout) <= 0 or self.hold < 0
                or min(self.camera_poses, self.camera_frames) < 0):
            raise ValueError("record-excitation: seconds, amplitude, rate_hz, burst and connect_timeout must be > 0, "
                             "hold, camera_poses and camera_frames >= 0")
        if max(self.amplitude, self.camera_amplitude) > 0.3:
            raise ValueError("record-excitation: amplitude or camera_amplitude > 0.3 rad moves the arm too far for a "
                             "calibration")
        if Path(self.out).exists():
            raise ValueError(f"record-excitation: {self.out} exists (choose a new folder)")


FREQUENCIES = np.array([[0.23, 0.91, 1.77], [0.31, 1.07, 2.03], [0.37, 1.19, 1.61], [0.43, 0.83, 2.29],
                        [0.53, 1.31, 1.93], [0.59, 1.43, 2.17], [0.67, 0.97, 2.41]])
"""Hz per joint (rows): no frequency shared, so each joint's response is told apart. (Steps were tried: the joints
then stop within friction's dead band at positions no replay pins down, and the fit gets worse.)"""


def excitation(t: float, q0: np.ndarray, cfg: ExcitationConfig) -> np.ndarray:
    """The commanded joint positions at ``t`` s: ``q0`` plus the bursts' sum of sines (faded in and out over
    0.5 s, so every burst starts and ends at ``q0`` at rest), ``q0`` during the holds."""
    period = cfg.burst + cfg.hold
    s = t % period
    if s >= cfg.burst:
        return q0.copy()
    fade = min(1.0, s / 0.5, (cfg.burst - s) / 0.5)
    wave = np.sin(2 * np.pi * FREQUENCIES[: len(q0)] * s).mean(axis=1)
    return q0 + cfg.amplitude * fade * fade * wave


def camera_poses(q0: np.ndarray, cfg: ExcitationConfig) -> list[np.ndarray]:
    """The poses the cameras see the arm held at: ``q0`` plus a fixed draw within ``camera_amplitude``."""
    rng = np.random.default_rng(7)
    return [q0 + cfg.camera_amplitude * rng.uniform(-1.0, 1.0, len(q0)) for _ in range(cfg.camera_poses)]


class _FrameGate:
    """Lets ``frames`` frames of each camera through once it is opened (the arm settled at a pose)."""

    def __init__(self, topics: list[str], frames: int) -> None:
        self.frames, self.left = frames, dict.fromkeys(topics, 0)

    def open(self) -> None:
        self.left = dict.fromkeys(self.left, self.frames)

    def gate(self, topic: str) -> Callable[[], bool]:
        def let_through() -> bool:
            if self.left[topic] <= 0:
                return False
            self.left[topic] -= 1
            return True
        return let_through


def record_excitation(cfg: ExcitationConfig) -> dict:
    """Moves the arm by :func:`excitation` through the profile's driver and records its traffic (see the module
    docstring). Returns a summary (bag folder, seconds, messages)."""
    from sensor_msgs.msg import Image, JointState  # optional: ros2
    from std_msgs.msg import Float64MultiArray  # optional: ros2

    from robot_rl.ros.bag import BagRecorder  # optional: ros2 (imports rclpy)
    from robot_rl.ros.link import RosLink  # optional: ros2

    cfg.validate()
    profile: ArmProfile = load_profile(cfg.profile, "arm")
    if profile.command.interface != "joint_position":
        raise ValueError(f"record-excitation: profile {profile.name} commands {profile.command.interface}; use a "
                         "joint_position profile of the same arm (its forward position controller)")
    names = list(profile.joint_states.names)
    topics = {profile.joint_states.topic: JointState, profile.command.topic: Float64MultiArray}
    forward_gripper = profile.gripper.interface == "forward" and cfg.gripper_every > 0
    if forward_gripper:
        topics[profile.gripper.command] = Float64MultiArray
    cameras = [c.topic for c in profile.cameras] if cfg.camera_poses else []
    if any(c.compressed for c in profile.cameras) and cameras:
        raise ValueError("record-excitation: the camera fit needs raw images (compressed: false in the profile)")
    frames = _FrameGate(cameras, cfg.camera_frames)
    topics.update(dict.fromkeys(cameras, Image))
    link = RosLink("record_excitation")
    latest: list[np.ndarray] = []

    def on_state(msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        if all(n in index for n in names):
            latest[:] = [np.array([msg.position[index[n]] for n in names])]
    try:
        node = link.node
        node.create_subscription(JointState, profile.joint_states.topic, on_state, 10)
        arm = node.create_publisher(Float64MultiArray, profile.command.topic, 10)
        grip = node.create_publisher(Float64MultiArray, profile.gripper.command, 10) if forward_gripper else None
        deadline = time.monotonic() + cfg.connect_timeout
        while not latest or arm.get_subscription_count() == 0 or (grip and grip.get_subscription_count() == 0):
            if time.monotonic() > deadline:
                raise RuntimeError(f"record-excitation: no joint states on {profile.joint_states.topic} or nobody "
                                   f"subscribes to {profile.command.topic} after {cfg.connect_timeout:.0f} s "
                                   "(is the driver running, its controller active?)")
            time.sleep(0.05)
        q0 = latest[0].copy()
        recorder = BagRecorder(node, topics, cfg.out, gates={c: frames.gate(c) for c in cameras})
        recorder.start_episode()
        time.sleep(0.5)  # the arm at rest before the first command
        start = time.monotonic()
        period = 1.0 / cfg.rate_hz
        k, closed, last_grip = 0, False, -np.inf
        while (t := time.monotonic() - start) < cfg.seconds:
            arm.publish(Float64MultiArray(data=[float(v) for v in excitation(t, q0, cfg)]))
            if grip is not None and t - last_grip >= cfg.gripper_every:
                closed, last_grip = not closed, t
                half = 0.0 if closed else 0.04  # each finger's position (m)
                grip.publish(Float64MultiArray(data=[half, half]))
            k += 1
            time.sleep(max(0.0, start + k * period - time.monotonic()))
        arm.publish(Float64MultiArray(data=[float(v) for v in q0]))
        time.sleep(0.5)
        if cameras:
            _hold_for_cameras(arm, q0, camera_poses(q0, cfg), frames, period)
        recorder.end_episode(excitation=True)
        recorder.close()
        logger.info(f"excitation recorded: {k} commands over {cfg.seconds:.0f} s -> {cfg.out}")
        return {"bag": str(Path(cfg.out) / "episode_000000"), "seconds": cfg.seconds, "commands": k,
                "camera_poses": cfg.camera_poses if cameras else 0}
    finally:
        link.close()


def _hold_for_cameras(arm: object, q0: np.ndarray, poses: list[np.ndarray], frames: _FrameGate, period: float,
                      move: float = 1.5, settle: float = 1.0, record: float = 0.5) -> None:
    """Moves the arm smoothly from pose to pose (and back to ``q0``), opening the cameras' gate once it has settled
    at each."""
    from std_msgs.msg import Float64MultiArray  # optional: ros2

    here = q0
    for there in [*poses, q0]:
        start = time.monotonic()
        while (t := time.monotonic() - start) < move:
            s = 0.5 - 0.5 * np.cos(np.pi * t / move)  # at rest at both ends
            arm.publish(Float64MultiArray(data=[float(v) for v in here + s * (there - here)]))
            time.sleep(period)
        arm.publish(Float64MultiArray(data=[float(v) for v in there]))
        time.sleep(settle)
        if there is not q0:
            frames.open()
            time.sleep(record)
        here = there
