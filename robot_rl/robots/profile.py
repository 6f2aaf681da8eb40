"""Robot profiles: where a ROS 2 robot's observation comes from and which standard command interface the policy
drives, by config alone (a YAML file: bundled in ``robot_rl/robots/profiles/`` or the user's own).

An arm profile names the driver's ``joint_states`` topic and arm joints, the base and tool frames (the
end-effector pose comes from TF, its twist from the joint velocities through the URDF's Jacobian), an optional
``WrenchStamped`` topic, the gripper's joints and command, cameras (ROS 2 image topics with their ``CameraInfo``),
objects whose pose a tracker publishes on TF, where success comes from, the command interface and the limits both
safety layers apply. Nothing here imports ROS: the robot env and the safety node read the same profile and each
checks it against the live graph at start (:mod:`robot_rl.ros.profile_check`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robot_rl.config import ConfigError, from_dict, to_dict
from robot_rl.robots.camera import CameraConfig
from robot_rl.robots.car_profile import CarProfile
from robot_rl.safety.limits import ArmLimits

PROFILE_DIR = Path(__file__).parent / "profiles"
ARM_INTERFACES = ("cartesian_pose", "servo_twist", "joint_position", "joint_trajectory")
"""Arm command interfaces: a Cartesian controller's target pose (``PoseStamped``), MoveIt Servo twists
(``TwistStamped``), ros2_control's forward position controller (``Float64MultiArray``) or joint trajectory controller
(``JointTrajectory``), both with IK from the URDF. (robot_rl's own impedance controller and sim hardware run
without a profile.)"""
GRIPPER_INTERFACES = ("action", "parallel_action", "forward", "none")
"""Gripper commands: a ``control_msgs/action/GripperCommand`` server (gripper_action_controller, franka_gripper), a
``control_msgs/action/ParallelGripperCommand`` server (ros2_controllers' parallel_gripper_controller: the position of
its one joint in ``command.position[0]``, ``max_effort`` in ``command.effort[0]``), a forward position controller
(``Float64MultiArray``) or none."""
JOINT_EFFORTS = ("none", "motor_torque")
"""What the ``effort`` of the driver's joint states is, for calibration: ``motor_torque`` is the torque (N m) each
joint's motor applies, the part friction takes included (a ros2_control hardware interface whose effort state is the
motor's commanded or measured torque); ``none`` for anything else: no effort, a torque measured after the gearbox (a
Franka's ``tau_J``), a motor current in A (a UR's)."""
SUCCESS_SOURCES = ("topic", "key", "teleop", "classifier", "none")
"""Where success comes from: a ``std_msgs/Bool`` topic, a key press (Enter on the terminal), the teleop device's
success button, the learned reward classifier (``env.reward``), or nowhere."""


@dataclass
class JointStateSource:
    """The driver's joint states."""

    topic: str = "/joint_states"
    """``sensor_msgs/JointState`` topic (joint_state_broadcaster's)."""
    names: tuple[str, ...] = ()
    """Arm joints, in the order the commands use (7 for a Franka, 6 for a UR)."""
    effort: str = "none"
    """What the joint states' ``effort`` is (``JOINT_EFFORTS``): with ``motor_torque``, ``robot-rl calibrate`` reads
    the joints' friction off the efforts (one physics step from each logged state), which joint positions alone
    tell apart from the latency and the joint loop's bandwidth only roughly."""


@dataclass
class WrenchSource:
    """An optional force-torque reading."""

    topic: str = ""
    """``geometry_msgs/WrenchStamped`` topic ("" = none)."""
    frame: str = ""
    """Frame the wrench is expressed in (checked against ``header.frame_id`` and the TF tree)."""
    best_effort: bool = False
    """The driver publishes it best-effort (franka_robot_state_broadcaster does); robot_rl subscribes best-effort
    to every wrench topic, which matches either way. The rehearsal hardware publishes with this reliability."""


@dataclass
class ObjectSource:
    """An object whose pose a tracker (AprilTag detector, motion capture, a perception node) publishes on TF."""

    name: str = ""
    """Name for messages and the docs."""
    frame: str = ""
    """Its TF frame; the env appends its position in the base frame to the state (``object_state``)."""


