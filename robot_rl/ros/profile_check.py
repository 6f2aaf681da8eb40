"""A robot profile checked against the live ROS 2 graph before anything moves: every topic it names exists with
the message type it expects (published for state, subscribed for commands), the joint names are in the joint
states, the frames are in TF and in the URDF, and the controllers it names are active. The first problem is one
:class:`~robot_rl.config.ConfigError` naming the profile field (``robot-rl train`` then exits with code 2).
"""

from __future__ import annotations

import time
from typing import Any

from robot_rl.config import ConfigError
from robot_rl.robots.kinematics import UrdfKinematics
from robot_rl.robots.profile import Profile, camera_info_topic
from robot_rl.ros.tf_buffer import TfBuffer, TfError

ARM_COMMAND_TYPES = {
    "cartesian_pose": "geometry_msgs/msg/PoseStamped",
    "servo_twist": "geometry_msgs/msg/TwistStamped",
    "joint_position": "std_msgs/msg/Float64MultiArray",
    "joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
}
GRIPPER_ACTIONS = {
    "action": "control_msgs/action/GripperCommand",
    "parallel_action": "control_msgs/action/ParallelGripperCommand",
}
CAR_COMMAND_TYPES = {
    "diff_drive": "geometry_msgs/msg/TwistStamped",
    "ackermann": "ackermann_msgs/msg/AckermannDriveStamped",
}


