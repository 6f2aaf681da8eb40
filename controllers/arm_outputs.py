"""The safety node's last stage with a robot profile: a filtered Cartesian target becomes the command the
profile's driver accepts, checked again in that interface's own units before it is published.

The policy was trained with the sim's impedance controller following its targets (critically damped, natural
frequency 20 rad/s for the default gains). A real driver's controller follows its commands much more stiffly, so a
target sent as it comes would meet the policy with another closed-loop response. With ``command.reference_omega``
> 0 the stage streams, at ``command.rate_hz``, a reference that follows the target with the sim controller's
response (:class:`ReferenceFilter`), and the stiff driver tracks that reference
(docs/design/robot-profiles.md). With 0, each target goes out once, as it comes.

* :class:`PoseOutput` — ``geometry_msgs/PoseStamped`` to a Cartesian controller (e.g. FZI's
  ``cartesian_motion_controller/target_frame``), in the profile's command frame.
* :class:`TwistOutput` — ``geometry_msgs/TwistStamped`` to MoveIt Servo: the reference's velocity plus
  ``servo_gain`` times the distance from the measured pose to the reference; linear speed clipped to
  ``max_speed`` (reason ``velocity``), angular to ``max_angular_speed``. Its controlled stop is bumpless: the
  reference restarts from the measured position at the twist last sent.
* :class:`JointOutput` — joint positions from inverse kinematics on the URDF (started from the measured joints),
  checked in joint space: inside the URDF's limits less ``joint_margin`` (``joint_limit``), at most
  ``max_joint_step`` from the measured joints (``joint_step``), a solution within ``ik_tolerance`` of the
  reference (``ik``: else the command is not sent and the driver holds the last one) and a tool position inside the
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
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped, TwistStamped

from robot_rl.robots.kinematics import UrdfKinematics
from robot_rl.robots.profile import ArmProfile
from robot_rl.robots.transforms import slerp
from robot_rl.ros.msgs import pose_stamped
from robot_rl_controllers import osc_kernel

Reasons = list[str]
Pose = tuple[np.ndarray, np.ndarray]


class ReferenceFilter:
    """A reference that follows a target like a critically damped spring (natural frequency ``omega`` rad/s):
    position with its velocity, orientation by the matching first-order slerp. Integrated in sub-steps of at most
    1 ms, so a late tick does not destabilise it."""

    def __init__(self, omega: float) -> None:
        self.omega = omega
        self.pos: np.ndarray | None = None
        self.vel = np.zeros(3)
        self.quat = np.array([1.0, 0.0, 0.0, 0.0])

    def reset(self, pos: np.ndarray, quat: np.ndarray) -> None:
        self.pos, self.quat, self.vel = np.array(pos, np.float64), np.array(quat, np.float64), np.zeros(3)

    def step(self, target: Pose, dt: float) -> Pose:
        w = self.omega
        n = max(1, int(np.ceil(dt / 0.001)))
        h = dt / n
        for _ in range(n):
            acc = w * w * (target[0] - self.pos) - 2.0 * w * self.vel
            self.vel = self.vel + h * acc
            self.pos = self.pos + h * self.vel
        self.quat = slerp(self.quat, np.asarray(target[1], np.float64), 1.0 - float(np.exp(-w * dt)))
        return self.pos.copy(), self.quat.copy()


class StreamedOutput:
    """What every arm output shares: the target, the reference that follows it at ``rate_hz`` (or the target
    itself, sent once, without a filter), and the reasons the interface's own checks give (``reject``)."""

    def __init__(self, profile: ArmProfile, now: Callable[[], float], reject: Callable[[Reasons], None],
                 measured: Callable[[], Pose | None]) -> None:
        cmd = profile.command
        self.profile, self.now, self.reject, self.measured = profile, now, reject, measured
        self.filter = ReferenceFilter(cmd.reference_omega) if cmd.reference_omega > 0 else None
        self.period = 1.0 / cmd.rate_hz if cmd.rate_hz > 0 else 0.0
        self.target: Pose | None = None
        self.last_tick = -np.inf
        self.next_send = np.inf
        """When the reference is next sent (``now()`` time): one every ``period`` from the first target, on a fixed
        schedule; infinite while nothing streams. The safety node's watchdog thread wakes for it."""
        self.stopping = False

    def send(self, pos: np.ndarray, quat: np.ndarray, stamp: Any) -> Reasons:
        """A filtered target from the safety node (its reasons: this output's checks of an immediate send)."""
        self.target = (np.asarray(pos, np.float64), np.asarray(quat, np.float64))
        self.stopping = False
        if self.filter is None:
            return self.emit(*self.target, None)
        if self.filter.pos is None:
            start = self.measured()
            self.filter.reset(*(start if start is not None else self.target))
            self.last_tick = self.now()
            self.next_send = self.last_tick + self.period
        return []

    def stop(self) -> Pose | None:
        """A controlled stop of the reference itself: its target becomes the point ``2 velocity / omega`` ahead
        (inside the workspace), which a critically damped reference reaches slowing as ``v0 (1 + omega t)
        exp(-omega t)``: no jump in deceleration, monotonically to rest, never turning back. The next target
        (:meth:`send`) ends the stop. Returns that point, or None without a reference (the safety node's own stop
        profile then applies)."""
        f = self.filter
        if f is None or f.pos is None:
            return None
        lim = self.profile.limits
        self.target = (np.clip(f.pos + 2.0 * f.vel / f.omega, lim.workspace_low, lim.workspace_high), f.quat.copy())
        self.stopping = True
        return self.target

    def release(self) -> None:
        """The arm is where it is measured, whatever was commanded before (a restarted driver, an arm moved by hand,
        a state stream that paused, a new URDF): nothing is sent until the next target, and the reference then
        starts from the measured pose (:meth:`send`). The driver holds the arm where it is meanwhile (Servo halts
        without twists)."""
        self.target = None
        self.stopping = False
        self.next_send = np.inf
        if self.filter is not None:
            self.filter.pos = None

    def tick(self, now: float) -> None:
        """Called at the watchdog's rate and at ``next_send``: advances the reference and sends it on a fixed
        schedule, one every ``period`` (a late send does not delay the next one; a send more than a period late
        restarts the schedule from now)."""
        if self.filter is None or self.target is None or self.filter.pos is None or now < self.next_send:
            return
        dt = min(now - self.last_tick, 0.1)
        self.last_tick = now
        late = now - self.next_send
        self.next_send = now + self.period if late >= self.period else self.next_send + self.period
        pos, quat = self.filter.step(self.target, dt)
        vel = self.filter.vel.copy()
        lim = self.profile.limits
        lead = pos + self.profile.command.lead_time * vel
        command = np.clip(lead, lim.workspace_low, lim.workspace_high)  # the lead never takes it outside the box
        reasons = self.emit(command, quat, vel)
        if reasons:
            self.reject(reasons)

    def emit(self, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray | None) -> Reasons:
        raise NotImplementedError