@dataclass
class GripperProfile:
    """The gripper: its state from joint positions, its command to a standard interface."""

    interface: str = "none"
    """One of :data:`GRIPPER_INTERFACES`."""
    joints: tuple[str, ...] = ()
    """Gripper joints in ``joint_states`` whose positions sum to the opening (times ``opening_scale``)."""
    joint_states_topic: str = ""
    """Topic of those joints ("" = the arm's ``joint_states.topic``; franka_gripper publishes its own)."""
    opening_scale: float = 1.0
    """Opening (m) = ``opening_scale`` * sum of the ``joints``' positions."""
    command: str = ""
    """Action name (``action``, ``parallel_action``) or ``Float64MultiArray`` topic (``forward``)."""
    command_scale: float = 1.0
    """Commanded position = ``command_scale`` * opening (m): one value for the action, one per joint for forward."""
    max_effort: float = 40.0
    """``max_effort`` of each GripperCommand goal (N; ``command.effort[0]`` of a ParallelGripperCommand goal)."""
    deadband: float = 0.004
    """A new goal only when the commanded opening moved more than this (m) from the last goal's."""
    controller: str = ""
    """ros2_control controller that must be active ("" = not checked)."""


@dataclass
class ArmCommandProfile:
    """The command interface the policy drives (through the safety node)."""

    interface: str = "joint_position"
    """One of :data:`ARM_INTERFACES`."""
    topic: str = ""
    """The driver's command topic."""
    frame: str = ""
    """Frame of Cartesian commands ("" = the profile's ``base_frame``)."""
    rate_hz: float = 100.0
    """Rate (Hz) at which the safety node streams the reference (``reference_omega`` > 0); Servo halts when
    twists stop, the other controllers hold the last command."""
    reference_omega: float = 20.0
    """rad/s: the command is a reference that follows the policy's target as a critically damped second-order
    response of this natural frequency (20: the sim impedance controller's own response), streamed at ``rate_hz``:
    a stiff driver then moves the arm smoothly, close to how the sim's controller moved it
    (docs/design/robot-profiles.md). 0 = each target is sent once, as it comes."""
    lead_time: float = 0.05
    """s: the streamed command leads the reference by its velocity times this (the driver's tracking delay plus the
    path's latency), so the arm, not just the command, follows the reference."""
    servo_gain: float = 10.0
    """servo_twist: twist = target velocity + servo_gain (1/s) * (target - measured pose)."""
    servo_command_type_service: str = ""
    """servo_twist: MoveIt Servo's ``switch_command_type`` service (``moveit_msgs/srv/ServoCommandType``), called
    with TWIST before twists are streamed ("" = not called: Servo already takes twists)."""
    max_joint_step: float = 0.15
    """Joint interfaces: largest change of a joint command from the measured position (rad)."""
    time_from_start: float = 0.02
    """joint_trajectory: time (s) the trajectory controller has to reach each command (about two periods of the
    streamed reference: the controller interpolates to it with its velocity)."""
    controller: str = ""
    """ros2_control controller that must be active ("" = not checked)."""
    controller_manager: str = "/controller_manager"
    """Namespace of the controller manager whose ``list_controllers`` service is asked."""


@dataclass
class SuccessProfile:
    """Where the env's success comes from on a robot."""

    source: str = "none"
    """One of :data:`SUCCESS_SOURCES`."""
    topic: str = ""
    """``std_msgs/Bool`` topic for ``source: topic``."""


