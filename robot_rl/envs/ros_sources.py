"""Where the ROS 2 arm env's observation comes from: robot_rl's own hardware topics (:class:`TopicSources`) or a
robot profile's driver (:class:`ProfileSources`). Both subscribe on the env's :class:`~robot_rl.ros.link.RosLink`
and give the state parts in the sim tasks' layout: EE position (3), quaternion (4, w-x-y-z), EE linear velocity
(3), gripper opening (1), [wrench (6)], [object position (3)].

With a profile, the EE pose comes from the joint states through the URDF's kinematics (what robot_state_publisher
puts on TF, at the joint states' rate rather than its 20 Hz), its velocity from the joint velocities through the
URDF's Jacobian, the gripper opening from the gripper joints, the object position from the tracker's TF frame, the
wrench from the profile's topic and success from the profile's source. No robot_rl-specific topic is read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped
from sensor_msgs.msg import Image, JointState

from robot_rl.robots.kinematics import UrdfKinematics
from robot_rl.ros.link import RosLink, Stream
from robot_rl.ros.msgs import image_array, pose_arrays
from robot_rl.ros.robot_state import JointReader, RobotDescription
from robot_rl.ros.tf_buffer import TfBuffer, TfError

Snap = dict[str, tuple[float, Any]]


def _vec(v: Any) -> list[float]:
    return [v.x, v.y, v.z]


def _wrench(msg: Any) -> np.ndarray:
    return np.array(_vec(msg.wrench.force) + _vec(msg.wrench.torque))


class _Sources:
    """What both sources share: the state's layout. Subclasses give the reference stream, ``pose(snap)``,
    ``velocity(snap)`` and ``ee()``."""

    link: RosLink
    cam_keys: list[str]
    unsynced: tuple[str, ...] = ()
    """Streams an observation takes as they are, without waiting for the reference's instant (see
    :func:`robot_rl.ros.link.snapshot`)."""

    def reference(self) -> str:
        """The stream whose stamp an observation is taken at."""
        raise NotImplementedError

    def pose(self, snap: Snap) -> tuple[float, np.ndarray, np.ndarray]:
        """(stamp, position, quaternion w-x-y-z) of the EE in a synchronised snapshot."""
        raise NotImplementedError

    def state(self, snap: Snap) -> tuple[list[np.ndarray], tuple[float, np.ndarray, np.ndarray]]:
        """The state parts (sim layout) of a synchronised snapshot, and the EE pose with its stamp."""
        stamp, pos, quat = self.pose(snap)
        gripper = snap["gripper"][1] if "gripper" in snap else 0.0
        parts = [pos, quat, self.velocity(snap), np.array([gripper])]
        parts += [snap[k][1] for k in ("wrench", "object") if k in snap]
        return parts, (stamp, pos, quat)

    def ee(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, quaternion, linear velocity) of the EE from the newest messages."""
        raise NotImplementedError

    def velocity(self, snap: Snap) -> np.ndarray:
        raise NotImplementedError


