"""The safety node's last stage with a robot profile: a filtered Cartesian target becomes the command the
profile's driver accepts, checked again in that interface's own units before it is published.

* :class:`PoseOutput` — ``geometry_msgs/PoseStamped`` to a Cartesian controller (e.g. FZI's
  ``cartesian_motion_controller/target_frame``), in the profile's command frame.
* :class:`TwistOutput` — ``geometry_msgs/TwistStamped`` to MoveIt Servo: the target's own velocity plus
  ``servo_gain`` times the distance to it, streamed at ``rate_hz``; linear speed clipped to ``max_speed``
  (reason ``velocity``), angular to ``max_angular_speed``. While holding, the target stops and the twist decays.
* :class:`JointOutput` — joint positions from inverse kinematics on the URDF (started from the measured joints),
  checked in joint space: inside the URDF's limits less ``joint_margin`` (``joint_limit``), at most
  ``max_joint_step`` from the measured joints (``joint_step``), a solution within ``ik_tolerance`` of the target
  (``ik``: else the command is not sent and the driver holds the last one) and a tool position inside the
  workspace box (``workspace``: else not sent); published as ``std_msgs/Float64MultiArray`` to a forward position
  controller or as a one-point ``trajectory_msgs/JointTrajectory`` (``time_from_start``) to a trajectory
  controller.

Gripper outputs: :class:`GripperActionOutput` (``control_msgs/action/GripperCommand`` goals when the opening moves
by more than the deadband; the newer goal preempts the older, as gripper_action_controller does) and
:class:`GripperForwardOutput` (``Float64MultiArray``, one position per gripper joint).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from robot_rl.robots.kinematics import UrdfKinematics
from robot_rl.robots.profile import ArmProfile
from robot_rl.robots.transforms import quat_conj, quat_mul
from robot_rl.ros.msgs import pose_stamped

Reasons = list[str]


class PoseOutput:
    """Target poses to a Cartesian controller."""

    def __init__(self, node: Any, profile: ArmProfile) -> None:
        from geometry_msgs.msg import PoseStamped

        self.frame = profile.command.frame or profile.base_frame
        self.pub = node.create_publisher(PoseStamped, profile.command.topic, 10)

    def send(self, pos: np.ndarray, quat: np.ndarray, stamp: Any) -> Reasons:
        self.pub.publish(pose_stamped(pos, quat, stamp, self.frame))
        return []

    def tick(self, now: float) -> None:
        """Nothing to stream: the controller holds its last target."""


def rotation_error(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Axis-angle vector (rad, base frame) rotating ``current`` onto ``target`` (quaternions w-x-y-z)."""
    q = quat_mul(target, quat_conj(current))
    if q[0] < 0:
        q = -q
    s = float(np.linalg.norm(q[1:]))
    if s < 1e-12:
        return np.zeros(3)
    return 2.0 * np.arctan2(s, q[0]) * q[1:] / s