@dataclass
class ArmProfile:
    """A robot arm (see the module docstring)."""

    name: str = ""
    """Profile name (the file name of a bundled profile)."""
    kind: str = "arm"
    """``arm`` (the only kind so far)."""
    description: str = ""
    """What robot and driver this profile is for."""
    base_frame: str = "base_link"
    """Frame the state and commands are expressed in."""
    robot_description: str = "/robot_description"
    """``std_msgs/String`` topic (transient local) of the URDF, as robot_state_publisher publishes it."""
    cameras: tuple[CameraConfig, ...] = ()
    """Cameras, read through :mod:`robot_rl.cameras` as any ROS 2 camera (``source: ros``, ``topic``: the image
    topic; crop, resize, compression as there); the ``CameraInfo`` beside each image (:func:`camera_info_topic`) is
    checked at start."""
    success: SuccessProfile = field(default_factory=SuccessProfile)
    """Where success comes from."""

    tool_frame: str = "tool0"
    """End-effector frame (TF child, URDF frame): the pose the policy observes and commands."""
    joint_states: JointStateSource = field(default_factory=JointStateSource)
    """Where joint positions and velocities come from."""
    wrench: WrenchSource = field(default_factory=WrenchSource)
    """Optional force-torque topic."""
    gripper: GripperProfile = field(default_factory=GripperProfile)
    """Gripper state and command."""
    objects: tuple[ObjectSource, ...] = ()
    """Objects tracked on TF (``object_state`` appends the first one's position)."""
    command: ArmCommandProfile = field(default_factory=ArmCommandProfile)
    """The command interface."""
    limits: ArmLimits = field(default_factory=ArmLimits)
    """Limits both safety layers apply (workspace box in ``base_frame``, speeds, force, tilt, gripper range)."""
    home_pos: tuple[float, float, float] = (0.5295, 0.0, 0.2793)
    """Tool position ``reset`` moves to (m, ``base_frame``); the orientation is ``limits.home_quat``."""

    def validate(self) -> None:
        _check_choice("command.interface", self.command.interface, ARM_INTERFACES)
        _check_choice("gripper.interface", self.gripper.interface, GRIPPER_INTERFACES)
        _check_choice("success.source", self.success.source, SUCCESS_SOURCES)
        _check_choice("joint_states.effort", self.joint_states.effort, JOINT_EFFORTS)
        self.limits.validate()
        if not self.joint_states.names:
            raise ConfigError("joint_states.names: list the arm's joints (in command order)")
        if not self.tool_frame or not self.base_frame:
            raise ConfigError("base_frame and tool_frame must be set")
        if not self.command.topic:
            raise ConfigError(f"command.topic: the {self.command.interface} interface needs the driver's topic")
        if self.gripper.interface in ("action", "parallel_action", "forward") and not self.gripper.command:
            raise ConfigError(f"gripper.command: the {self.gripper.interface} gripper needs its action or topic name")
        if self.gripper.interface != "none" and not self.gripper.joints:
            raise ConfigError("gripper.joints: name the gripper joints whose positions give the opening")
        if self.success.source == "topic" and not self.success.topic:
            raise ConfigError("success.topic: success.source 'topic' needs a std_msgs/Bool topic")
        if self.command.max_joint_step <= 0 or self.command.time_from_start <= 0 or self.command.servo_gain <= 0:
            raise ConfigError("command.max_joint_step, time_from_start and servo_gain must be > 0")
        if self.command.rate_hz < 0 or self.command.reference_omega < 0:
            raise ConfigError("command.rate_hz and command.reference_omega must be >= 0")
        if self.command.reference_omega > 0 and self.command.rate_hz <= 0:
            raise ConfigError("command.rate_hz: streaming a reference (reference_omega > 0) needs a rate")
        for i, cam in enumerate(self.cameras):
            if cam.source != "ros":
                raise ConfigError(f"cameras[{i}].source: a robot profile's cameras are ROS 2 image topics (source: "
                                  f"ros), got {cam.source!r}")


def camera_info_topic(cam: CameraConfig) -> str:
    """The ``sensor_msgs/CameraInfo`` topic beside a camera's image topic (``.../image_raw`` ->
    ``.../camera_info``, as camera drivers and image_transport name them)."""
    image = cam.topic.removesuffix("/compressed")
    return image.rsplit("/", 1)[0] + "/camera_info" if "/" in image else "camera_info"


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name}: {value!r} is not one of {list(choices)}")


def bundled_profiles() -> list[str]:
    """Names of the profiles that ship with robot_rl (``rehearsal/<name>``: the same against robot_rl's emulation
    of the driver, with the sim's success topic and object frame)."""
    return sorted([p.stem for p in PROFILE_DIR.glob("*.yaml")] +
                  [f"rehearsal/{p.stem}" for p in (PROFILE_DIR / "rehearsal").glob("*.yaml")])


def driver_facts(name: str) -> dict[str, Any]:
    """What the real driver of bundled profile ``name`` exposes (``profiles/facts/<name>.yaml``: the topics it
    publishes and subscribes, its services and actions, each with its type and who serves it), as far as the profile
    uses it: the bare rehearsal's graph must not have more. KeyError for a profile without facts."""
    path = PROFILE_DIR / "facts" / f"{name.removeprefix('rehearsal/')}.yaml"
    if not path.is_file():
        raise KeyError(f"no driver facts for profile {name!r}")
    return yaml.safe_load(path.read_text())


Profile = ArmProfile | CarProfile
PROFILE_KINDS: dict[str, type] = {"arm": ArmProfile, "car": CarProfile}