class TopicSources(_Sources):
    """robot_rl's own hardware topics: ``ee_pose``, ``ee_twist``, ``gripper/joint_states``, ``wrench``,
    ``object_pose`` (sim-privileged), ``success``."""

    success_topic = "success"

    def __init__(self, link: RosLink, include_wrench: bool, object_state: bool, finger_joints: tuple[str, ...],
                 cameras: tuple[str, ...]) -> None:

        def opening(msg: JointState) -> float:
            index = {n: i for i, n in enumerate(msg.name)}
            return float(sum(msg.position[index[j]] for j in finger_joints if j in index))

        self.link = link
        link.subscribe("pose", PoseStamped, "ee_pose", lambda m: pose_arrays(m.pose))
        link.subscribe("twist", TwistStamped, "ee_twist", lambda m: np.array(_vec(m.twist.linear)))
        link.subscribe("gripper", JointState, "gripper/joint_states", opening)
        if include_wrench:
            link.subscribe("wrench", WrenchStamped, "wrench", _wrench)
        if object_state:
            link.subscribe("object", PoseStamped, "object_pose", lambda m: pose_arrays(m.pose)[0])
        for cam in cameras:
            link.subscribe(f"cam/{cam}", Image, f"camera/{cam}/image_raw", image_array, depth=8)
        self.state_keys = ["pose", "twist", "gripper"] + ["wrench"] * include_wrench + ["object"] * object_state
        self.cam_keys = [f"cam/{c}" for c in cameras]
        self.camera_topics = {c: f"camera/{c}/image_raw" for c in cameras}

    def connect(self, timeout: float) -> None:
        """Waits for what the observation needs (the env waits for the streams; nothing more to check)."""

    def reference(self) -> str:
        """The first camera, else the EE pose."""
        return self.cam_keys[0] if self.cam_keys else "pose"

    def pose(self, snap: Snap) -> tuple[float, np.ndarray, np.ndarray]:
        stamp, (pos, quat) = snap["pose"]
        return stamp, pos, quat

    def velocity(self, snap: Snap) -> np.ndarray:
        return snap["twist"][1]

    def ee(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos, quat = self.link.streams["pose"].latest()[1]
        return pos, quat, self.link.streams["twist"].latest()[1]


class ProfileSources(_Sources):
    """A robot profile's driver topics and TF (see the module docstring)."""

    def __init__(self, link: RosLink, profile: Any, include_wrench: bool, object_state: bool) -> None:

        self.link, self.profile = link, profile
        self.kin: Any = None
        p = profile
        arm, grip, scale = JointReader(p.joint_states.names), JointReader(p.gripper.joints), p.gripper.opening_scale

        def opening(msg: Any) -> float | None:
            got = grip(msg)
            return None if got is None else float(scale * np.sum(got[0]))

        # Joint states come at the hardware rate (0.5-1 kHz): served by threads of their own, never the executor's
        # (it keeps up with TF). The gripper's joints in the arm's message feed their stream from the same callback.
        separate = bool(p.gripper.joints) and bool(p.gripper.joint_states_topic) and \
            p.gripper.joint_states_topic != p.joint_states.topic
        gripper = Stream(lambda value: value) if p.gripper.joints and not separate else None

        def joints(msg: Any) -> Any:
            if gripper is not None and (o := opening(msg)) is not None:
                gripper.put(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec, o)
            return arm(msg)

        link.subscribe("joints", JointState, p.joint_states.topic, joints, fast=True)
        if gripper is not None:
            link.streams["gripper"] = gripper
        elif separate:
            link.subscribe("gripper", JointState, p.gripper.joint_states_topic, opening, fast=True)
        if include_wrench:
            if not p.wrench.topic:
                raise ValueError(f"include_wrench: profile {p.name} names no wrench topic")

            link.subscribe("wrench", WrenchStamped, p.wrench.topic, _wrench, best_effort=True)
        if object_state and not p.objects:
            raise ValueError(f"object_state: profile {p.name} tracks no object (profile.objects)")
        # The tracked object comes from TF, at the tracker's (or robot_state_publisher's) rate: 20 Hz by default
        # (its publish_frequency), so an observation takes it as it is (unsynced) rather than wait for it.
        if object_state:
            self.tf = TfBuffer()
            self.tf.subscribe(link.node)
            obj = link.streams["object"] = Stream(lambda value: value)  # fed by put() from the TF lookups below
            newest = [-np.inf]

            def on_tf(_: float) -> None:
                try:
                    pos, _, t = self.tf.lookup(p.base_frame, p.objects[0].frame)
                except TfError:
                    return
                if np.isfinite(t) and t > newest[0]:
                    newest[0] = t
                    obj.put(t, pos)

            self.tf.on_update(on_tf)
            self.unsynced = ("object",)
        self.description = RobotDescription(link.node, p.robot_description, self._on_urdf)
        self.state_keys = ["joints"] + ["gripper"] * bool(p.gripper.joints) + ["wrench"] * include_wrench + \
            ["object"] * object_state
        self.cam_keys: list[str] = []  # the profile's cameras are read by the env's camera rig
        self.camera_topics: dict[str, str] = {}
        self.success_topic = p.success.topic

    def connect(self, timeout: float) -> None:
        """Builds the URDF kinematics (the twist needs the Jacobian)."""
        p = self.profile
        self.kin = self.description.kinematics(p.joint_states.names, p.base_frame, p.tool_frame, timeout)

    def _on_urdf(self, urdf: str) -> None:
        """A new description after the first (a restarted driver): the kinematics are rebuilt from it."""
        if self.kin is None:
            return  # connect() builds the first
        p = self.profile
        try:
            self.kin = UrdfKinematics(urdf, p.joint_states.names, p.base_frame, p.tool_frame)
        except ValueError:
            self.kin = None  # no velocity from a URDF that is not this robot's: the next observation fails loudly

    def reference(self) -> str:
        """The joint states: they come at the hardware rate, so each observation is of the period's end. (The
        tool's TF comes at robot_state_publisher's rate, 20 Hz by default: at 20-50 Hz the observed instants
        alternate, 40 and 60 ms apart at a 50 ms period, and a policy trained on a sim's even steps misjudges
        the arm's motion.)"""
        return "joints"

    def pose(self, snap: Snap) -> tuple[float, np.ndarray, np.ndarray]:
        """The tool pose from the joint positions through the URDF (the TF robot_state_publisher would send)."""
        stamp, (q, _) = snap["joints"]
        pos, quat = self.kin.forward(q)
        return stamp, pos, quat

    def velocity(self, snap: Snap) -> np.ndarray:
        """The tool's linear velocity: the joint velocities through the URDF's Jacobian."""
        return self.kin.twist(*snap["joints"][1])[:3]

    def ee(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, qd = self.link.streams["joints"].latest()[1]
        pos, quat = self.kin.forward(q)
        return pos, quat, self.kin.twist(q, qd)[:3]

