"""MuJoCo arm behind a real driver's interface: the rehearsal hardware of a robot profile
(:mod:`robot_rl.robots.profile`), exposing what that driver exposes and nothing more.

The physics, the task scene and the injected imperfections are the sim arm hardware node's
(:mod:`robot_rl_sim.ros_arm_node`); what differs is the interface, read from the profile (parameter ``profile``):

* state: ``sensor_msgs/JointState`` on the profile's topic with its joint names (arm and gripper joints; a gripper
  with a topic of its own gets it), every physics step as a joint_state_broadcaster at the hardware rate;
  ``/tf`` with robot_state_publisher's semantics (the moving links at ``tf_rate_hz``, stamped with the joint state
  they come from; ``/tf_static`` and ``robot_description`` once, latched) with the profile's frame names (base,
  tool, wrench frame); ``geometry_msgs/WrenchStamped`` on the profile's wrench topic; images with a
  ``sensor_msgs/CameraInfo`` beside each (intrinsics from the MuJoCo camera); the task object as a TF frame under
  the base frame, as a tag tracker or motion capture publishes it.
* commands, with the driver's semantics (:mod:`robot_rl_sim.driver_emulation`): a Cartesian controller's target
  pose, MoveIt Servo twists (integrated at Servo's period, halted when stale), a forward position controller's
  positions, a joint trajectory controller's trajectories; the gripper's ``control_msgs/action/GripperCommand``
  server (reached goal / stalled, preempted by a new goal) or forward position controller. Command topics are read
  by the physics loop, the newest message each step, as a ros2_control controller reads its command buffer.
* ``<controller_manager>/list_controllers`` (controller_manager_msgs/srv/ListControllers): the broadcasters and the
  profile's controllers, active (those named in ``inactive_controllers`` listed inactive, for tests).
* sim only, named so: ``sim/success`` (std_msgs/Bool, the task's own check, for benchmarks and tests; no profile
  may need it) and the ``~/reset`` service that re-places the task objects.

No ``ee_pose``, ``ee_twist``, ``object_pose`` or ``success`` topics: the env works from what a real robot has.

**Bare mode** (``bare:=true``): exactly what the real driver publishes and serves, nothing else: no ``sim/success``,
no object frame, no ``~/reset``, no ``/clock`` (the driver-facts test compares this graph with each profile's
facts, ``robot_rl/robots/profiles/facts``). The scene is reached as a person reaches it, off the graph, through
``scene_dir`` (:mod:`robot_rl_sim.scene_channel`: what a person sees; putting objects back, guiding the arm by hand,
a stalled state stream). ``start_joints`` starts the arm where a person left it (a driver restarted after the arm
was moved).

    robot-rl-arm-driver --ros-args -p profile:=ros2_control_joint_position -p task:=PickCube
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import mujoco
import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, Float64MultiArray

from robot_rl.robots.profile import ArmProfile, camera_info_topic, load_profile
from robot_rl.ros.fast_sub import PolledSubscription
from robot_rl.ros.msgs import pose_arrays, to_stamp
from robot_rl.ros.node import run_node
from robot_rl.ros.tf import MujocoFrames, TfPublisher, relative_pose
from robot_rl_controllers.arm_model import ARM_JOINTS, FINGER_JOINTS, FINGER_MAX, HOME_QPOS, TORQUE_LIMITS
from robot_rl_controllers.impedance import ImpedanceGains
from robot_rl_sim.driver_emulation import (
    CartesianMotionEmulation,
    ForwardPositionEmulation,
    JointTracker,
    ServoEmulation,
    TrajectoryEmulation,
)
from robot_rl_sim.reality import RealityProfile, load_reality
from robot_rl_sim.ros_arm_config import ArmHardwareConfig
from robot_rl_sim.ros_arm_node import ArmHardwareNode
from robot_rl_sim.ros_controller_manager import serve_list_controllers
from robot_rl_sim.scene_channel import SceneChannel

CONTROLLER_TYPES = {
    "joint_position": "forward_command_controller/ForwardCommandController",
    "joint_trajectory": "joint_trajectory_controller/JointTrajectoryController",
    "servo_twist": "forward_command_controller/ForwardCommandController",  # Servo's output controller
    "cartesian_pose": "cartesian_motion_controller/CartesianMotionController",
}


@dataclass
class ArmDriverConfig(ArmHardwareConfig):
    """Parameters of the driver emulation: the sim hardware's plus these."""

    startup_only: ClassVar[tuple[str, ...]] = (*ArmHardwareConfig.startup_only, "profile", "inactive_controllers",
                                               "bare", "scene_dir", "start_joints", "reality")

    profile: str = "ros2_control_joint_position"
    """Robot profile (bundled name or YAML path) whose driver interface is emulated."""
    joint_omega: float = 50.0
    """Bandwidth (rad/s) of the joint position loop under the position interfaces (computed torque)."""
    cartesian_stiffness: float = 1600.0
    """Translational stiffness (1/s^2) with which the Cartesian controller tracks its target (rotational: 5/8 of it):
    40 rad/s by default, a stiff tracker like FZI's cartesian_motion_controller; 400 = the sim's own impedance."""
    servo_period: float = 0.004
    """MoveIt Servo's ``publish_period`` (s): how often twists are integrated into the joint command (0.004 in
    ur_moveit_config's ``ur_servo.yaml``; Servo's own default is 0.01)."""
    servo_timeout: float = 0.1
    """MoveIt Servo's ``incoming_command_timeout`` (s): a twist whose stamp is this old or more halts the arm."""
    gripper_goal_tolerance: float = 0.002
    """GripperCommand: a goal is reached within this distance of the commanded position."""
    gripper_stall_velocity: float = 0.002
    """GripperCommand: slower than this (m/s) for ``gripper_stall_timeout`` s without reaching the goal = stalled."""
    gripper_stall_timeout: float = 0.3
    """GripperCommand: see ``gripper_stall_velocity``."""
    locked_joint: str = "joint3"
    """The sim arm joint held at 0 when the profile's arm has 6 joints (a 6-axis arm's interface on the 7-joint sim
    arm: its kinematics are the sim arm's, its names and topics the profile's)."""
    inactive_controllers: tuple[str, ...] = ("",)
    """Controllers listed as inactive by list_controllers (to rehearse a controller that is not running)."""
    bare: bool = False
    """Only what the real driver exposes: no ``sim/success``, no object frame, no ``~/reset`` (see the module
    docstring); the scene through ``scene_dir``."""
    scene_dir: str = ""
    """Folder shared with a scripted person (:mod:`robot_rl_sim.scene_channel`): what is seen, and requests for
    what hands do. "" = none."""
    start_joints: tuple[float, ...] = (0.0,)
    """Arm joint positions at start, in the profile's joint order (one value 0.0 = the sim's home): where a
    restarted driver finds an arm that was moved while it was off."""
    reality: str = ""
    """How this robot differs from the training sim (:mod:`robot_rl_sim.reality`): a bundled profile (mild,
    typical, hard) or a YAML path; latencies, tracking, friction, gripper speed, joint noise and image brightness
    (added to the ``*_latency`` and ``joint_noise`` parameters). "" or nominal = the training sim itself."""

    def validate(self) -> None:
        super().validate()
        load_reality(self.reality)  # a bad name or file fails at start, naming it
        if self.bare and self.task == "PegInsert":
            raise ValueError("bare: PegInsert's peg starts in the hand (a sim convenience); use Reach or PickCube")
        if min(self.joint_omega, self.servo_period, self.servo_timeout, self.gripper_stall_timeout) <= 0:
            raise ValueError("joint_omega, servo_period, servo_timeout and gripper_stall_timeout must be > 0")