def profile_from_dict(data: dict[str, Any], where: str = "profile", kind: str | None = None) -> Profile:
    """A profile from its YAML mapping; ``ConfigError`` naming the field on a bad key, type or value. ``kind``:
    the kind the caller drives (an arm env refuses a car profile by name)."""
    got = data.get("kind", "arm")
    if got not in PROFILE_KINDS:
        raise ConfigError(f"{where}.kind: {got!r} is not one of {list(PROFILE_KINDS)}")
    if kind is not None and got != kind:
        raise ConfigError(f"{where}: kind {got!r}, where a profile of kind {kind!r} is needed")
    profile = from_dict(PROFILE_KINDS[got], _drop_cleared(data, PROFILE_KINDS[got]), where)
    try:
        profile.validate()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except ValueError as exc:  # limits' own checks
        raise ConfigError(f"{where}.limits: {exc}") from None
    return profile


def load_profile(ref: str | dict[str, Any] | Profile, kind: str | None = None) -> Profile:
    """A profile by bundled name (``ur5e_servo``, ``rehearsal/ur5e_servo``), YAML path, mapping or profile (returned
    as is). A YAML file may start from another profile with ``extends: <name or path>`` and change only some
    fields (:func:`_merge`: mappings merge; lists, ``none`` and ``interface: none`` replace). ``kind`` (``arm``,
    ``car``): refuse a profile of another kind."""
    if isinstance(ref, (ArmProfile, CarProfile)):
        if kind is not None and ref.kind != kind:
            raise ConfigError(f"profile {ref.name}: kind {ref.kind!r}, where a profile of kind {kind!r} is needed")
        return ref
    if isinstance(ref, dict):
        return profile_from_dict(ref, kind=kind)
    data, path = _profile_yaml(str(ref), Path.cwd())
    return profile_from_dict(data, f"profile {path.name}", kind)


def _profile_yaml(ref: str, base: Path, seen: tuple[Path, ...] = ()) -> tuple[dict[str, Any], Path]:
    """The mapping of a profile file with its ``extends`` chain merged in."""
    path = Path(ref)
    if not path.suffix:
        path = PROFILE_DIR / f"{ref}.yaml"
        if not path.is_file():
            raise ConfigError(f"profile {ref!r}: no such bundled profile (bundled: {', '.join(bundled_profiles())}; "
                              "or give a YAML file path)")
    else:
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise ConfigError(f"profile file not found: {path}")
    if path.resolve() in seen:
        raise ConfigError(f"profile {path.name}: extends itself (through {[p.name for p in seen]})")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    parent = data.pop("extends", None)
    if parent is not None:
        base_data, _ = _profile_yaml(str(parent), path.parent, (*seen, path.resolve()))
        base_data.pop("name", None)
        data = _merge(base_data, data)
    data.setdefault("name", path.stem if path.parent != PROFILE_DIR / "rehearsal" else f"rehearsal/{path.stem}")
    return data, path


def _cleared(value: Any) -> bool:
    """``none`` (or an empty value) for a section, or a section whose ``interface`` is ``none``."""
    return value is None or value == "none" or (isinstance(value, dict) and value.get("interface") == "none")


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The merge rule of ``extends`` and overrides: mappings merge key by key; a list, a scalar, ``none`` or a
    section with ``interface: none`` replaces what the base had (``gripper: {interface: none}`` leaves no finger
    joints or controller of the base behind, ``cameras: none`` no camera)."""
    out = dict(base)
    for key, value in extra.items():
        mergeable = isinstance(value, dict) and isinstance(out.get(key), dict) and not _cleared(value)
        out[key] = _merge(out[key], value) if mergeable else value
    return out


def _drop_cleared(data: dict[str, Any], cls: type) -> dict[str, Any]:
    """``none`` for a section (a nested dataclass or a list, e.g. ``wrench: none``, ``cameras: none``) means the
    section's empty default."""
    sections = {f.name for f in dataclasses.fields(cls) if f.default_factory is not dataclasses.MISSING
                or isinstance(f.default, tuple)}
    return {k: v for k, v in data.items() if not (k in sections and (v is None or v == "none"))}


def with_overrides(profile: Profile, overrides: dict[str, Any]) -> Profile:
    """The profile with some of its fields replaced from a mapping (nested sections merged), re-validated: how a
    launch file or a run config adapts a bundled profile (a namespace, another topic)."""
    return profile_from_dict(_merge(to_dict(profile), overrides), f"profile {profile.name}")