class PoseOutput(StreamedOutput):
    """Poses to a Cartesian controller."""

    def __init__(self, node: Any, profile: ArmProfile, now: Callable[[], float], reject: Callable[[Reasons], None],
                 measured: Callable[[], Pose | None], stamp: Callable[[], Any]) -> None:
        super().__init__(profile, now, reject, measured)
        self.frame, self.stamp = profile.command.frame or profile.base_frame, stamp
        self.pub = node.create_publisher(PoseStamped, profile.command.topic, 10)

    def emit(self, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray | None) -> Reasons:
        self.pub.publish(pose_stamped(pos, quat, self.stamp(), self.frame))
        return []


class TwistOutput(StreamedOutput):
    """Twists to MoveIt Servo (see the module docstring)."""

    def __init__(self, node: Any, profile: ArmProfile, now: Callable[[], float], reject: Callable[[Reasons], None],
                 measured: Callable[[], Pose | None], stamp: Callable[[], Any], max_angular_speed: float = 1.0) -> None:
        super().__init__(profile, now, reject, measured)
        self._msg, self.stamp = TwistStamped, stamp
        self.frame = profile.command.frame or profile.base_frame
        self.pub = node.create_publisher(TwistStamped, profile.command.topic, 10)
        self.gain, self.max_speed = profile.command.servo_gain, profile.limits.max_speed
        self.max_angular_speed = max_angular_speed
        self._rot_err = np.zeros(3)
        self.last_linear: np.ndarray | None = None  # the linear twist last published
        self.switch = ServoSwitch(node, profile.command.servo_command_type_service) \
            if profile.command.servo_command_type_service else None

    def release(self) -> None:
        super().release()
        self.last_linear = None

    def stop(self) -> Pose | None:
        """A bumpless stop: the reference restarts from the measured position with the twist last sent as its
        velocity, so the streamed twist decays from what Servo was moving at. Started from the reference's own
        velocity, the twist would step down by the tracking term, which the joints answer with a dip and a
        rebound."""
        f, state = self.filter, self.measured()
        if f is not None and f.pos is not None and self.last_linear is not None and state is not None:
            f.pos, f.vel = np.array(state[0], np.float64), self.last_linear.copy()
        return super().stop()

    def emit(self, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray | None) -> Reasons:
        if self.switch is not None:
            self.switch.ensure()
        state = self.measured()
        if state is None:
            return ["no_state"]
        # while stopping, the twist is the reference's own deceleration: no pull towards where the reference is, so
        # the arm slows as the reference does and rests short of it by its tracking lag, instead of creeping on
        gain = 0.0 if self.stopping else self.gain
        lin = (vel if vel is not None else np.zeros(3)) + gain * (pos - state[0])
        osc_kernel.quat_error(np.asarray(quat, np.float64), np.asarray(state[1], np.float64), self._rot_err)
        ang = self.gain * self._rot_err
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
        self.last_linear = lin
        return reasons


