"""Config of the ROS 2 robot env (:class:`robot_rl.envs.ros_env.RosArmEnv`): its env kwargs in a run config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from robot_rl.cameras.config import RigConfig
from robot_rl.safety.limits import ArmLimits

HOME_POS = (0.5295, 0.0, 0.2793)
"""Home TCP position of the sim arm (m, base frame), where ``reset`` brings the arm."""
FINGER_JOINTS = ("finger_left", "finger_right")


@dataclass
class RosArmEnvConfig:
    """Config of :class:`RosArmEnv` (env kwargs in a run config)."""

    namespace: str = ""
    """ROS 2 namespace of the robot's topics (e.g. "/arm"); topic names below are relative to it."""
    profile: str = ""
    """Robot profile (a bundled name such as ``ur5e_servo``, or a YAML path; :mod:`robot_rl.robots.profile`): the
    state comes from the driver's joint states, TF and sensor topics, commands go through the safety node to the
    driver's interface; limits, home, cameras and success come from the profile. "" = robot_rl's own hardware
    topics (``ee_pose``, ``ee_twist``, ``object_pose``, ``success``)."""
    profile_overrides: dict[str, Any] = field(default_factory=dict)
    """Fields of the profile replaced for this run, nested like the profile's YAML (e.g.
    ``{success: {source: topic, topic: sim/success}}`` against the rehearsal hardware)."""
    control_hz: float = 20.0
    """Rate of env.step (the policy's command rate)."""
    max_episode_steps: int = 100
    """Time limit in control steps (truncation)."""
    limits: ArmLimits = field(default_factory=ArmLimits)
    """First-layer limits (the safety node gets the same values); ``limits.max_step`` scales the action."""
    home_pos: tuple[float, float, float] = HOME_POS
    """EE position ``reset`` moves to (m)."""
    include_wrench: bool = False
    """Append the wrist wrench (6) to the state."""
    object_state: bool = True
    """Append the object position (3, from ``object_pose``: sim-privileged) to the state."""
    ee_velocity: str = "instant"
    """The state's EE linear velocity, as the policy was trained with it (the sim task's ``ee_velocity``):
    ``instant``, the driver's twist (``ee_twist``) or, with a profile, the joint velocities through the URDF's
    Jacobian; ``step``, the EE's displacement since the previous observation divided by the time between their
    stamps (0 on a reset's first observation), what a sim trained with ``ee_velocity: step`` (``robot-rl
    calibrate`` writes it) shows. Check a policy through the rehearsal with both: ``step`` is closer to that sim's
    reading, yet its policies transferred worse with it than with ``instant``."""
    image_size: int = 0
    """Side of the camera images (0 = no pixels); must match the camera topics."""
    cameras: tuple[str, ...] = ()
    """Cameras subscribed as camera/<name>/image_raw into obs['pixels']."""
    rig: RigConfig | None = None
    """Cameras read through :mod:`robot_rl.cameras` instead (RealSense / OpenCV on this PC, or any ROS 2 image
    topic, with crop/resize per camera); replaces ``image_size``/``cameras``. Started on the first reset."""
    success_source: str = "topic"
    """"topic" (std_msgs/Bool on ``success``), "key" (Enter on stdin) or "none"."""
    terminate_on_success: bool = True
    """End the episode when the task succeeds."""
    reset_service: str = "arm_hardware/reset"
    """std_srvs/Trigger called at the end of reset ("" = none; the sim hardware re-places its objects)."""
    settle_tolerance: float = 0.002
    """Reset is done when the EE is this close to home (m) ...  (a policy trained on sim resets, which start
    exactly at home and at rest, is sensitive to the start: at 1 cm / 2 cm/s a PickCube policy lost 1-3 of 40)"""
    settle_speed: float = 0.005
    """... and slower than this (m/s)."""
    settle_gripper: float = 0.002
    """... and the gripper (when the robot reports one) open to within this of the commanded opening (m), or
    stopped short of it for ``gripper_stall`` s. A sim episode starts with the gripper open: a slow real gripper
    (0.02-0.1 m/s) still closing on the last episode's cube would start the next one half closed."""
    gripper_stall: float = 0.5
    """Seconds without gripper motion (under ``settle_gripper``) that also count as settled: a gripper that
    stops short of the commanded opening (a blocked finger, a different stroke) does not stall every reset."""
    reset_timeout: float = 15.0
    """Longest reset (s) before an error."""
    estop_wait: float = 600.0
    """How long (s) a reset waits for a latched e-stop to be reset (the safety node's ``~/reset_estop``) before an
    error; steps while it is latched are held periods (nothing recorded, not steps of the episode)."""
    sync_slack: float = 0.0
    """Every other topic must have a message stamped no earlier than the reference's stamp minus this (s) before
    an observation is taken (0: the same instant, as the sim hardware stamps all topics of a physics step alike;
    raise it for a robot whose drivers publish at different rates)."""
    obs_timeout: float = 3.0
    """Longest wait (s) for fresh observations after a period before an error; meanwhile the safety node's watchdog
    holds the arm. A pause of the state stream up to this long is ridden out (an observation is never built from
    messages an earlier one used)."""
    require_safety: bool = True
    """The first reset waits for the safety node's ``safety_state`` (no commands before the safety layer is up)."""
    connect_timeout: float = 30.0
    """Longest wait (s) on the first reset for every subscribed topic and camera to deliver a message."""
    record_dir: str = ""
    """Record every episode as a rosbag2 bag (MCAP) under this folder: the policy's command, the safety node's
    output and state, joint states, EE pose and twist, object pose, success, diagnostics and the cameras
    (``ros2 bag play`` / Foxglove open them; ``robot-rl datasets import --format rosbag`` turns them into demos).
    Empty = no recording."""
    use_sim_time: bool = False
    """Take time from the simulation's ``/clock`` (the sim hardware started with ``use_sim_time``): the control
    period, command stamps and freshness checks count physics time, also when the sim runs slower than real time.
    Off for a real robot (wall clock)."""
    record_images: str = "raw"
    """Camera topics in the bags: ``raw`` (sensor_msgs/Image as published), ``compressed`` (JPEG
    sensor_msgs/CompressedImage on ``<topic>/compressed``, about 10x smaller) or ``none``."""

    def validate(self) -> None:
        self.limits.validate()
        if self.control_hz <= 0 or self.max_episode_steps <= 0:
            raise ValueError("control_hz and max_episode_steps must be > 0")
        if self.ee_velocity not in ("instant", "step"):
            raise ValueError(f"ee_velocity must be 'instant' or 'step', got {self.ee_velocity!r}")
        if self.sync_slack < 0 or self.obs_timeout <= 0:
            raise ValueError("sync_slack must be >= 0 and obs_timeout > 0")
        if self.success_source not in ("topic", "key", "none"):
            raise ValueError("success_source must be topic, key or none")
        if self.image_size < 0 or (self.image_size > 0 and not self.cameras):
            raise ValueError("image_size > 0 needs cameras")
        if self.rig is not None and self.use_sim_time:
            raise ValueError("use_sim_time is for simulated hardware; rig cameras are stamped on this host's clock")
        if self.rig is not None and (self.image_size or self.cameras):
            raise ValueError("rig replaces image_size/cameras: set one or the other")
        if self.record_images not in ("raw", "compressed", "none"):
            raise ValueError("record_images must be raw, compressed or none")
        if self.profile_overrides and not self.profile:
            raise ValueError("profile_overrides needs a profile")
        if self.profile and self.record_dir:
            raise ValueError("record_dir: bag recording records robot_rl's own hardware topics; with a profile, record "
                             "the driver's topics with ros2 bag record")