class ArmDriverNode(ArmHardwareNode):
    """See the module docstring."""

    def __init__(self, cfg: ArmDriverConfig | None = None, name: str = "arm_driver") -> None:
        self._polled: list[tuple[PolledSubscription, Callable[[Any], None]]] = []  # before _make_io fills it
        super().__init__(cfg or ArmDriverConfig(), name)

    # ------------------------------------------------------------------ interface
    def _make_io(self) -> None:
        cfg, m = self.cfg, self.model
        self._apply_reality(load_reality(cfg.reality))
        profile = load_profile(cfg.profile, "arm")
        self.profile: ArmProfile = profile
        names = profile.joint_states.names
        if len(names) == len(ARM_JOINTS):
            sim_joints, locked = list(ARM_JOINTS), ()
        elif len(names) == len(ARM_JOINTS) - 1 and cfg.locked_joint in ARM_JOINTS:
            sim_joints, locked = [j for j in ARM_JOINTS if j != cfg.locked_joint], (cfg.locked_joint,)
        else:
            raise ValueError(f"profile {profile.name}: {len(names)} arm joints; the sim arm emulates 7 (or 6, with "
                             f"locked_joint)")
        self.arm_index = np.array([ARM_JOINTS.index(j) for j in sim_joints])
        grip = profile.gripper.joints or ("finger_left", "finger_right")
        self.arm_names = list(names)
        self.grip_names = list(grip)[:2]
        rename_joints = dict(zip(sim_joints, names, strict=True)) | dict(zip(FINGER_JOINTS, self.grip_names))
        self.wrench_frame = profile.wrench.frame or "ft"
        cams = tuple(m.camera(c).name for c in range(m.ncam))
        # the force-torque site gets the wrench's frame name unless that is an existing frame (a wrench expressed
        # in the tool frame): then the site keeps its own name and the messages name the tool frame
        own = {"ft": self.wrench_frame} if self.wrench_frame not in (profile.base_frame, profile.tool_frame) else {}
        self.frames = MujocoFrames(m, "link0", "world", sites=("ee", "ft"), cameras=cams,
                                   rename={"link0": profile.base_frame, "ee": profile.tool_frame, **own},
                                   joint_rename=rename_joints, locked=locked)
        self.tf = TfPublisher(self, self.frames, profile.name or "robot", cfg.frame_prefix)
        link0 = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "link0")
        self.base_body = link0
        # joint states: one message with arm + gripper, or the gripper on a topic of its own
        self.pub_gripper_joints = None
        if profile.gripper.joint_states_topic and profile.gripper.joint_states_topic != profile.joint_states.topic:
            self.pub_joint = self.create_publisher(JointState, profile.joint_states.topic, 10)
            self.pub_gripper_joints = self.create_publisher(JointState, profile.gripper.joint_states_topic, 10)
            self._joint_msg = JointState(name=self.arm_names)
        else:
            self.pub_joint = self.create_publisher(JointState, profile.joint_states.topic, 10)
            self._joint_msg = JointState(name=self.arm_names + self.grip_names)
        wrench_qos = QoSProfile(depth=1 if profile.wrench.best_effort else 10,
                                reliability=ReliabilityPolicy.BEST_EFFORT if profile.wrench.best_effort
                                else ReliabilityPolicy.RELIABLE)
        self.pub_wrench = (self.create_publisher(WrenchStamped, profile.wrench.topic, wrench_qos)
                           if profile.wrench.topic else None)
        self.pub_cams = {}
        for cam in profile.cameras:
            if cam.name not in cams:
                raise ValueError(f"profile {profile.name}: camera {cam.name!r} is not a sim camera ({cams})")
            if cfg.image_size <= 0 or cam.compressed:
                raise ValueError("the profile has cameras: set image_size > 0 (raw images: compressed: false)")
            self.pub_cams[cam.name] = (self.create_publisher(Image, cam.topic, 2),
                                       self.create_publisher(CameraInfo, camera_info_topic(cam), 2),
                                       f"{cfg.frame_prefix}{cam.name}_camera_optical")
        self.pub_success = None if cfg.bare else self.create_publisher(Bool, "sim/success", 10)
        if cfg.bare and self.use_sim_time:
            raise ValueError("bare: a real driver publishes no /clock; run the bare rehearsal on the wall clock")
        self.scene = SceneChannel(cfg.scene_dir) if cfg.scene_dir else None
        self.scene_every = max(1, int(round(0.05 / self.dt)))  # 20 Hz
        self._hand: tuple[float, float, np.ndarray, np.ndarray] | None = None  # a move by hand: t0, s, from, to
        self._state_paused_until = -np.inf
        self._stamp_offset = 0.0
        self._make_command(profile)
        self._make_gripper(profile)
        self._make_controller_manager(profile)
        if cfg.start_joints != (0.0,):
            if len(cfg.start_joints) != len(names):
                raise ValueError(f"start_joints: {len(cfg.start_joints)} values for the profile's {len(names)} joints")
            self.data.qpos[self.qadr[self.arm_index]] = cfg.start_joints
            mujoco.mj_forward(m, self.data)

    def _apply_reality(self, reality: RealityProfile) -> None:
        """The reality profile on this driver's physics and outputs (never on what training sees: the env only
        reads the topics)."""
        cfg, m = self.cfg, self.model
        self.reality = reality
        cfg.command_latency += reality.command_latency
        cfg.state_latency += reality.state_latency
        cfg.joint_noise += reality.joint_noise
        self.camera_latency = reality.camera_latency
        self.gripper_speed = reality.gripper_speed
        self.bandwidth = reality.tracking_bandwidth_scale
        arm = self.vadr[:len(ARM_JOINTS)]
        m.dof_frictionloss[arm] += reality.joint_coulomb_friction
        m.dof_damping[arm] += reality.joint_viscous_friction
        if reality.brightness_change:
            b = reality.brightness_change
            self.image_gain = np.array([1.0 + b, 1.0 + b, 1.0 - b], np.float32)
        self.camera_reality = reality
        if not reality.nominal:
            self.get_logger().info(f"reality profile {reality.name}: {reality}")

    def _make_command(self, profile: ArmProfile) -> None:
        cfg, m, env = self.cfg, self.model, self.env
        kind, topic = profile.command.interface, profile.command.topic
        site = env.ee_site
        tracker = JointTracker(m, self.data, site, env.arm_dofs, np.asarray(TORQUE_LIMITS),
                               cfg.joint_omega * self.bandwidth, self.arm_index)
        frame = profile.command.frame or profile.base_frame
        if kind == "joint_position":
            self.emulation = ForwardPositionEmulation(tracker)

            def on_positions(msg: Float64MultiArray) -> None:
                q = np.asarray(msg.data, np.float64)
                if q.shape == (len(self.arm_names),) and np.all(np.isfinite(q)):
                    self._queue(self.emulation.command, q)
                else:
                    self._bad_command(f"{topic}: {len(q)} values (or non-finite) for {len(self.arm_names)} joints")
            self._subscribe_command(Float64MultiArray, topic, on_positions)
        elif kind == "joint_trajectory":
            from trajectory_msgs.msg import JointTrajectory  # optional: ros2

            self.emulation = TrajectoryEmulation(tracker)

            def on_trajectory(msg: JointTrajectory) -> None:
                if sorted(msg.joint_names) != sorted(self.arm_names):
                    self._bad_command(f"{topic}: joint_names {list(msg.joint_names)} are not the arm's")
                    return
                order = [list(msg.joint_names).index(n) for n in self.arm_names]
                points = [(p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec,
                           np.asarray(p.positions, np.float64)[order],
                           np.asarray(p.velocities, np.float64)[order] if len(p.velocities) else None)
                          for p in msg.points]
                if not points or any(not np.all(np.isfinite(p)) for _, p, _ in points):
                    self._bad_command(f"{topic}: empty or non-finite trajectory")
                    return
                start = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
                self._queue(lambda pts, now: self.emulation.command(pts, now, start), points)
            self._subscribe_command(JointTrajectory, topic, on_trajectory)
        elif kind == "servo_twist":
            self.emulation = ServoEmulation(tracker, m, cfg.servo_period, cfg.servo_timeout)
            service = profile.command.servo_command_type_service
            if service:  # Servo starts in joint-jog mode: twists are ignored until TWIST is selected
                # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
                from moveit_msgs.srv import ServoCommandType

                self.emulation.enabled = False

                def switch(request, response):  # noqa: ANN001, ANN202
                    response.success = request.command_type in (0, 1, 2)
                    if response.success:
                        self.emulation.enabled = request.command_type == 1
                    return response
                self.create_service(ServoCommandType, service, switch)

            def on_twist(msg: TwistStamped) -> None:
                if msg.header.frame_id not in ("", frame):
                    self._bad_command(f"{topic}: twist in frame {msg.header.frame_id!r}, expected {frame!r}")
                    return
                t = msg.twist
                v = np.array([t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z])
                stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
                if np.all(np.isfinite(v)):
                    self._queue(lambda twist, now: self.emulation.command(twist, now, stamp), v)
            self._subscribe_command(TwistStamped, topic, on_twist)
        elif kind == "cartesian_pose":
            stiffness = cfg.cartesian_stiffness * self.bandwidth ** 2
            gains = ImpedanceGains(kp_pos=stiffness, kp_rot=0.625 * stiffness)
            self.emulation = CartesianMotionEmulation(m, self.data, site, env.arm_dofs, HOME_QPOS, gains)

            def on_pose(msg: PoseStamped) -> None:
                if msg.header.frame_id not in ("", frame):
                    self._bad_command(f"{topic}: target in frame {msg.header.frame_id!r}, expected {frame!r}")
                    return
                pos, quat = pose_arrays(msg.pose)
                self._queue(lambda pq, now: self.emulation.command(pq[0], pq[1], now), (pos, quat))
            self._subscribe_command(PoseStamped, topic, on_pose)
        else:
            raise ValueError(f"profile {profile.name}: the {kind!r} interface is robot_rl's own hardware "
                             "(run arm_hardware or arm_stack)")
        self.tracker = tracker
        self.in_loop = lambda q, qd, now: (self._efforts(now), None)

    def offers_reset(self) -> bool:
        return not self.cfg.bare

    def _efforts(self, now: float) -> np.ndarray:
        """The driver's controller, or a person's hand guiding the arm (the joint command moved along with it)."""
        if self._hand is None:
            return self.emulation.efforts(now)
        t0, seconds, start, end = self._hand
        s = min(1.0, (now - t0) / seconds)
        self.tracker.set(start + (3 * s * s - 2 * s ** 3) * (end - start))  # eased: a hand starts and stops gently
        if s >= 1.0:
            self._hand = None
            self.emulation.hold_here()  # as after freedrive: the controller holds where the hand left the arm
        return self.tracker.torques()

    def _subscribe_command(self, msg_type: type, topic: str, callback: Callable[[Any], None]) -> None:
        """A command topic read by the physics loop at every step (the newest message), as a ros2_control
        controller reads its command buffer in its update. Not through the executor: with a 100 Hz command stream,
        rclpy's executor spent most of a core re-dispatching callbacks (the state stream then paused for up to
        1 s on 2 cores)."""
        if not self._polled:
            self.pre_step = self._poll_commands
        self._polled.append((PolledSubscription(self, msg_type, topic), callback))

    def _poll_commands(self) -> None:
        for sub, callback in self._polled:
            msg = sub.poll()
            if msg is not None:
                callback(msg)

    def _queue(self, command, value) -> None:  # noqa: ANN001
        """Hands a command to the physics loop (after ``command_latency``): ``command(value, now)``."""
        self.enqueue("call", lambda: command(value, self.now()))

    def _bad_command(self, what: str) -> None:
        self.bad_efforts += 1
        self.get_logger().warn(f"command ignored: {what}", throttle_duration_sec=1.0)

    # ------------------------------------------------------------------ gripper
    def _make_gripper(self, profile: ArmProfile) -> None:
        g = profile.gripper
        self._gripper_goal = 0  # id of the active GripperCommand goal (a newer goal preempts it)
        self._stopping = False
        if g.interface == "forward":
            def on_positions(msg: Float64MultiArray) -> None:
                values = np.asarray(msg.data, np.float64)
                if values.shape == (len(self.grip_names),) and np.all(np.isfinite(values)):
                    self.enqueue("gripper", float(2 * np.mean(values)))  # each finger's position, summed
            self._subscribe_command(Float64MultiArray, g.command, on_positions)
        elif g.interface in ("action", "parallel_action"):
            # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
            from control_msgs.action import GripperCommand, ParallelGripperCommand
            from rclpy.action import ActionServer, CancelResponse, GoalResponse  # optional: ros2

            self._gripper_action = ParallelGripperCommand if g.interface == "parallel_action" else GripperCommand
            self._gripper_server = ActionServer(
                self, self._gripper_action, g.command, execute_callback=self._execute_gripper,
                goal_callback=lambda goal: GoalResponse.ACCEPT, cancel_callback=lambda handle: CancelResponse.ACCEPT,
                callback_group=ReentrantCallbackGroup())
        elif g.interface not in ("none",):
            raise ValueError(f"profile {profile.name}: gripper interface {g.interface!r} is not emulated")

    def _finger_state(self) -> tuple[float, float]:
        """(mean finger position m, mean finger speed m/s)."""
        with self.lock:
            fingers_q, fingers_v = self.data.qpos[self.qadr[7:]], self.data.qvel[self.vadr[7:]]
            return float(np.mean(fingers_q)), float(np.mean(np.abs(fingers_v)))

    def _execute_gripper(self, handle):  # noqa: ANN001, ANN202
        """GripperCommand (``position``) or ParallelGripperCommand (``position[0]``): each finger joint's position
        (m); reached within the goal tolerance, stalled when the fingers stop short of it (holding an object),
        aborted when a newer goal preempts it. The result's position and effort: the fingers' (the parallel
        gripper's in ``state``, as its one joint)."""
        cfg = self.cfg
        self._gripper_goal += 1
        me = self._gripper_goal
        command = handle.request.command
        parallel = isinstance(command, JointState)
        goal = float(np.clip(command.position[0] if parallel else command.position, 0.0, FINGER_MAX))
        self.enqueue("gripper", 2 * goal)
        result = self._gripper_action.Result()
        slow_since = None
        deadline = time.monotonic() + 10.0
        while True:
            time.sleep(0.01)
            pos, speed = self._finger_state()
            effort = float(np.mean(np.abs(self.data.actuator_force[self.env.grip_ctrl])))
            if parallel:
                result.state = JointState(name=self.grip_names[:1], position=[pos], effort=[effort])
            else:
                result.position, result.effort = pos, effort
            if me != self._gripper_goal or self._stopping:
                handle.abort()
                return result
            if handle.is_cancel_requested:
                handle.canceled()
                return result
            if abs(pos - goal) < cfg.gripper_goal_tolerance:
                result.reached_goal = True
                handle.succeed()
                return result
            now = time.monotonic()
            slow_since = (slow_since or now) if speed < cfg.gripper_stall_velocity else None
            if slow_since is not None and now - slow_since > cfg.gripper_stall_timeout or now > deadline:
                result.stalled = True
                handle.succeed()  # gripper_action_controller with allow_stalling: a grasp is a success
                return result

    def close(self) -> None:
        super().close()  # the physics loop has stopped: nothing polls the command subscriptions any more
        for sub, _ in self._polled:
            sub.close()

    def stopping(self) -> None:
        """The process is stopping: a gripper goal still executing is aborted now, while the server exists."""
        self._stopping = True
        time.sleep(0.05)

    # ------------------------------------------------------------------ controller manager
    def _make_controller_manager(self, profile: ArmProfile) -> None:
        controllers = {"joint_state_broadcaster": "joint_state_broadcaster/JointStateBroadcaster"}
        if profile.wrench.topic:
            controllers["force_torque_sensor_broadcaster"] = ("force_torque_sensor_broadcaster/"
                                                              "ForceTorqueSensorBroadcaster")
        if profile.command.controller:
            controllers[profile.command.controller] = CONTROLLER_TYPES.get(profile.command.interface, "")
        if profile.gripper.controller:
            controllers[profile.gripper.controller] = {
                "action": "position_controllers/GripperActionController",
                "parallel_action": "parallel_gripper_action_controller/GripperActionController",
            }.get(profile.gripper.interface, "forward_command_controller/ForwardCommandController")
        serve_list_controllers(self, profile.command.controller_manager, controllers,
                               tuple(self.cfg.inactive_controllers))

    # ------------------------------------------------------------------ state out
    def _publish_state(self, step: int, stamp: float) -> None:
        m, d = self.model, self.data
        if self.scene is not None and step % self.scene_every == 0:
            self._serve_scene()
        stamp += self._stamp_offset
        paused = self.now() < self._state_paused_until
        if not paused:
            self._publish_joints(stamp)
        cam_step = bool(self.pub_cams) and step % self.cam_every == 0
        tf_step = step % self.tf_every == 0 and not paused
        aux_step = step % self.aux_every == 0
        if aux_step or cam_step or tf_step:
            mujoco.mj_forward(m, d)
        if tf_step:
            self._publish_object_frames(stamp)
        if aux_step:
            if self.pub_wrench is not None:
                ft = d.sensordata[self.env.ft_adr]
                wr = WrenchStamped()
                wr.header.stamp, wr.header.frame_id = to_stamp(stamp), self.cfg.frame_prefix + self.wrench_frame
                wr.wrench.force.x, wr.wrench.force.y, wr.wrench.force.z = (float(v) for v in ft[:3])
                wr.wrench.torque.x, wr.wrench.torque.y, wr.wrench.torque.z = (float(v) for v in ft[3:])
                self._publish(self.pub_wrench, wr)
            if self.pub_success is not None:
                _, success, _ = self.env._evaluate()
                self._publish(self.pub_success, Bool(data=bool(success)))
        if cam_step:
            self._publish_cameras(stamp)

    def _publish_object_frames(self, stamp: float) -> None:
        """The moving links (robot_state_publisher) and the task object under the base frame (a tracker)."""
        m, d, b = self.model, self.data, self.obj_body
        extra = []
        if b >= 0 and not self.cfg.bare:  # a tracker's frame: not the driver's
            base = self.base_body
            pos, quat = relative_pose(d.xpos[base], d.xquat[base], d.xpos[b], d.xquat[b])
            extra.append((self.profile.base_frame, m.body(b).name, pos, quat))
        tf = self.tf.moving(d, to_stamp(stamp), extra)
        if tf is not None:
            self._publish(self.tf.pub, tf)

    def _serve_scene(self) -> None:
        """In the physics loop: the person's requests, then what the person sees (scene_channel)."""
        m, d, env = self.model, self.data, self.env
        now = self.now()
        for request in self.scene.take():
            kind = request.get("do")
            if kind == "reset":
                env._reset_objects(env.np_random)
                for sl in self.free_dofs:
                    d.qvel[sl] = 0.0
                mujoco.mj_forward(m, d)
            elif kind == "move_arm":
                end = np.asarray(request["joints"], np.float64)
                self._hand = (now, max(float(request.get("seconds", 1.0)), self.dt), self.tracker.measured(), end)
            elif kind == "pause_state":
                self._state_paused_until = now + float(request.get("seconds", 1.0))
            elif kind == "clock_jump":  # the host's clock stepped (NTP): every stamp from now on
                self._stamp_offset += float(request.get("seconds", 0.0))
            else:
                self.get_logger().warn(f"scene request {request!r} not understood")
        mujoco.mj_forward(m, d)
        base = self.base_body
        tool, _ = relative_pose(d.xpos[base], d.xquat[base], d.site_xpos[env.ee_site], np.array([1.0, 0, 0, 0]))
        seen = {"t": now, "success": bool(env._evaluate()[1]), "tool": tool.tolist(),
                "joints": self.tracker.measured().tolist(), "moving_by_hand": self._hand is not None,
                "gripper": float(env.gripper_opening())}
        if hasattr(env, "grasped"):
            seen["grasped"] = bool(env.grasped())
        if self.obj_body >= 0:
            b = self.obj_body
            seen["object"] = relative_pose(d.xpos[base], d.xquat[base], d.xpos[b], d.xquat[b])[0].tolist()
        self.scene.show(seen)

    def _publish_joints(self, stamp: float) -> None:
        d, cfg = self.data, self.cfg
        pos, vel = d.qpos[self.qadr].copy(), d.qvel[self.vadr].copy()
        if cfg.joint_noise > 0:
            pos += self.rng.normal(0.0, cfg.joint_noise, pos.shape)
            vel += self.rng.normal(0.0, cfg.joint_noise, vel.shape)
        effort = np.concatenate([d.ctrl[self.env.arm_ctrl], d.actuator_force[self.env.grip_ctrl]])
        arm = self.arm_index
        grip = 7 + np.arange(len(self.grip_names))
        ts = to_stamp(stamp)
        if self.pub_gripper_joints is None:
            rows = np.concatenate([arm, grip])
            msg = JointState(name=self._joint_msg.name, position=pos[rows].tolist(), velocity=vel[rows].tolist(),
                             effort=effort[rows].tolist())
            msg.header.stamp = ts
            self._publish(self.pub_joint, msg)
            return
        msg = JointState(name=self.arm_names, position=pos[arm].tolist(), velocity=vel[arm].tolist(),
                         effort=effort[arm].tolist())
        msg.header.stamp = ts
        self._publish(self.pub_joint, msg)
        fingers = JointState(name=self.grip_names, position=pos[grip].tolist(), velocity=vel[grip].tolist(),
                             effort=effort[grip].tolist())
        fingers.header.stamp = ts
        self._publish(self.pub_gripper_joints, fingers)

    def _publish_diag(self, window: float, behind: float) -> None:
        """None: the sim hardware's diagnostics are robot_rl's, not part of a driver's interface."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``robot-rl-arm-driver`` (ROS 2 executable ``arm_driver``)."""
    return run_node(ArmDriverNode, argv, executor="multi", threads=3)

