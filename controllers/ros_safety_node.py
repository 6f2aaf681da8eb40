"""Safety node on the command path (the second safety layer): policy/env -> safety -> controller.

It enforces the same limits as the env (:mod:`robot_rl.safety.limits`) again, plus:

* **watchdog** — no command for ``watchdog_timeout`` s: the arm makes a controlled stop (the hold target moves on
  from the measured EE along its velocity, decelerating at ``stop_deceleration`` to rest, never moving back: no
  rebound), the car stops (zero twist, repeated while stale). The next fresh command resumes.
* **e-stop** — ``estop`` (std_msgs/Bool, true) or the ``~/estop`` service (std_srvs/Trigger) latches: hold/stop
  and every command is rejected until ``~/reset_estop`` is called.
* **diagnostics** — every rejection/clip is counted by reason and published as ``diagnostic_msgs/DiagnosticArray``
  on the global ``/diagnostics`` (and on each change); ``safety_state`` (std_msgs/String, transient local) says ``ok``,
  ``hold`` (watchdog) or ``estop``.

Arm topics: in ``policy/target_pose`` (PoseStamped), ``policy/gripper`` (Float64, opening m), measured ``ee_pose``
and ``wrench``; out ``controller/target_pose``, ``controller/gripper``. Car topics: in ``policy/cmd_vel`` (Twist),
out ``controller/cmd_vel``, or with a car profile its driver's command (:mod:`robot_rl_controllers.car_outputs`).
(Node-relative names: put the graph in a namespace or remap in the launch file.)
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped, Twist, WrenchStamped
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64, String
from std_srvs.srv import Trigger

from robot_rl.robots.kinematics import UrdfKinematics
from robot_rl.robots.profile import load_profile
from robot_rl.ros.clock import NodeTime
from robot_rl.ros.fast_sub import FastSubscription, PolledSubscription
from robot_rl.ros.msgs import pose_arrays, pose_stamped
from robot_rl.ros.node import run_node
from robot_rl.ros.params import declare_config, set_config_values
from robot_rl.ros.qos import watch_qos
from robot_rl.ros.robot_state import JointReader, RobotDescription
from robot_rl.safety.limits import (
    RejectionCounter,
    filter_arm_target,
    filter_gripper,
    filter_twist,
)
from robot_rl_controllers import arm_outputs
from robot_rl_controllers.car_outputs import make_car_output
from robot_rl_controllers.ros_safety_config import ArmSafetyConfig, CarSafetyConfig, SafetyConfig  # noqa: F401

REST_SPEED = 0.005
"""Tool speed (m/s) under which a stopping arm counts as come to rest."""


class _SafetyBase(Node):
    """E-stop latch, watchdog timer and diagnostics; subclasses implement ``_hold`` and ``_watchdog_stale``."""

    reanchors = 0
    """Times the measured pose became the hold (an arm moved by something else; the car never re-anchors)."""

    def __init__(self, name: str, cfg: SafetyConfig) -> None:
        super().__init__(name)
        self.cfg = declare_config(self, cfg)
        self.lock = threading.RLock()
        self.counter = RejectionCounter()
        self.commands = 0
        self.forwarded = 0
        self.estopped = False
        self.holding = False
        self.last_cmd: float | None = None
        self.time = NodeTime(self)  # monotonic, or the simulation's /clock with use_sim_time
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub_state = self.create_publisher(String, "safety_state", latched)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)  # global: the aggregator's topic
        self.create_subscription(Bool, "estop", self._on_estop_topic, 10)
        self.create_service(Trigger, "~/estop", self._on_estop_srv)
        self.create_service(Trigger, "~/reset_estop", self._on_reset_srv)
        self.create_timer(1.0 / self.cfg.diagnostics_rate_hz, self._publish_diag)
        self._publish_state()
        # The watchdog has a thread of its own: it must not wait behind executor callbacks on a loaded machine.
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watchdog_loop, name="watchdog", daemon=True)

    def start(self) -> None:
        """Starts the watchdog thread (called once the subclass has its publishers)."""
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)

    def _watchdog_loop(self) -> None:
        """The staleness check on a fixed grid of ``1 / watchdog_rate_hz`` (its own run time does not stretch the
        period), and a wake for the streamed output's next send (:meth:`_next_send_in`), so the stream keeps its
        rate instead of being rounded up to whole watchdog periods."""
        period = 1.0 / self.cfg.watchdog_rate_hz
        check = time.monotonic() + period
        while True:
            wake = min(check, time.monotonic() + max(self._next_send_in(), 0.0005))
            if self._stop.wait(max(0.0, wake - time.monotonic())) or not self.context.ok():
                return
            now = time.monotonic()
            if now >= check:
                check = check + period if now - check < period else now + period
                self._watchdog()
            self._tick()

    def _next_send_in(self) -> float:
        """Seconds until a streamed output's next send (inf: nothing streams)."""
        return np.inf

    def _tick(self) -> None:
        """Called at the watchdog rate after the watchdog check (an output that streams its command)."""

    # ---------------------------------------------------------------- state
    @property
    def state(self) -> str:
        return "estop" if self.estopped else ("hold" if self.holding else "ok")

    def _publish_state(self) -> None:
        self.pub_state.publish(String(data=self.state))
        self._publish_diag()

    def _publish_diag(self) -> None:
        # "<node>: <what>" names group under the standard aggregator; the hardware id is the robot (namespace)
        status = DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: safety",
                                  hardware_id=self.get_namespace().strip("/") or "robot", message=self.state)
        status.level = DiagnosticStatus.ERROR if self.estopped else (
            DiagnosticStatus.WARN if self.holding else DiagnosticStatus.OK)
        values = {"commands": self.commands, "forwarded": self.forwarded, "rejections": self.counter.total,
                  "reanchors": self.reanchors,
                  **{f"rejected.{k}": v for k, v in sorted(self.counter.counts.items())}}
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(msg)

    def _reject(self, reasons: list[str]) -> None:
        if reasons:
            self.counter.add(reasons)

    # ---------------------------------------------------------------- e-stop
    def _latch(self) -> None:
        with self.lock:
            if not self.estopped:
                self.estopped = True
                self._hold()
                self._publish_state()
                self.get_logger().warn("E-STOP latched")

    def _on_estop_topic(self, msg: Bool) -> None:
        if msg.data:
            self._latch()

    def _on_estop_srv(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._latch()
        response.success, response.message = True, "e-stop latched"
        return response

    def _on_reset_srv(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self.lock:
            was = self.estopped
            self.estopped, self.last_cmd = False, None
            self.holding = was or self.holding
            self._publish_state()
        response.success, response.message = True, "e-stop reset" if was else "was not latched"
        return response

    # ---------------------------------------------------------------- watchdog
    def _accept_command(self) -> bool:
        """Bookkeeping for an arriving command; False if it must be rejected (e-stop latched)."""
        self.commands += 1
        if self.estopped:
            self._reject(["estop"])
            return False
        self.last_cmd = self.time.now()
        if self.holding:
            self.holding = False
            self._publish_state()
        return True

    def _watchdog(self) -> None:
        with self.lock:
            if self.estopped:
                self._while_stopped()
                return
            if self.last_cmd is None or self.time.now() - self.last_cmd <= self.cfg.watchdog_timeout:
                return
            if not self.holding:
                stale = self.time.now() - self.last_cmd
                self.holding = True
                self._reject(["stale"])
                self._hold()
                self._publish_state()
                # Logged after acting: a (first) rclpy log call took tens of ms here.
                self.get_logger().warn(f"command stream stale for {stale * 1e3:.0f} ms: holding",
                                       throttle_duration_sec=1.0)
            else:
                self._while_stopped()

    def _hold(self) -> None:
        raise NotImplementedError

    def _while_stopped(self) -> None:
        """Called at the watchdog rate while holding/e-stopped (the car repeats its stop command)."""


class ArmSafetyNode(_SafetyBase):
    """Arm command filter (see the module docstring)."""

    def __init__(self, cfg: ArmSafetyConfig | None = None, name: str = "arm_safety", composed: bool = False) -> None:
        """``composed=True`` (the composed arm stack): ``policy/target_pose`` is taken by the owner's loop
        calling ``poll_target()``, and ``ee_pose``/``wrench`` are not subscribed (the owner calls ``_on_ee_pose``/
        ``_on_wrench`` with its messages)."""
        self.ee_pos: np.ndarray | None = None
        self.ee_quat: np.ndarray | None = None
        self.force: np.ndarray | None = None
        self.last_pos: np.ndarray | None = None
        self.last_quat: np.ndarray | None = None
        self.last_time: float | None = None
        self.last_gripper: float | None = None
        self.hold_pose: tuple[np.ndarray, np.ndarray] | None = None
        self.ee_vel = np.zeros(3)  # EE velocity estimated from ee_pose stamps (low-passed), for the controlled stop
        self._pose_prev: tuple[float, np.ndarray] | None = None
        self.stop_profile: tuple[float, np.ndarray, np.ndarray, float, float] | None = None
        self._stop_reach = 0.0
        self.output: Any = None
        self.joints_q: np.ndarray | None = None
        self._state_seen: float | None = None  # monotonic time of the last measured state
        self._state_stale = False
        self._anchor_due: str | None = None  # why the next measured state becomes the hold (set off the state path)
        self._stopping = False  # a controlled stop under way: the arm has not come to rest yet
        super().__init__(name, cfg or ArmSafetyConfig())
        self.pub_target = self.create_publisher(PoseStamped, "controller/target_pose", 10)
        self.send_target = lambda pos, quat, stamp: self.pub_target.publish(pose_stamped(pos, quat, stamp))
        """Where filtered targets go: ``send_target(pos, quat, stamp)`` (stamp: builtin_interfaces/Time)."""
        self.create_subscription(Float64, "policy/gripper", self._on_gripper, 10)
        self.qos_watch = [watch_qos(self, PoseStamped, "policy/target_pose"),
                          watch_qos(self, Float64, "policy/gripper")]
        self.target_poll = PolledSubscription(self, PoseStamped, "policy/target_pose") if composed else None
        self.subs = [] if composed else [FastSubscription(self, PoseStamped, "policy/target_pose", self._on_target)]
        if self.cfg.profile:
            if composed:
                raise ValueError("a robot profile drives a real driver: the composed stack is robot_rl's own hardware")
            self._use_profile()
        else:
            pub_gripper = self.create_publisher(Float64, "controller/gripper", 10)
            self.send_gripper = lambda opening: pub_gripper.publish(Float64(data=opening))
            """Where filtered gripper openings go (the composed arm stack calls the controller directly)."""
            if not composed:
                self.subs += [FastSubscription(self, PoseStamped, "ee_pose", self._on_ee_pose),
                              FastSubscription(self, WrenchStamped, "wrench", self._on_wrench)]
        self.start()

    def _use_profile(self) -> None:
        """Measured state from the profile's joint states through the URDF, limits from the profile, filtered targets
        to the profile's command interface (robot_rl_controllers.arm_outputs)."""
        profile = load_profile(self.cfg.profile, "arm")
        self.profile = profile
        set_config_values(self, profile.limits, "limits")
        self.kin = None
        self._reader = JointReader(profile.joint_states.names)
        self._state_period = 1.0 / 250.0  # forward kinematics at most this often (joint states come at 0.5-1 kHz)
        self._last_state = -np.inf

        def on_urdf(urdf: str) -> None:
            try:
                kin = UrdfKinematics(urdf, profile.joint_states.names, profile.base_frame, profile.tool_frame)
            except ValueError as exc:
                self.get_logger().error(f"profile {profile.name}: {exc}")
                with self.lock:  # a pose from the old URDF is no pose of this robot: nothing is commanded
                    self.kin, self.ee_pos = None, None
                    self._release()
                return
            with self.lock:
                if self.kin is not None:  # a new description (a restarted driver): poses from the old one are void
                    self._anchor_due = f"a new {profile.robot_description}"
                    self._last_state = -np.inf
                self.kin = kin
            self.get_logger().info(f"kinematics of {profile.base_frame} -> {profile.tool_frame} from "
                                   f"{profile.robot_description}")

        self.description = RobotDescription(self, profile.robot_description, on_urdf)
        self.subs.append(FastSubscription(self, JointState, profile.joint_states.topic, self._on_joints))
        if profile.wrench.topic:
            self.subs.append(FastSubscription(self, WrenchStamped, profile.wrench.topic, self._on_wrench,
                                              best_effort=True))
        self.output, self.send_gripper = arm_outputs.make_outputs(
            self, profile, self.time.now, self.time.stamp, self._reject,
            lambda: None if self.ee_pos is None else (self.ee_pos, self.ee_quat), lambda: self.kin,
            lambda: self.joints_q)

        def send_target(pos: np.ndarray, quat: np.ndarray, stamp: Any) -> None:
            self._reject(self.output.send(pos, quat, stamp))
            self.pub_target.publish(pose_stamped(pos, quat, stamp, profile.base_frame))  # to monitor

        self.send_target = send_target

    def _on_joints(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if t < self._last_state - 1.0:  # the clock went back (a restarted simulation's /clock): a new time line
            with self.lock:
                self._anchor_due = self._anchor_due or f"joint_states stamped {self._last_state - t:.1f} s back"
            self._last_state = -np.inf
        if t - self._last_state < self._state_period:
            return
        joints = self._reader(msg)
        kin = self.kin
        if joints is None or kin is None:
            return
        q, qd = joints
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            return
        self._last_state = t
        pos, quat = kin.forward(q)
        vel = kin.twist(q, qd)[:3]
        with self.lock:
            self.joints_q = q
            self._set_measured(pos, quat, t, vel)

    def _next_send_in(self) -> float:
        if self.output is None or self._state_stale:
            return np.inf
        return self.output.next_send - self.time.now()

    def _tick(self) -> None:
        self._check_state_fresh()
        if self.output is not None:
            with self.lock:
                if not self._state_stale:
                    self.output.tick(self.time.now())

    def _check_state_fresh(self) -> None:
        """The measured state silent for ``state_timeout`` s: nothing is commanded until it returns (then it is
        the hold: :meth:`_set_measured`)."""
        seen = self._state_seen
        if seen is None or self._state_stale or time.monotonic() - seen <= self.cfg.state_timeout:
            return
        with self.lock:
            self._state_stale = True
            self._anchor_due = f"the measured state resumed after a pause (> {self.cfg.state_timeout} s)"
            self._release()
        self.get_logger().warn(f"no measured state for {time.monotonic() - seen:.2f} s: commanding nothing until "
                               "it returns", throttle_duration_sec=1.0)

    def close(self) -> None:
        super().close()
        for sub in self.subs:
            sub.close()
        if self.target_poll is not None:
            self.target_poll.close()

    def poll_target(self) -> None:
        """Composed form: takes the newest waiting target (if any) and filters it, on the caller's thread."""
        msg = self.target_poll.poll()
        if msg is not None:
            self._on_target(msg)

    def _on_ee_pose(self, msg: PoseStamped) -> None:
        pos, quat = pose_arrays(msg.pose)
        if np.all(np.isfinite(pos)) and np.all(np.isfinite(quat)):
            with self.lock:
                self._set_measured(pos, quat, msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)

    def _set_measured(self, pos: np.ndarray, quat: np.ndarray, t: float, vel: np.ndarray | None = None) -> None:
        """The measured EE pose at ``t``; its velocity given (from the joints) or estimated from the pose stamps.
        The measured state is the truth: after a pause of it, a new URDF, a clock jump or a departure from where the
        node holds the arm, it becomes the hold (:meth:`_reanchor`)."""
        self.ee_pos, self.ee_quat = pos, quat
        if vel is not None:
            self.ee_vel = vel
        elif self._pose_prev is not None and 0.0 < t - self._pose_prev[0] < 0.1:
            self.ee_vel = 0.8 * self.ee_vel + 0.2 * (pos - self._pose_prev[1]) / (t - self._pose_prev[0])
        self._pose_prev = (t, pos)
        self._state_seen = time.monotonic()
        self._state_stale = False
        if self._stopping and float(np.linalg.norm(self.ee_vel)) < REST_SPEED:
            self._stopping = False  # the controlled stop has brought the arm to rest
        why = self._anchor_due or self._departure(pos)
        if why:
            self._reanchor(why)

    def _departure(self, pos: np.ndarray) -> str | None:
        """Why the arm is not where this node has it (None: it is): the measured tool farther from the reference it
        streams, or from the hold, than ``reanchor_distance`` (plus the target's lead while the policy commands)."""
        if self.output is None:  # robot_rl's own compliant controller: it yields to contact by design
            return None
        ref = self.output.filter.pos if self.output.filter is not None else None
        held = self.hold_pose[0] if self.holding and self.hold_pose is not None and self.stop_profile is None else None
        expected = ref if ref is not None else held
        if expected is None:
            return None
        # the arm trails its reference by up to the target's lead while it moves (also through a controlled stop,
        # until it has come to rest); once at rest under a hold, any departure is something else's doing
        lead = self.cfg.limits.max_target_lead if (not self.holding or self._stopping) else 0.0
        allowed = self.cfg.reanchor_distance + lead
        off = float(np.max(np.abs(pos - expected)))  # per axis, as the target's lead is bounded
        return f"the arm is {off * 1e3:.0f} mm from where it is held" if off > allowed else None

    def _release(self) -> None:
        """Nothing is commanded until the policy's next target: no stop profile, the output silent."""
        self.stop_profile = None
        if self.output is not None:
            self.output.release()

    def _reanchor(self, why: str) -> None:
        """The measured pose becomes the hold and the last target (the next target's step limit counts from it);
        nothing is commanded until the policy's next target."""
        self._anchor_due = None
        self._release()
        self.hold_pose = (self.ee_pos.copy(), self.ee_quat.copy())
        self.last_pos, self.last_quat, self.last_time = self.hold_pose[0], self.hold_pose[1], self.time.now()
        if self.output is None:  # robot_rl's own controller holds its last target: that is now the measured pose
            self.send_target(self.hold_pose[0], self.hold_pose[1], self.time.stamp())
        self.reanchors += 1
        self.get_logger().warn(f"{why}: holding the measured pose, commanding nothing until the next target",
                               throttle_duration_sec=1.0)

    def _on_wrench(self, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        self.force = np.array([f.x, f.y, f.z])

    def _on_target(self, msg: PoseStamped) -> None:
        with self.lock:
            if not self._accept_command():
                return
            if self.ee_pos is None or self._state_stale:
                self._reject(["no_state"])
                return
            pos, quat = pose_arrays(msg.pose)
            now = self.time.now()
            dt = None if self.last_time is None else now - self.last_time
            lim = self.cfg.limits
            pos, quat, reasons = filter_arm_target(lim, pos, quat, self.last_pos, self.last_quat, self.ee_pos, dt,
                                                   self.force)
            self._reject(reasons)
            if "nonfinite" in reasons:
                return
            self.last_pos, self.last_quat, self.last_time = pos, quat, now
            self.send_target(pos, quat, msg.header.stamp)
            self.forwarded += 1

    def _on_gripper(self, msg: Float64) -> None:
        with self.lock:
            if self.estopped:
                self._reject(["estop"])
                return
            value, reasons = filter_gripper(self.cfg.limits, float(msg.data), self.last_gripper)
            self._reject(reasons)
            if "nonfinite" in reasons:
                return
            self.last_gripper = value
            self.send_gripper(value)

    def _hold(self) -> None:
        """A controlled stop: the target moves on from the measured EE position along the EE's velocity and
        decelerates at ``stop_deceleration`` to rest (``_while_stopped`` advances it), or with deceleration 0 (or
        an arm at rest) target := the measured pose at once. With a profile whose output streams a reference, the
        reference itself is brought to rest (``arm_outputs.StreamedOutput.stop``): the driver follows it."""
        if self.ee_pos is None:
            return
        self._stopping = True  # until the arm has come to rest (_departure)
        stopped = self.output.stop() if self.output is not None else None
        if stopped is not None:
            self.stop_profile = None
            self.hold_pose = stopped
            self.last_pos, self.last_quat, self.last_time = stopped[0], stopped[1], self.time.now()
            return
        speed, decel = float(np.linalg.norm(self.ee_vel)), self.cfg.stop_deceleration
        self.stop_profile = None
        if decel > 0 and speed > 1e-3:
            self.stop_profile = (self.time.now(), self.ee_pos.copy(), self.ee_vel.copy(), decel, speed / decel)
            self._stop_reach = 0.0
            self._while_stopped()  # its first point
            return
        self._send_stop_target(self.ee_pos)

    def _send_stop_target(self, pos: np.ndarray) -> None:
        pos = np.clip(pos, self.cfg.limits.workspace_low, self.cfg.limits.workspace_high)
        quat = self.last_quat if self.last_quat is not None else self.ee_quat
        self.hold_pose = (pos, quat)
        self.last_pos, self.last_quat, self.last_time = pos, quat, self.time.now()
        self.send_target(pos, quat, self.time.stamp())

    def _while_stopped(self) -> None:
        """At the watchdog rate while holding: the next point of the stop profile (until it has come to rest)."""
        if self.stop_profile is None:
            return
        t0, p0, v0, decel, duration = self.stop_profile
        t = min(self.time.now() - t0, duration)
        # reference p(t) = p0 + v0 t - a t^2 / 2 along v0 (speed falling linearly from |v0| to 0 at t = duration);
        # the target leads it by the arm's tracking lag at the reference's current speed
        speed = float(np.linalg.norm(v0))
        unit = v0 / speed
        ref = speed * t - 0.5 * decel * t * t  # distance along the path; speed falls linearly to 0 at duration
        lead = self.cfg.stop_lead_s * (speed - decel * t)
        # the target never moves back along the path (the lead shrinking to 0 would pull the arm back: a rebound)
        self._stop_reach = max(self._stop_reach, ref + lead)
        self._send_stop_target(p0 + self._stop_reach * unit)
        if t >= duration:
            self.stop_profile = None


class CarSafetyNode(_SafetyBase):
    """Car command filter (see the module docstring)."""

    def __init__(self, cfg: CarSafetyConfig | None = None, name: str = "car_safety") -> None:
        super().__init__(name, cfg or CarSafetyConfig())
        if self.cfg.profile:  # the profile's driver, with the profile's limits
            profile = load_profile(self.cfg.profile, "car")
            set_config_values(self, profile.limits, "limits")
            self.output = make_car_output(self, profile)
        else:
            self.output = _OwnController(self)
        self.create_subscription(Twist, "policy/cmd_vel", self._on_cmd, 10)
        self.qos_watch = [watch_qos(self, Twist, "policy/cmd_vel")]
        self.start()

    def _on_cmd(self, msg: Twist) -> None:
        with self.lock:
            if not self._accept_command():
                return
            v, w, reasons = filter_twist(self.cfg.limits, msg.linear.x, msg.angular.z)
            self._reject(reasons)
            self.output.send(v, w)
            self.forwarded += 1

    def _hold(self) -> None:
        self.output.stop()

    def _while_stopped(self) -> None:
        self.output.stop()


class _OwnController:
    """robot_rl's own driving controller (``controller/cmd_vel``, Twist): the car output without a profile."""

    def __init__(self, node: Node) -> None:
        self.pub = node.create_publisher(Twist, "controller/cmd_vel", 10)

    def send(self, v: float, w: float) -> None:
        out = Twist()
        out.linear.x, out.angular.z = float(v), float(w)
        self.pub.publish(out)

    def stop(self) -> None:
        self.pub.publish(Twist())


def main_arm(argv: list[str] | None = None) -> int:
    """Console entry point ``robot-rl-arm-safety`` (ROS 2 executable ``arm_safety``)."""
    return run_node(ArmSafetyNode, argv)


def main_car(argv: list[str] | None = None) -> int:
    """Console entry point ``robot-rl-car-safety`` (ROS 2 executable ``car_safety``)."""
    return run_node(CarSafetyNode, argv)