class TwistOutput:
    """Twists to MoveIt Servo (see the module docstring). ``measured()`` -> (position, quaternion) or None."""

    def __init__(self, node: Any, profile: ArmProfile, measured: Callable[[], tuple[np.ndarray, np.ndarray] | None],
                 now: Callable[[], float], stamp: Callable[[], Any], period: float,
                 max_angular_speed: float = 1.0) -> None:
        from geometry_msgs.msg import TwistStamped

        self._msg = TwistStamped
        self.frame = profile.command.frame or profile.base_frame
        self.pub = node.create_publisher(TwistStamped, profile.command.topic, 10)
        self.gain, self.max_speed = profile.command.servo_gain, profile.limits.max_speed
        self.max_angular_speed = max_angular_speed
        self.rate_period = 1.0 / profile.command.rate_hz if profile.command.rate_hz > 0 else 0.0
        self.policy_period = period
        self.measured, self.now, self.stamp = measured, now, stamp
        self.target: tuple[np.ndarray, np.ndarray] | None = None
        self.target_vel = np.zeros(3)
        self.target_time = -np.inf
        self.next_tick = -np.inf
        self.last_reasons: Reasons = []
        self.switch = ServoSwitch(node, profile.command.servo_command_type_service) \
            if profile.command.servo_command_type_service else None

    def send(self, pos: np.ndarray, quat: np.ndarray, stamp: Any) -> Reasons:
        now = self.now()
        if self.target is not None and now - self.target_time < 2.5 * self.policy_period:
            self.target_vel = (pos - self.target[0]) / max(now - self.target_time, 1e-3)
        else:
            self.target_vel = np.zeros(3)
        self.target, self.target_time = (np.asarray(pos, np.float64), np.asarray(quat, np.float64)), now
        if self.rate_period == 0.0:
            return self._publish(now)
        return []

    def tick(self, now: float) -> None:
        if self.rate_period > 0.0 and self.target is not None and now >= self.next_tick:
            self.next_tick = now + self.rate_period
            self._publish(now)

    def _publish(self, now: float) -> Reasons:
        if self.switch is not None:
            self.switch.ensure()
        state = self.measured()
        if state is None or self.target is None:
            return ["no_state"]
        pos, quat = state
        feed = self.target_vel if now - self.target_time < 1.5 * self.policy_period else np.zeros(3)
        lin = feed + self.gain * (self.target[0] - pos)
        ang = self.gain * rotation_error(self.target[1], quat)
        reasons: Reasons = []
        speed = float(np.max(np.abs(lin)))
        if speed > self.max_speed:
            lin *= self.max_speed / speed
            reasons.append("velocity")
        norm = float(np.linalg.norm(ang))
        if norm > self.max_angular_speed:
            ang *= self.max_angular_speed / norm
        msg = self._msg()
        msg.header.stamp, msg.header.frame_id = self.stamp(), self.frame
        t = msg.twist
        t.linear.x, t.linear.y, t.linear.z = (float(v) for v in lin)
        t.angular.x, t.angular.y, t.angular.z = (float(v) for v in ang)
        self.pub.publish(msg)
        self.last_reasons = reasons
        return reasons


class ServoSwitch:
    """Asks MoveIt Servo (``switch_command_type``) to take twists, once its service answers; until it has said yes,
    :meth:`ensure` retries (at most every 0.5 s)."""

    TWIST = 1  # moveit_msgs/srv/ServoCommandType.TWIST

    def __init__(self, node: Any, service: str) -> None:
        from moveit_msgs.srv import ServoCommandType

        self.request = ServoCommandType.Request(command_type=self.TWIST)
        self.client = node.create_client(ServoCommandType, service)
        self.log = node.get_logger()
        self.done, self.pending, self.last_try = False, None, -np.inf

    def ensure(self) -> None:
        if self.done:
            return
        if self.pending is not None and self.pending.done():
            result, self.pending = self.pending.result(), None
            self.done = bool(result and result.success)
            if self.done:
                self.log.info(f"{self.client.srv_name}: Servo takes twists")
            return
        if self.pending is None and time.monotonic() - self.last_try > 0.5 and self.client.service_is_ready():
            self.last_try = time.monotonic()
            self.pending = self.client.call_async(self.request)