class ProfileCheck:
    """Checks of one profile on ``node`` (an rclpy node of the caller's, spinning), each waiting up to ``timeout``
    for discovery or a first message."""

    def __init__(self, node: Any, profile: Profile, timeout: float = 10.0) -> None:
        self.node, self.profile, self.timeout = node, profile, timeout

    def fail(self, field: str, message: str) -> ConfigError:
        return ConfigError(f"profile {self.profile.name}: {field}: {message}")

    def _resolve(self, topic: str) -> str:
        return self.node.resolve_topic_name(topic)

    # ------------------------------------------------------------------ topics
    def published(self, field: str, topic: str, msg_type: str) -> None:
        """Somebody publishes ``topic`` with ``msg_type``."""
        self._endpoint(field, topic, msg_type, self.node.get_publishers_info_by_topic,
                       "{name} carries {types}, not {want}",
                       "nobody publishes {name} (waited {t} s; is the driver up?)")

    def subscribed(self, field: str, topic: str, msg_type: str, what: str) -> None:
        """Somebody (the driver's controller) subscribes ``topic`` with ``msg_type``."""
        self._endpoint(field, topic, msg_type, self.node.get_subscriptions_info_by_topic,
                       what + " on {name} takes {types}, not {want}",
                       "nobody subscribes {name} (waited {t} s; is " + what + " loaded?)")

    def _endpoint(self, field: str, topic: str, msg_type: str, infos_of: Any, wrong: str, missing: str) -> None:
        """Waits (up to the timeout) for an endpoint of ``topic`` in the graph and checks its type."""
        name = self._resolve(topic)
        deadline = time.monotonic() + self.timeout
        while True:
            infos = infos_of(name)
            if infos:
                types = sorted({i.topic_type for i in infos})
                if msg_type not in types:
                    raise self.fail(field, wrong.format(name=name, types=", ".join(types), want=msg_type))
                return
            if time.monotonic() > deadline:
                raise self.fail(field, missing.format(name=name, t=f"{self.timeout:.0f}"))
            time.sleep(0.05)

    def first_message(self, field: str, topic: str, msg_type: type, qos: Any = 10) -> Any:
        got: list[Any] = []
        sub = self.node.create_subscription(msg_type, topic, got.append, qos)
        try:
            deadline = time.monotonic() + self.timeout
            while not got:
                if time.monotonic() > deadline:
                    raise self.fail(field, f"no message on {self._resolve(topic)} within {self.timeout:.0f} s")
                time.sleep(0.02)
            return got[0]
        finally:
            self.node.destroy_subscription(sub)

    def joint_names(self, field: str, topic: str, names: tuple[str, ...]) -> None:
        """Every joint of ``names`` is in a message of ``topic`` (a driver may publish several layouts)."""
        from sensor_msgs.msg import JointState  # optional: ros2

        seen: set[str] = set()
        got: list[Any] = []
        sub = self.node.create_subscription(JointState, topic, got.append, 10)
        try:
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                while got:
                    layout = set(got.pop().name)
                    if set(names) <= layout:
                        return
                    seen |= layout
                time.sleep(0.02)
        finally:
            self.node.destroy_subscription(sub)
        missing = [n for n in names if n not in seen]
        raise self.fail(field, f"joints {missing} are not in {self._resolve(topic)} (it has {sorted(seen)})")

    # ------------------------------------------------------------------ TF, URDF, controllers
    def frames(self, checks: list[tuple[str, str]], root: str = "") -> None:
        """Each ``(field, frame)`` is connected to ``root`` (default: the base frame) in TF (waits for /tf and
        /tf_static)."""
        buffer = TfBuffer()
        buffer.subscribe(self.node)
        base = root or self.profile.base_frame
        deadline = time.monotonic() + self.timeout
        for field, frame in checks:
            try:
                buffer.wait_lookup(base, frame, max(0.0, deadline - time.monotonic()))
            except TfError as exc:
                known = sorted(buffer.frames())
                if frame not in known:
                    raise self.fail(field, f"frame {frame!r} is not in the TF tree (frames: {known})") from None
                raise self.fail(field, f"no transform {base} -> {frame}: {exc}") from None

    def urdf(self) -> Any:
        """The URDF's kinematics of the arm (joints and frames in the URDF)."""
        # optional: ros2
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from std_msgs.msg import String

        p = self.profile
        self.published("robot_description", p.robot_description, "std_msgs/msg/String")
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        msg = self.first_message("robot_description", p.robot_description, String, qos)
        try:
            return UrdfKinematics(msg.data, p.joint_states.names, p.base_frame, p.tool_frame)
        except ValueError as exc:
            text = str(exc)
            field = ("joint_states.names" if text.startswith("joints") else
                     "tool_frame" if repr(p.tool_frame) in text else
                     "base_frame" if repr(p.base_frame) in text else "robot_description")
            raise self.fail(field, f"{text} ({p.robot_description})") from None

    def controllers(self, checks: list[tuple[str, str, str]]) -> None:
        """Each ``(field, controller, manager)`` is listed active by ``<manager>/list_controllers``."""
        wanted = [c for c in checks if c[1]]
        if not wanted:
            return
        try:
            # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
            from controller_manager_msgs.srv import ListControllers
        except ImportError:
            raise self.fail(wanted[0][0], "checking controllers needs controller_manager_msgs "
                                          "(bash scripts/build_ros_msgs.sh)") from None
        for field, controller, manager in wanted:
            service = f"{manager.rstrip('/')}/list_controllers"
            client = self.node.create_client(ListControllers, service)
            try:
                if not client.wait_for_service(timeout_sec=self.timeout):
                    raise self.fail(field, f"no {service} service (is the controller manager up?)")
                future = client.call_async(ListControllers.Request())
                deadline = time.monotonic() + self.timeout
                while not future.done():
                    if time.monotonic() > deadline:
                        raise self.fail(field, f"{service} did not answer in {self.timeout:.0f} s")
                    time.sleep(0.02)
                states = {c.name: c.state for c in future.result().controller}
            finally:
                self.node.destroy_client(client)
            listed = ", ".join(f"{n} ({s})" for n, s in sorted(states.items()))
            if controller not in states:
                raise self.fail(field, f"controller {controller!r} is not loaded (the controller manager lists "
                                       f"{listed})")
            if states[controller] != "active":
                raise self.fail(field, f"controller {controller!r} is {states[controller]}, not active (activate it, "
                                       f"e.g. ros2 control switch_controllers --activate {controller})")

    def service(self, field: str, name: str, srv_type: str, what: str) -> None:
        """A service ``name`` of type ``srv_type`` is offered (graph introspection: no client is made)."""
        full = self.node.resolve_service_name(name)
        deadline = time.monotonic() + self.timeout
        while True:
            types = dict(self.node.get_service_names_and_types()).get(full)
            if types:
                if srv_type not in types:
                    raise self.fail(field, f"{full} is a {', '.join(types)} service, not {srv_type}")
                return
            if time.monotonic() > deadline:
                raise self.fail(field, f"no {full} service within {self.timeout:.0f} s (is {what} up?)")
            time.sleep(0.05)

    def action(self, field: str, name: str, action_type: str, what: str) -> None:
        """An action server ``name`` of ``action_type`` (its send_goal service is offered)."""
        self.service(field, f"{name}/_action/send_goal", f"{action_type}_SendGoal", what)

    # ------------------------------------------------------------------ whole profiles
    def arm(self) -> Any:
        """All checks of an arm profile; returns the URDF kinematics."""
        p = self.profile
        self.published("joint_states.topic", p.joint_states.topic, "sensor_msgs/msg/JointState")
        self.joint_names("joint_states.names", p.joint_states.topic, p.joint_states.names)
        if p.gripper.joints:
            topic = p.gripper.joint_states_topic or p.joint_states.topic
            self.published("gripper.joint_states_topic", topic, "sensor_msgs/msg/JointState")
            self.joint_names("gripper.joints", topic, p.gripper.joints)
        if p.wrench.topic:
            self.published("wrench.topic", p.wrench.topic, "geometry_msgs/msg/WrenchStamped")
        for i, cam in enumerate(p.cameras):
            self.published(f"cameras[{i}].topic", cam.topic,
                           "sensor_msgs/msg/CompressedImage" if cam.compressed else "sensor_msgs/msg/Image")
            self.published(f"cameras[{i}].topic", camera_info_topic(cam), "sensor_msgs/msg/CameraInfo")
        if p.success.source == "topic":
            self.published("success.topic", p.success.topic, "std_msgs/msg/Bool")
        kin = self.urdf()
        frames = [("tool_frame", p.tool_frame)] + [(f"objects[{i}].frame", o.frame) for i, o in enumerate(p.objects)]
        if p.wrench.frame:
            frames.append(("wrench.frame", p.wrench.frame))
        self.frames(frames)
        if p.command.interface in ARM_COMMAND_TYPES:
            self.subscribed("command.topic", p.command.topic, ARM_COMMAND_TYPES[p.command.interface],
                            f"the {p.command.interface} controller")
        if p.command.servo_command_type_service:
            self.service("command.servo_command_type_service", p.command.servo_command_type_service,
                         "moveit_msgs/srv/ServoCommandType", "the servo node")
        if p.gripper.interface == "forward":
            self.subscribed("gripper.command", p.gripper.command, "std_msgs/msg/Float64MultiArray",
                            "the gripper controller")
        elif p.gripper.interface in GRIPPER_ACTIONS:
            self.action("gripper.command", p.gripper.command, GRIPPER_ACTIONS[p.gripper.interface],
                        "the gripper's action server")
        self.controllers([("command.controller", p.command.controller, p.command.controller_manager),
                          ("gripper.controller", p.gripper.controller, p.command.controller_manager)])
        return kin

    def car(self) -> None:
        """All checks of a car profile: odometry, scan and collision topics, the pose in TF, the scan's frame on
        the car, the driver's command topic and controller."""
        p = self.profile
        self.published("odom.topic", p.odom.topic, "nav_msgs/msg/Odometry")
        self.published("scan.topic", p.scan.topic, "sensor_msgs/msg/LaserScan")
        if p.collision.source == "topic":
            self.published("collision.topic", p.collision.topic, "std_msgs/msg/Bool")
        self.frames([("base_frame", p.base_frame)], root=p.map_frame)
        # optional: ros2
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import LaserScan

        scan = self.first_message("scan.topic", p.scan.topic, LaserScan,  # best effort: takes a lidar's either way
                                  QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
        self.frames([("scan.topic", scan.header.frame_id.lstrip("/"))])
        self.subscribed("command.topic", p.command.topic, CAR_COMMAND_TYPES[p.command.interface],
                        f"the {p.command.interface} driver")
        self.controllers([("command.controller", p.command.controller, p.command.controller_manager)])

