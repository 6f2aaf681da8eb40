"""A robot profile checked against the live ROS 2 graph before anything moves: every topic it names exists with
the message type it expects (published for state, subscribed for commands), the joint names are in the joint
states, the frames are in TF and in the URDF, the controllers it names are active, and robot_rl's safety node is
up in front of them with this robot's profile. Every problem is reported at once: one
:class:`~robot_rl.config.ConfigError`, a line per problem, each naming the profile field (``robot-rl train`` then
exits with code 2). The first check that times out has waited the whole timeout for discovery; the checks after it
wait at most :data:`AFTER_A_FAILURE` s, so a graph that is down is refused in one timeout, not one per check.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from robot_rl.config import ConfigError
from robot_rl.robots.kinematics import UrdfKinematics
from robot_rl.robots.profile import Profile, camera_info_topic, load_profile
from robot_rl.ros.query import query
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


AFTER_A_FAILURE = 2.0
"""Seconds each further check may wait once one has failed (discovery has had the full timeout by then)."""
SAFETY_TOPICS = {"arm": [("policy/target_pose", "geometry_msgs/msg/PoseStamped"),
                         ("policy/gripper", "std_msgs/msg/Float64")],
                 "car": [("policy/cmd_vel", "geometry_msgs/msg/Twist")]}
"""What the env publishes and robot_rl's safety node must take (node-relative: the env's namespace)."""


class ProfileCheck:
    """Checks of one profile on ``node`` (an rclpy node of the caller's, spinning), each waiting up to ``timeout``
    for discovery or a first message."""

    def __init__(self, node: Any, profile: Profile, timeout: float = 10.0) -> None:
        self.node, self.profile, self.timeout = node, profile, timeout

    def fail(self, field: str, message: str) -> ConfigError:
        return ConfigError(f"profile {self.profile.name}: {field}: {message}")

    def _all(self, checks: list[Callable[[], Any]]) -> list[Any]:
        """Runs every check (each returns a value or raises ConfigError); their values, or one ConfigError with a
        line per problem."""
        problems, values = [], []
        for check in checks:
            try:
                values.append(check())
            except ConfigError as exc:
                problems.extend(line for line in str(exc).splitlines() if line not in problems)
                values.append(None)
                self.timeout = min(self.timeout, AFTER_A_FAILURE)
        if problems:
            raise ConfigError("\n".join(problems))
        return values

    def _resolve(self, topic: str) -> str:
        return self.node.resolve_topic_name(topic)

    # ------------------------------------------------------------------ topics
    def published(self, field: str, topic: str, msg_type: str, what: str = "the driver") -> None:
        """Somebody (``what``) publishes ``topic`` with ``msg_type``."""
        self._endpoint(field, topic, msg_type, self.node.get_publishers_info_by_topic,
                       "{name} carries {types}, not {want}",
                       "nobody publishes {name} (waited {t} s; is " + what + " up?)")

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
        """Each ``(field, controller, manager)`` is listed active by ``<manager>/list_controllers`` (every field
        that is not: one line each)."""
        wanted = [c for c in checks if c[1]]
        if not wanted:
            return
        try:
            # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
            from controller_manager_msgs.srv import ListControllers
        except ImportError:
            raise self.fail(wanted[0][0], "checking controllers needs controller_manager_msgs "
                                          "(bash scripts/build_ros_msgs.sh)") from None
        listed: dict[str, dict[str, str]] = {}

        def states_of(field: str, manager: str) -> dict[str, str]:
            if manager not in listed:
                service = f"{manager.rstrip('/')}/list_controllers"
                listed[manager] = self._list_controllers(ListControllers, field, service)
            return listed[manager]

        def check(field: str, controller: str, manager: str) -> None:
            states = states_of(field, manager)
            names = ", ".join(f"{n} ({s})" for n, s in sorted(states.items()))
            if controller not in states:
                raise self.fail(field, f"controller {controller!r} is not loaded (the controller manager lists "
                                       f"{names})")
            if states[controller] != "active":
                raise self.fail(field, f"controller {controller!r} is {states[controller]}, not active (activate it, "
                                       f"e.g. ros2 control switch_controllers --activate {controller})")
        self._all([lambda c=c: check(*c) for c in wanted])

    def _list_controllers(self, srv_type: type, field: str, service: str) -> dict[str, str]:
        """Controller name -> state, from the controller manager's ``list_controllers`` service."""
        try:
            answer = query(self.node, srv_type, service, srv_type.Request(), self.timeout)
        except TimeoutError:
            raise self.fail(field, f"no {service} service (is the controller manager up?)") from None
        if answer is None:
            raise self.fail(field, f"{service} did not answer in {self.timeout:.0f} s")
        return {c.name: c.state for c in answer.controller}

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
        """All checks of an arm profile, the safety node's included; returns the URDF kinematics."""
        p = self.profile
        checks: list[Callable[[], Any]] = [
            lambda: self.published("joint_states.topic", p.joint_states.topic, "sensor_msgs/msg/JointState"),
            lambda: self.joint_names("joint_states.names", p.joint_states.topic, p.joint_states.names)]
        if p.gripper.joints:
            topic = p.gripper.joint_states_topic or p.joint_states.topic
            checks += [lambda: self.published("gripper.joint_states_topic", topic, "sensor_msgs/msg/JointState"),
                       lambda: self.joint_names("gripper.joints", topic, p.gripper.joints)]
        if p.wrench.topic:
            checks.append(lambda: self.published("wrench.topic", p.wrench.topic, "geometry_msgs/msg/WrenchStamped"))
        for i, cam in enumerate(p.cameras):
            image = "sensor_msgs/msg/CompressedImage" if cam.compressed else "sensor_msgs/msg/Image"
            checks += [lambda i=i, cam=cam, image=image: self.published(f"cameras[{i}].topic", cam.topic, image),
                       lambda i=i, cam=cam: self.published(f"cameras[{i}].topic", camera_info_topic(cam),
                                                           "sensor_msgs/msg/CameraInfo")]
        if p.success.source == "topic":
            checks.append(lambda: self.published("success.topic", p.success.topic, "std_msgs/msg/Bool"))
        frames = [("tool_frame", p.tool_frame)] + [(f"objects[{i}].frame", o.frame) for i, o in enumerate(p.objects)]
        if p.wrench.frame:
            frames.append(("wrench.frame", p.wrench.frame))
        checks += [self.urdf, lambda: self.frames(frames)]
        if p.command.interface in ARM_COMMAND_TYPES:
            checks.append(lambda: self.subscribed("command.topic", p.command.topic,
                                                  ARM_COMMAND_TYPES[p.command.interface],
                                                  f"the {p.command.interface} controller"))
        if p.command.servo_command_type_service:
            checks.append(lambda: self.service("command.servo_command_type_service",
                                               p.command.servo_command_type_service,
                                               "moveit_msgs/srv/ServoCommandType", "the servo node"))
        if p.gripper.interface == "forward":
            checks.append(lambda: self.subscribed("gripper.command", p.gripper.command,
                                                  "std_msgs/msg/Float64MultiArray", "the gripper controller"))
        elif p.gripper.interface in GRIPPER_ACTIONS:
            checks.append(lambda: self.action("gripper.command", p.gripper.command,
                                              GRIPPER_ACTIONS[p.gripper.interface], "the gripper's action server"))
        checks.append(lambda: self.controllers([
            ("command.controller", p.command.controller, p.command.controller_manager),
            ("gripper.controller", p.gripper.controller, p.command.controller_manager)]))
        return self._all(checks)[checks.index(self.urdf)]

    def with_safety(self) -> Any:
        """All checks of the profile (:meth:`arm` or :meth:`car`) and of the safety node in front of it: what
        ``robot-rl train``'s preflight and ``robot-rl robot check`` run; every problem at once. Returns what
        :meth:`arm` returns (the URDF kinematics)."""
        return self._all([self.arm if self.profile.kind == "arm" else self.car, self.safety])[0]

    def safety(self) -> None:
        """robot_rl's safety node runs in the env's namespace, takes the env's commands and drives this robot's
        driver: its ``profile`` parameter names a profile with this profile's command interface and topic."""
        checks: list[Callable[[], Any]] = [
            lambda: self.published("safety node", "safety_state", "std_msgs/msg/String", "robot_rl's safety node "
                                   "(robot-rl launch launch/robot_arm.launch.yaml profile:=...)")]
        checks += [lambda topic=topic, kind=kind: self.subscribed("safety node", topic, kind, "robot_rl's safety node")
                   for topic, kind in SAFETY_TOPICS[self.profile.kind]]
        checks.append(self._safety_profile)
        self._all(checks)

    def _safety_profile(self) -> None:
        """The safety node's ``profile`` parameter commands what this profile commands."""
        from rcl_interfaces.srv import GetParameters  # optional: ros2

        topic = self._resolve("safety_state")
        deadline = time.monotonic() + self.timeout
        while True:  # an endpoint is discovered before its node's name: wait for the name
            infos = self.node.get_publishers_info_by_topic(topic)
            if not infos:
                return  # reported by the topic check
            info = infos[0]
            if not info.node_name.startswith("_NODE_NAME_UNKNOWN"):
                break
            if time.monotonic() > deadline:
                raise self.fail("safety node", f"the publisher of {topic} did not make its node name known within "
                                               f"{self.timeout:.0f} s")
            time.sleep(0.05)
        name = f"{info.node_namespace.rstrip('/')}/{info.node_name}"
        try:
            answer = query(self.node, GetParameters, f"{name}/get_parameters", GetParameters.Request(names=["profile"]),
                           self.timeout)
        except TimeoutError:
            raise self.fail("safety node", f"{name} answers no parameter requests (is it robot_rl's arm_safety?)") \
                from None
        if answer is None:
            raise self.fail("safety node", f"{name}/get_parameters did not answer in {self.timeout:.0f} s")
        values = answer.values
        given = values[0].string_value if values else ""
        if not given:
            raise self.fail("safety node", f"{name} runs without a profile: it commands robot_rl's own controller "
                                           f"topics, not this driver (start it with profile:={self.profile.name})")
        try:
            theirs = load_profile(given, self.profile.kind)
        except ConfigError as exc:
            raise self.fail("safety node", f"{name}'s profile {given!r} does not load: {exc}") from None
        mine = self.profile.command
        if (theirs.command.interface, theirs.command.topic) != (mine.interface, mine.topic):
            raise self.fail("safety node", f"{name} runs profile {given!r}, which commands {theirs.command.interface} "
                                           f"on {theirs.command.topic}; this profile commands {mine.interface} on "
                                           f"{mine.topic}")

    def car(self) -> None:
        """All checks of a car profile: odometry, scan and collision topics, the pose in TF, the scan's frame on
        the car, the driver's command topic and controller."""
        # optional: ros2
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import LaserScan

        p = self.profile

        def scan_frame() -> None:
            scan = self.first_message("scan.topic", p.scan.topic, LaserScan,  # best effort: takes a lidar's either way
                                      QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
            self.frames([("scan.topic", scan.header.frame_id.lstrip("/"))])

        checks: list[Callable[[], Any]] = [
            lambda: self.published("odom.topic", p.odom.topic, "nav_msgs/msg/Odometry"),
            lambda: self.published("scan.topic", p.scan.topic, "sensor_msgs/msg/LaserScan")]
        if p.collision.source == "topic":
            checks.append(lambda: self.published("collision.topic", p.collision.topic, "std_msgs/msg/Bool"))
        checks += [lambda: self.frames([("base_frame", p.base_frame)], root=p.map_frame), scan_frame,
                   lambda: self.subscribed("command.topic", p.command.topic, CAR_COMMAND_TYPES[p.command.interface],
                                           f"the {p.command.interface} driver"),
                   lambda: self.controllers([("command.controller", p.command.controller,
                                              p.command.controller_manager)])]
        self._all(checks)