class ServoSwitch:
    """Asks MoveIt Servo (``switch_command_type``) to take twists, once its service answers; until it has said yes,
    :meth:`ensure` retries (at most every 0.5 s)."""

    TWIST = 1  # moveit_msgs/srv/ServoCommandType.TWIST

    def __init__(self, node: Any, service: str) -> None:
        from moveit_msgs.srv import ServoCommandType  # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)

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


class JointOutput(StreamedOutput):
    """Joint positions by inverse kinematics (see the module docstring). ``joints()`` -> the measured arm joint
    positions or None; ``kinematics()`` -> the URDF kinematics or None (not received yet)."""

    def __init__(self, node: Any, profile: ArmProfile, now: Callable[[], float], reject: Callable[[Reasons], None],
                 measured: Callable[[], Pose | None], kinematics: Callable[[], UrdfKinematics | None],
                 joints: Callable[[], np.ndarray | None], joint_margin: float = 0.02,
                 ik_tolerance: float = 0.003) -> None:
        super().__init__(profile, now, reject, measured)
        self.kinematics, self.joints = kinematics, joints
        self.trajectory = profile.command.interface == "joint_trajectory"
        self.margin, self.ik_tolerance = joint_margin, ik_tolerance
        if self.trajectory:
            from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # optional: ros2

            self._types = JointTrajectory, JointTrajectoryPoint
            self.pub = node.create_publisher(JointTrajectory, profile.command.topic, 10)
        else:
            from std_msgs.msg import Float64MultiArray  # optional: ros2

            self._types = (Float64MultiArray,)
            self.pub = node.create_publisher(Float64MultiArray, profile.command.topic, 10)
        self.last_q: np.ndarray | None = None

    def release(self) -> None:
        super().release()
        self.last_q = None  # the next IK starts from the measured joints

    def emit(self, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray | None) -> Reasons:
        kin, q_meas = self.kinematics(), self.joints()
        if kin is None or q_meas is None:
            return ["no_state"]
        result = kin.inverse(pos, quat, self.last_q if self.last_q is not None else q_meas)  # warm start
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
        qd = None
        if self.trajectory and vel is not None:  # the reference's velocity in joint space: JTC's splines use it
            # The whole twist, the orientation held (the reference's turns are slow): the joint motion the IK path
            # makes. The linear part alone gave the minimum-norm joint velocity, which turns the tool, so each
            # spline left its knot in another direction than the positions went.
            jac = kin.jacobian(q)
            twist = np.concatenate([vel, np.zeros(3)])
            qd = np.clip(jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), twist), -2.0, 2.0)
        self._publish(q, qd)
        return reasons

    def _publish(self, q: np.ndarray, qd: np.ndarray | None = None) -> None:
        self.last_q = q
        if not self.trajectory:
            self.pub.publish(self._types[0](data=q.tolist()))
            return

        trajectory_type, point_type = self._types
        t = self.profile.command.time_from_start
        point = point_type(positions=q.tolist(), time_from_start=Duration(sec=int(t), nanosec=int((t % 1) * 1e9)))
        if qd is not None:
            point.velocities = qd.tolist()
        self.pub.publish(trajectory_type(joint_names=list(self.profile.joint_states.names), points=[point]))


