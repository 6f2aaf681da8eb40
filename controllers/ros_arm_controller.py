"""Cartesian impedance controller node: target pose in, joint efforts out, evaluated on every joint state.

The control law is :class:`robot_rl_controllers.impedance.MujocoArmState` — the same code the sim arm env runs at
every physics step — with MuJoCo as the kinematics/dynamics library on the arm's own model (no task objects: a
payload shows up as a disturbance, as on a real arm).

Topics (node-relative): subscribes ``joint_states`` (sensor_msgs/JointState), ``controller/target_pose``
(geometry_msgs/PoseStamped, robot base frame) and ``controller/gripper`` (std_msgs/Float64, opening in m);
publishes ``joint_command`` (sensor_msgs/JointState with ``effort``; ``header.stamp`` = the stamp of the target
being tracked, for latency tracing), ``effort_controller/commands`` (std_msgs/Float64MultiArray, the ros2_control
effort-controller form; only with ``publish_array``) and ``gripper_command`` (std_msgs/Float64). Every joint state
produces one effort command (500 Hz against the sim hardware node); a new target also produces one immediately.
Until the first target arrives the controller holds the pose it first measured. Gains and limits are ROS 2
parameters (``gains.kp_pos`` ...) and can be changed while running.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import ClassVar

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64, Float64MultiArray  # noqa: E402

from robot_rl.ros.fast_sub import FastSubscription  # noqa: E402
from robot_rl.ros.msgs import pose_arrays  # noqa: E402
from robot_rl.ros.node import run_node  # noqa: E402
from robot_rl.ros.params import declare_config  # noqa: E402
from robot_rl_controllers.arm_model import ARM_JOINTS, EE_SITE, FINGER_JOINTS, FINGER_MAX, HOME_QPOS, build_arm_xml  # noqa
from robot_rl_controllers.impedance import ImpedanceGains, MujocoArmState  # noqa: E402


@dataclass
class ArmControllerConfig:
    """Parameters of the impedance controller node (all ROS 2 parameters)."""

    startup_only: ClassVar[tuple[str, ...]] = ("publish_array",)
    """Read when the node starts (which topics it advertises): read-only parameters."""

    gains: ImpedanceGains = field(default_factory=ImpedanceGains)
    """Impedance gains and torque limits (parameters ``gains.<field>``); same defaults as the sim arm."""
    posture: tuple[float, ...] = tuple(float(v) for v in HOME_QPOS)
    """Nullspace posture q0 (rad, 7 joints)."""
    max_opening: float = 2 * FINGER_MAX
    """Gripper opening range [0, max_opening] (m)."""
    gripper_max_speed: float = 0.0
    """Largest change of the gripper command per second (m/s); 0 = no rate limit (as in the sim env)."""
    publish_array: bool = False
    """Also publish efforts as std_msgs/Float64MultiArray on effort_controller/commands (advertised only then)."""

    def validate(self) -> None:
        self.gains.validate()
        if len(self.posture) != len(ARM_JOINTS):
            raise ValueError(f"posture needs {len(ARM_JOINTS)} values")
        if self.max_opening <= 0 or self.gripper_max_speed < 0:
            raise ValueError("max_opening must be > 0 and gripper_max_speed >= 0")


class ArmControllerNode(Node):
    """The impedance controller (see the module docstring)."""

    def __init__(self, cfg: ArmControllerConfig | None = None, name: str = "arm_controller",
                 topics: bool = True) -> None:
        """``topics=False``: no subscriptions or command publishers; the owner calls ``update``/``set_target``/
        ``set_gripper`` and routes ``send_gripper`` (the composed arm stack, ``robot_rl_sim.ros_arm_stack``)."""
        super().__init__(name)
        self.cfg = declare_config(self, cfg or ArmControllerConfig())
        self.model = mujoco.MjModel.from_xml_string(build_arm_xml(()))
        self.data = mujoco.MjData(self.model)
        m = self.model
        names = list(ARM_JOINTS) + list(FINGER_JOINTS)
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in names]
        self.qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self.vadr = np.array([m.jnt_dofadr[j] for j in jids])
        self.joint_names = names
        site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, EE_SITE)
        self.arm = MujocoArmState(m, site, range(int(self.vadr[0]), int(self.vadr[0]) + len(ARM_JOINTS)),
                                  self.cfg.gains)
        self.lock = threading.RLock()  # _on_target holds it across set_target
        self.target_pos: np.ndarray | None = None
        self.target_quat: np.ndarray | None = None
        self.target_stamp = None
        self.have_state = False
        self.gripper_goal: float | None = None
        self.gripper_cmd: float | None = None
        self.last_state_time: float | None = None
        self.updates = 0
        self._names: list[str] = []
        self._order: list[int] = []
        self._out = JointState(name=list(ARM_JOINTS))
        self.send_gripper = lambda opening: None
        """Where gripper commands go (the composed arm stack hands them to the hardware directly)."""
        self.subs: list[FastSubscription] = []
        if not topics:
            return
        self.pub_effort = self.create_publisher(JointState, "joint_command", 10)
        self.pub_array = (self.create_publisher(Float64MultiArray, "effort_controller/commands", 10)
                          if self.cfg.publish_array else None)
        pub_gripper = self.create_publisher(Float64, "gripper_command", 10)
        self.send_gripper = lambda opening: pub_gripper.publish(Float64(data=opening))
        # The 500 Hz state stream gets its own thread (robot_rl.ros.fast_sub) and depth 1: when the controller
        # falls behind it skips to the newest state instead of working off a backlog.
        self.subs = [FastSubscription(self, JointState, "joint_states", self._on_state),
                     FastSubscription(self, PoseStamped, "controller/target_pose", self._on_target)]
        self.create_subscription(Float64, "controller/gripper", self._on_gripper, 10)

    def _on_state(self, msg: JointState) -> None:
        if msg.name != self._names:
            index = {n: i for i, n in enumerate(msg.name)}
            if not all(n in index for n in self.joint_names):
                return
            self._names, self._order = list(msg.name), [index[n] for n in self.joint_names]
        pos, vel = np.asarray(msg.position)[self._order], np.asarray(msg.velocity)[self._order]
        tau = self.update(pos, vel, msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
        if tau is not None:
            self._publish_effort(tau)

    def update(self, pos: np.ndarray, vel: np.ndarray, t: float) -> np.ndarray | None:
        """One control update from the measured arm + finger joint positions/velocities (the 9 joints of
        ``joint_names``) at time ``t`` (s): the efforts for the current target, None for a non-finite state.
        The node calls it on every joint state; the composed arm stack calls it in the physics loop."""
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(vel))):
            self.get_logger().error("non-finite joint state ignored", throttle_duration_sec=1.0)
            return None
        with self.lock:
            d = self.data
            d.qpos[self.qadr], d.qvel[self.vadr] = pos, vel
            mujoco.mj_forward(self.model, d)
            self.arm.update(d)
            self.have_state = True
            if self.target_pos is None:  # hold the first measured pose until a target arrives
                self.target_pos, self.target_quat = self.arm.pos.copy(), self.arm.quat.copy()
            tau = self._torques()
            self._step_gripper(t)
            return tau

    def _on_target(self, msg: PoseStamped) -> None:
        pos, quat = pose_arrays(msg.pose)
        with self.lock:
            if self.set_target(pos, quat, msg.header.stamp) and self.have_state:
                self._publish_effort(self._torques())

    def set_target(self, pos: np.ndarray, quat: np.ndarray, stamp: object = None) -> bool:
        """New target pose (base frame, quaternion wxyz) tracked from the next update; ``stamp`` (a ROS time) is
        echoed with the efforts for latency tracing. A non-finite target is ignored (returns False)."""
        norm = float(np.linalg.norm(quat))
        if not (np.all(np.isfinite(pos)) and np.isfinite(norm) and norm > 0.5):
            self.get_logger().error("non-finite target ignored", throttle_duration_sec=1.0)
            return False
        with self.lock:
            self.target_pos, self.target_quat, self.target_stamp = np.asarray(pos, np.float64), quat / norm, stamp
        return True

    def _on_gripper(self, msg: Float64) -> None:
        self.set_gripper(msg.data)

    def set_gripper(self, opening: float) -> None:
        """Gripper goal opening (m), clipped to [0, max_opening]; non-finite values are ignored."""
        if np.isfinite(opening):
            self.gripper_goal = float(np.clip(opening, 0.0, self.cfg.max_opening))

    def _torques(self) -> np.ndarray:
        tau = self.arm.torques(self.target_pos, self.target_quat, np.asarray(self.cfg.posture, np.float64))
        if not np.all(np.isfinite(tau)):  # never forward a non-finite effort: brake-hold with bias only
            tau = self.arm.bias.copy()
        self.updates += 1
        return tau

    def _publish_effort(self, tau: np.ndarray) -> None:
        out = self._out
        out.header.stamp = self.target_stamp if self.target_stamp is not None else self.get_clock().now().to_msg()
        out.effort = tau.tolist()
        self.pub_effort.publish(out)
        if self.pub_array is not None:
            self.pub_array.publish(Float64MultiArray(data=tau.tolist()))

    def _step_gripper(self, t: float) -> None:
        """Moves the gripper command towards the goal at most ``gripper_max_speed`` (publishes on change)."""
        goal = self.gripper_goal
        if goal is None:
            self.last_state_time = t
            return
        cmd = self.gripper_cmd
        if cmd is None or self.cfg.gripper_max_speed == 0:
            new = goal
        else:
            dt = max(0.0, t - (self.last_state_time or t))
            step = self.cfg.gripper_max_speed * dt
            new = float(np.clip(goal, cmd - step, cmd + step))
        self.last_state_time = t
        if cmd is None or new != cmd or self.updates % 50 == 0:
            self.gripper_cmd = new
            self.send_gripper(new)


    def close(self) -> None:
        for sub in self.subs:
            sub.close()


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``robot-rl-arm-controller`` (ROS 2 executable ``arm_controller``)."""
    return run_node(ArmControllerNode, argv)