class JointOutput:
    """Joint positions by inverse kinematics (see the module docstring). ``joints()`` -> the measured arm joint
    positions or None; ``kinematics()`` -> the URDF kinematics or None (not received yet)."""

    def __init__(self, node: Any, profile: ArmProfile, kinematics: Callable[[], UrdfKinematics | None],
                 joints: Callable[[], np.ndarray | None], joint_margin: float = 0.02,
                 ik_tolerance: float = 0.003) -> None:
        self.profile, self.kinematics, self.joints = profile, kinematics, joints
        self.trajectory = profile.command.interface == "joint_trajectory"
        self.margin, self.ik_tolerance = joint_margin, ik_tolerance
        if self.trajectory:
            from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

            self._types = JointTrajectory, JointTrajectoryPoint
            self.pub = node.create_publisher(JointTrajectory, profile.command.topic, 10)
        else:
            from std_msgs.msg import Float64MultiArray

            self._types = (Float64MultiArray,)
            self.pub = node.create_publisher(Float64MultiArray, profile.command.topic, 10)
        self.last_q: np.ndarray | None = None
        self.ik_ms: list[float] = []

    def send(self, pos: np.ndarray, quat: np.ndarray, stamp: Any) -> Reasons:
        kin, q_meas = self.kinematics(), self.joints()
        if kin is None or q_meas is None:
            return ["no_state"]
        t0 = time.perf_counter()
        result = kin.inverse(pos, quat, q_meas)
        self.ik_ms.append(1e3 * (time.perf_counter() - t0))
        del self.ik_ms[:-200]
        if result.position_error > self.ik_tolerance or result.rotation_error > 10 * self.ik_tolerance:
            return ["ik"]
        reasons: Reasons = []
        low, high = kin.lower + self.margin, kin.upper - self.margin
        q = np.clip(result.q, low, high)
        if np.any(q != result.q):
            reasons.append("joint_limit")
        step = self.profile.command.max_joint_step
        clipped = np.clip(q, q_meas - step, q_meas + step)
        if np.any(clipped != q):
            reasons.append("joint_step")
        q = clipped
        reached, _ = kin.forward(q)
        lim = self.profile.limits
        tol = 2 * self.ik_tolerance
        if np.any(reached < np.asarray(lim.workspace_low) - tol) or \
                np.any(reached > np.asarray(lim.workspace_high) + tol):
            return [*reasons, "workspace"]
        self._publish(q)
        return reasons

    def _publish(self, q: np.ndarray) -> None:
        self.last_q = q
        if not self.trajectory:
            self.pub.publish(self._types[0](data=q.tolist()))
            return
        from builtin_interfaces.msg import Duration

        trajectory_type, point_type = self._types
        t = self.profile.command.time_from_start
        point = point_type(positions=q.tolist(), time_from_start=Duration(sec=int(t), nanosec=int((t % 1) * 1e9)))
        self.pub.publish(trajectory_type(joint_names=list(self.profile.joint_states.names), points=[point]))

    def tick(self, now: float) -> None:
        """Nothing to stream: the controllers hold their last command."""


class GripperForwardOutput:
    """One position per gripper joint (``command_scale`` * opening) to a forward position controller."""

    def __init__(self, node: Any, profile: ArmProfile) -> None:
        from std_msgs.msg import Float64MultiArray

        self.msg, self.g = Float64MultiArray, profile.gripper
        self.pub = node.create_publisher(Float64MultiArray, self.g.command, 10)

    def send(self, opening: float) -> None:
        self.pub.publish(self.msg(data=[self.g.command_scale * opening] * len(self.g.joints)))


class GripperActionOutput:
    """GripperCommand goals (``position`` = ``command_scale`` * opening) when the opening moved by more than
    ``deadband`` since the last goal; results are not waited for (a newer goal preempts)."""

    def __init__(self, node: Any, profile: ArmProfile) -> None:
        from control_msgs.action import GripperCommand
        from rclpy.action import ActionClient

        self.goal_type, self.g = GripperCommand.Goal, profile.gripper
        self.client = ActionClient(node, GripperCommand, self.g.command)
        self.last: float | None = None
        self.goals = 0

    def send(self, opening: float) -> None:
        if self.last is not None and abs(opening - self.last) <= self.g.deadband:
            return
        if not self.client.server_is_ready():
            return
        goal = self.goal_type()
        goal.command.position, goal.command.max_effort = self.g.command_scale * opening, self.g.max_effort
        self.client.send_goal_async(goal)
        self.last = opening
        self.goals += 1