class GripperForwardOutput:
    """One position per gripper joint (``command_scale`` * opening) to a forward position controller."""

    def __init__(self, node: Any, profile: ArmProfile) -> None:
        from std_msgs.msg import Float64MultiArray  # optional: ros2

        self.msg, self.g = Float64MultiArray, profile.gripper
        self.pub = node.create_publisher(Float64MultiArray, self.g.command, 10)

    def send(self, opening: float) -> None:
        self.pub.publish(self.msg(data=[self.g.command_scale * opening] * len(self.g.joints)))


class GripperActionOutput:
    """GripperCommand goals (``position`` = ``command_scale`` * opening), or ParallelGripperCommand goals
    (``position[0]``, ``effort[0]``), when the opening moved by more than ``deadband`` since the last goal; results are
    not waited for (a newer goal preempts)."""

    def __init__(self, node: Any, profile: ArmProfile) -> None:
        # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
        from control_msgs.action import GripperCommand, ParallelGripperCommand
        from rclpy.action import ActionClient  # optional: ros2

        action = ParallelGripperCommand if profile.gripper.interface == "parallel_action" else GripperCommand
        self.goal_type, self.g = action.Goal, profile.gripper
        self.parallel = action is ParallelGripperCommand
        self.client = ActionClient(node, action, self.g.command)
        self.last: float | None = None

    def send(self, opening: float) -> None:
        if self.last is not None and abs(opening - self.last) <= self.g.deadband:
            return
        if not self.client.server_is_ready():
            return
        goal = self.goal_type()
        if self.parallel:  # a sensor_msgs/JointState: the controller's one joint
            goal.command.position, goal.command.effort = [self.g.command_scale * opening], [self.g.max_effort]
        else:
            goal.command.position, goal.command.max_effort = self.g.command_scale * opening, self.g.max_effort
        self.client.send_goal_async(goal)
        self.last = opening


def make_outputs(node: Any, profile: ArmProfile, now: Callable[[], float], stamp: Callable[[], Any],
                 reject: Callable[[Reasons], None], measured: Callable[[], Pose | None],
                 kinematics: Callable[[], UrdfKinematics | None], joints: Callable[[], np.ndarray | None]
                 ) -> tuple[StreamedOutput, Callable[[float], None]]:
    """The arm output of ``profile``'s command interface and the gripper's ``send(opening)`` (a no-op without a
    commanded gripper). ``ValueError`` for the ``effort`` interface: that is robot_rl's own controller."""
    common = (node, profile, now, reject, measured)
    kind = profile.command.interface
    if kind == "cartesian_pose":
        arm: StreamedOutput = PoseOutput(*common, stamp)
    elif kind == "servo_twist":
        arm = TwistOutput(*common, stamp)
    elif kind in ("joint_position", "joint_trajectory"):
        arm = JointOutput(*common, kinematics, joints)
    else:
        raise ValueError(f"profile {profile.name}: command.interface {kind!r} is robot_rl's own controller (run "
                         "the safety node without a profile)")
    gripper = profile.gripper.interface
    out = (GripperActionOutput(node, profile) if gripper in ("action", "parallel_action") else
           GripperForwardOutput(node, profile) if gripper == "forward" else None)
    return arm, (out.send if out is not None else (lambda opening: None))
