"""MuJoCo as ROS 2 hardware: a sim arm task (Reach, PickCube, PegInsert) run in real time behind the interface a
torque-controlled arm driver exposes.

Inputs (node-relative names; remap in the launch file):

* ``joint_command`` — ``sensor_msgs/JointState`` with ``effort`` for the 7 arm joints (by name, or in order when
  names are empty); its ``header.stamp`` is echoed on ``applied_command`` once applied (latency tracing).
* ``effort_controller/commands`` — ``std_msgs/Float64MultiArray`` of 7 efforts (what a ros2_control
  ``JointGroupEffortController`` forwards), same effect.
* ``gripper_command`` — ``std_msgs/Float64``: gripper opening (m, 0-0.08) for the position-controlled fingers.

Outputs, stamped with the time of the physics state they describe (wall clock; with ``use_sim_time`` the physics
time, which this node then publishes on ``/clock``: a loaded sim runs slower than real time, its stamps stay
consistent): ``joint_states`` (arm + fingers, every physics step), ``gripper/joint_states``, ``ee_pose``,
``ee_twist`` (base frame), ``wrench`` (``ft`` frame), ``object_pose`` (sim-privileged), ``success`` (the task's own
check) at ``aux_rate_hz``; ``camera/<name>/image_raw`` (rgb8) at ``camera_rate_hz`` when ``image_size > 0``;
``/diagnostics`` once a second (effort command rate and largest gap, how far physics is behind real time,
``bad_efforts``: commands non-finite or beyond the torque limits, which are dropped or clipped); ``/tf`` at
``tf_rate_hz``, ``/tf_static`` and ``robot_description`` (URDF), see ``robot_rl.ros.tf``. Service ``~/reset``
(``std_srvs/Trigger``): re-places the task objects (the arm is not moved unless ``reset_teleports_arm``).

Each physics step keeps its scheduled time, however busy the machine: a step run late takes only the commands that
had arrived by then and is stamped with it, as a real arm's controller, which never waits on its PC, would.

Injected imperfections: ``command_latency`` delays every command before it acts, ``state_latency`` delays every
outgoing message, ``joint_noise``/``pose_noise`` add Gaussian noise to the published state. With no effort
command for ``command_timeout`` the arm brakes (gravity compensation + joint damping), as a real driver would.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue  # noqa: E402
from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402
from std_msgs.msg import Bool, Float64, Float64MultiArray, Header  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from robot_rl.ros.fast_sub import FastSubscription  # noqa: E402
from robot_rl.ros.msgs import image_msg, set_pose, to_stamp  # noqa: E402
from robot_rl.ros.node import run_node  # noqa: E402
from robot_rl.ros.params import declare_config  # noqa: E402
from robot_rl.ros.tf import MujocoFrames, TfPublisher, camera_info  # noqa: E402
from robot_rl_controllers.arm_model import ARM_JOINTS, FINGER_JOINTS, FINGER_MAX, HOME_QPOS, TORQUE_LIMITS  # noqa: E402
from robot_rl_sim import arm_tasks  # noqa: E402
from robot_rl_sim.camera_error import camera_error  # noqa: E402
from robot_rl_sim.reality import RealityProfile  # noqa: E402
from robot_rl_sim.ros_arm_config import TASKS, ArmHardwareConfig  # noqa: E402, F401  (re-exported)
from robot_rl_sim.step_clock import StepClock  # noqa: E402


class ArmHardwareNode(Node):
    """The sim arm in real time (see the module docstring). Physics runs on its own thread, one 2 ms step per
    wall-clock 2 ms; subscriptions only store the latest command."""

    def __init__(self, cfg: ArmHardwareConfig | None = None, name: str = "arm_hardware") -> None:
        super().__init__(name)
        self.cfg = declare_config(self, cfg or ArmHardwareConfig())

        cfg = self.cfg
        self.env = getattr(arm_tasks, f"{cfg.task}Env")(image_size=0)
        self.env.reset(seed=cfg.seed)
        self.model, self.data = self.env.model, self.env.data
        if cfg.physics_dt > 0:
            self.model.opt.timestep = cfg.physics_dt
        self.dt = float(self.model.opt.timestep)
        self.rng = np.random.default_rng(cfg.seed + 1)
        self.joint_names = list(ARM_JOINTS) + list(FINGER_JOINTS)
        m = self.model
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in self.joint_names]
        self.qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self.vadr = np.array([m.jnt_dofadr[j] for j in jids])
        self.free_dofs = [slice(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + 6)
                          for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        self.obj_body = next((mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, b)
                              for b in ("cube", "peg", "target") if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY,
                                                                                       b) >= 0), -1)
        self.lock = threading.RLock()  # re-entered when the composed controller sends a gripper command
        self.in_loop: Callable[[np.ndarray, np.ndarray, float], tuple[np.ndarray, object] | None] | None = None
        """A controller run in the physics loop before every step: (joint pos, vel, time) -> (efforts, echo stamp)
        or None (the composed arm stack, ``robot_rl_sim.ros_arm_stack``)."""
        self.pre_step: Callable[[], None] | None = None
        """Called at the top of every physics step, before the due inputs are taken (the composed stack reads its
        command topic here)."""
        self._cmd_queue: deque[tuple[float, str, object]] = deque()
        # (due time, order, publisher, message): a heap, since images and state go out with different latencies
        self._out_queue: list[tuple[float, int, object, object]] = []
        self._out_order = itertools.count()
        self.camera_latency = 0.0
        """s by which images and their CameraInfo go out late, instead of ``state_latency`` (a reality profile)."""
        self.image_gain: np.ndarray | None = None
        """Per-channel (R, G, B) gain on every image (a reality profile's brightness and white balance)."""
        self.camera_reality = RealityProfile()
        """The reality profile whose camera errors the images are rendered with (TF and CameraInfo stay as
        described); nominal: none."""
        self.gripper_speed = 0.0
        """m/s at which the gripper's opening may change; 0: a command takes effect at once (its own servo)."""
        self._grip_target: float | None = None
        self.effort = np.zeros(len(ARM_JOINTS))
        self.torque_limits = np.asarray(TORQUE_LIMITS, np.float64)
        self.effort_stamp = None
        self.last_effort_time = -np.inf
        self.braking = True
        self.applied_new = False
        self.commands_received = 0
        self.max_gap = 0.0
        self.efforts_total = 0
        self.bad_efforts = 0
        self.use_sim_time = bool(self.get_parameter("use_sim_time").value)
        self.aux_every = max(1, int(round(1.0 / (cfg.aux_rate_hz * self.dt))))
        self.tf_every = max(1, int(round(1.0 / (cfg.tf_rate_hz * self.dt))))
        self.cam_every = max(1, int(round(1.0 / (cfg.camera_rate_hz * self.dt))))
        self.sim_t = 0.0
        self.step_stamp = time.time()  # the stamp of the latest physics step (physics time with use_sim_time)
        self.command_sub: FastSubscription | None = None
        # use_sim_time: this node is the clock. Physics time (never skipped, whatever the CPU load) on /clock and
        # in every stamp; injected latencies and timeouts count it too.
        self.pub_clock = self.create_publisher(Clock, "/clock", 10) if self.use_sim_time else None
        if self.offers_reset():
            self.create_service(Trigger, "~/reset", self._on_reset)
        self._out_lock = threading.Lock()  # the camera thread queues its images too
        self._make_io()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="physics", daemon=True)
        self._thread.start()
        # a real arm's controller runs apart from its cameras: rendering on the physics thread (milliseconds a
        # frame) made its steps late, which a calibration log then showed as dynamics (viscous friction 29 % low)
        self._camera_state: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._camera_wake = threading.Condition()
        self._camera_thread = threading.Thread(target=self._camera_loop, name="cameras", daemon=True)
        if self.pub_cams:
            self._camera_thread.start()

    def offers_reset(self) -> bool:
        """Whether the sim-only ``~/reset`` service is offered (a driver emulation in bare mode has none)."""
        return True

    def _make_io(self) -> None:
        """The hardware's interface (besides ``/clock`` and ``~/reset``): robot_rl's own topics (see the module
        docstring); a driver emulation (``robot_rl_sim.ros_arm_driver``) makes its driver's instead."""
        cfg, m = self.cfg, self.model
        self.pub_joint = self.create_publisher(JointState, "joint_states", 10)
        self._joint_msg = JointState(name=self.joint_names)
        self.pub_applied = self.create_publisher(Header, "applied_command", 10)
        self.pub_pose = self.create_publisher(PoseStamped, "ee_pose", 10)
        self.pub_twist = self.create_publisher(TwistStamped, "ee_twist", 10)
        self.pub_wrench = self.create_publisher(WrenchStamped, "wrench", 10)
        self.pub_object = self.create_publisher(PoseStamped, "object_pose", 10)
        self.pub_success = self.create_publisher(Bool, "success", 10)
        self.pub_fingers = self.create_publisher(JointState, "gripper/joint_states", 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)  # global: the aggregator's topic
        cams = cfg.cameras if cfg.image_size > 0 else ()
        self.pub_cams = {c: (self.create_publisher(Image, f"camera/{c}/image_raw", 2),
                             self.create_publisher(CameraInfo, f"camera/{c}/camera_info", 2),
                             f"{cfg.frame_prefix}{c}_camera_optical") for c in cams}
        names = tuple(m.camera(c).name for c in range(m.ncam))  # every camera mount, with images or without
        self.frames = MujocoFrames(m, "link0", "base_link", sites=("ee", "ft"), cameras=names)
        self.tf = TfPublisher(self, self.frames, "robot_rl_arm", cfg.frame_prefix)
        self.command_sub = FastSubscription(self, JointState, "joint_command", self._on_joint_command)
        self.create_subscription(Float64MultiArray, "effort_controller/commands", self._on_array_command, 10)
        self.create_subscription(Float64, "gripper_command", self._on_gripper, 10)

    def now(self) -> float:
        """The time commands and latencies are counted in: physics time with ``use_sim_time``, else wall clock."""
        return self.sim_t if self.pub_clock is not None else time.time()

    # ------------------------------------------------------------ inputs
    def enqueue(self, kind: str, value: object) -> None:
        """Queues an input to act at the first physics step after ``command_latency``: ``effort`` ((efforts,
        stamp)), ``gripper`` (opening, m) or ``call`` (a function called in the physics loop). No lock: deque
        appends and pops are atomic, and the physics loop holds ``lock`` for a whole step."""
        self._cmd_queue.append((self.now() + self.cfg.command_latency, kind, value))

    def _on_joint_command(self, msg: JointState) -> None:
        effort = np.asarray(msg.effort, np.float64)
        if msg.name:
            index = {n: i for i, n in enumerate(msg.name)}
            if not all(j in index for j in ARM_JOINTS) or len(effort) != len(msg.name):
                self.get_logger().warn("joint_command: needs efforts for all arm joints", throttle_duration_sec=1.0)
                return
            effort = effort[[index[j] for j in ARM_JOINTS]]
        if effort.shape != (len(ARM_JOINTS),):
            return
        self.enqueue("effort", (effort, msg.header.stamp))

    def _on_array_command(self, msg: Float64MultiArray) -> None:
        effort = np.asarray(msg.data, np.float64)
        if effort.shape == (len(ARM_JOINTS),):
            self.enqueue("effort", (effort, None))

    def _on_gripper(self, msg: Float64) -> None:
        self.enqueue("gripper", float(msg.data))

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        env, d = self.env, self.data
        with self.lock:
            if self.cfg.reset_teleports_arm:
                d.qpos[env.arm_qpos] = HOME_QPOS
                d.qvel[:] = 0.0
            mujoco.mj_kinematics(self.model, d)
            env._reset_objects(env.np_random)
            for sl in self.free_dofs:
                d.qvel[sl] = 0.0
            mujoco.mj_forward(self.model, d)
        response.success, response.message = True, "objects re-placed"
        return response

    def _apply_commands(self, now: float) -> None:
        """Takes every queued command that is due (after the injected latency); hardware-side limits: efforts
        outside the joint torque limits or non-finite are not applied."""
        q = self._cmd_queue
        while q and q[0][0] <= now:
            _, kind, value = q.popleft()
            if kind == "effort":
                self._take_effort(*value, now)
            elif kind == "call":  # an in-process input (the composed stack's target), delayed like the others
                value()
            elif np.isfinite(value):
                target = 0.5 * float(np.clip(value, 0.0, 2 * FINGER_MAX))  # each finger's position
                if self.gripper_speed > 0:
                    self._grip_target = target
                else:
                    self.data.ctrl[self.env.grip_ctrl] = target
        if self._grip_target is not None:  # a slower gripper: each finger at half the opening's speed
            ctrl = self.data.ctrl[self.env.grip_ctrl]
            step = 0.5 * self.gripper_speed * self.dt
            self.data.ctrl[self.env.grip_ctrl] = ctrl + np.clip(self._grip_target - ctrl, -step, step)

    def _take_effort(self, effort: np.ndarray, stamp: object, now: float) -> None:
        """Hardware-side limits: efforts outside the joint torque limits or non-finite are not applied."""
        self.efforts_total += 1
        if not (np.all(np.isfinite(effort)) and np.all(np.abs(effort) <= self.torque_limits)):
            self.bad_efforts += 1  # counted at the input: what reached the hardware unchecked
        if not np.all(np.isfinite(effort)):
            return
        self.effort = np.clip(effort, -self.torque_limits, self.torque_limits)
        self.max_gap = max(self.max_gap, now - self.last_effort_time)
        self.applied_new = self.applied_new or (stamp is not None and stamp != self.effort_stamp)
        if stamp is not None:  # an unstamped array command (effort_controller/commands) keeps the last stamp
            self.effort_stamp = stamp
        self.last_effort_time = now
        self.braking = False
        self.commands_received += 1

    # ------------------------------------------------------------ loop
    def _loop(self) -> None:
        try:
            self._run()
        except Exception as exc:  # noqa: BLE001  (rclpy shut down under us: stop quietly)
            if not self._stop.is_set() and self.context.ok():
                raise
            del exc
        finally:
            if not self.pub_cams:  # else the camera thread's renderer, released there
                self.env.close()

    def _run(self) -> None:
        m, d, cfg = self.model, self.data, self.cfg
        clock = StepClock(self.dt)
        step = 0
        clock_every = max(1, int(round(1.0 / (cfg.clock_rate_hz * self.dt))))
        diag_every = int(round(1.0 / self.dt))
        while not self._stop.is_set() and self.context.ok():
            scheduled = clock.tick()
            if self.pre_step is not None:
                self.pre_step()
            now = self.now() if self.pub_clock is not None else scheduled
            with self.lock:
                self._apply_commands(now)
                if self.in_loop is not None:  # composed controller: read -> update -> write, as ros2_control
                    out = self.in_loop(d.qpos[self.qadr], d.qvel[self.vadr], now)
                    if out is not None:
                        self._take_effort(*out, now)
                arm = self.env.arm_ctrl
                if now - self.last_effort_time > cfg.command_timeout:
                    self.braking = True
                if self.braking:
                    d.ctrl[arm] = d.qfrc_bias[self.vadr[:7]] - cfg.brake_damping * d.qvel[self.vadr[:7]]
                else:
                    d.ctrl[arm] = self.effort
                mujoco.mj_step(m, d)
                step += 1
                self.sim_t = step * self.dt  # physics time (a sum of dt would drift)
                stamp = self.sim_t if self.pub_clock is not None else now
                self.step_stamp = stamp
                if self.pub_clock is not None and step % clock_every == 0:  # before the step's state goes out
                    self.pub_clock.publish(Clock(clock=to_stamp(stamp)))
                self._publish_state(step, stamp)
                if step % diag_every == 0:
                    self._publish_diag(diag_every * self.dt, clock.behind())
            self._flush()

    def _publish_state(self, step: int, stamp: float) -> None:
        """Everything published after physics step ``step`` (the state at ``stamp``): robot_rl's own topics."""
        m, d = self.model, self.data
        self._publish_joints(stamp)
        cam_step = bool(self.pub_cams) and step % self.cam_every == 0
        tf_step = step % self.tf_every == 0
        if step % self.aux_every == 0 or cam_step or tf_step:
            mujoco.mj_forward(m, d)  # derived quantities (site poses, sensors) of the new state
        if step % self.aux_every == 0:
            self._publish_aux(stamp)
        if tf_step:
            self._publish_tf(stamp)
        if cam_step:
            self._publish_cameras(stamp)

    def _publish_tf(self, stamp: float, objects_parent: str = "base_link") -> None:
        """The moving links and the task object (a frame of its own, as a tracker would publish it) on /tf."""
        m, d, b = self.model, self.data, self.obj_body
        tf = self.tf.moving(d, to_stamp(stamp), [(objects_parent, m.body(b).name, d.xpos[b], d.xquat[b])]
                            if b >= 0 else [])
        if tf is not None:
            self._publish(self.tf.pub, tf)  # with the state's injected latency

    def _publish_cameras(self, stamp: float) -> None:
        """Hands the state at ``stamp`` to the camera thread (a frame it has not rendered yet is dropped, as a camera
        drops frames its host cannot take)."""
        d = self.data
        with self._camera_wake:
            self._camera_state = (stamp, d.qpos.copy(), d.mocap_pos.copy(), d.mocap_quat.copy())
            self._camera_wake.notify()

    def _camera_loop(self) -> None:
        """Renders and publishes each state the physics loop hands over, on its own copy of the model's data."""
        render = mujoco.MjData(self.model)
        try:
            while not self._stop.is_set() and self.context.ok():
                with self._camera_wake:
                    if self._camera_state is None:
                        self._camera_wake.wait(timeout=0.2)
                    state, self._camera_state = self._camera_state, None
                if state is None:
                    continue
                stamp, render.qpos[:], render.mocap_pos[:], render.mocap_quat[:] = state
                mujoco.mj_forward(self.model, render)
                self._render_cameras(render, stamp)
        except Exception as exc:  # noqa: BLE001  (rclpy shut down under us: stop quietly)
            if not self._stop.is_set() and self.context.ok():
                raise
            del exc
        finally:
            self.env.close()  # the renderer's GL context is current on this thread: release it here, not at exit

    def _render_cameras(self, render: mujoco.MjData, stamp: float) -> None:
        latency = self.camera_latency or self.cfg.state_latency
        for cam, (pub, pub_info, frame) in self.pub_cams.items():
            with camera_error(self.model, render, cam, self.camera_reality):
                image = self.env.render_camera(cam, self.cfg.image_size, render)
            if self.image_gain is not None:
                image = np.clip(image * self.image_gain, 0, 255).astype(np.uint8)
            # a camera's latency counts from its frame's stamp (exposure) to delivery, the render's time inside it
            # (a busy CPU's slower render once added ~10 ms to what a log read off the stamps)
            self._publish(pub, image_msg(image, stamp, frame), latency, stamp)
            info = camera_info(self.model, cam, self.cfg.image_size, self.cfg.image_size, frame)
            info.header.stamp = to_stamp(stamp)
            self._publish(pub_info, info, latency, stamp)

    def _publish_diag(self, window: float, behind: float) -> None:
        """Effort command rate and largest gap over the last ``window`` s, how far physics is behind real time."""
        status = DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: hardware",
                                  hardware_id=self.get_namespace().strip("/") or "arm",
                                  message="braking" if self.braking else "ok")
        status.level = DiagnosticStatus.WARN if self.braking else DiagnosticStatus.OK
        values = {"effort_rate_hz": self.commands_received / window, "max_effort_gap_ms": self.max_gap * 1e3,
                  "behind_ms": behind * 1e3, "braking": self.braking, "efforts_total": self.efforts_total,
                  "bad_efforts": self.bad_efforts}
        status.values = [KeyValue(key=k, value=f"{v:.1f}" if isinstance(v, float) else str(v))
                         for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = to_stamp(self.now())
        self.pub_diag.publish(msg)
        self.commands_received, self.max_gap = 0, 0.0

    def _publish(self, pub: object, msg: object, latency: float | None = None, since: float | None = None) -> None:
        """Publishes ``msg`` now, or ``latency`` s after ``since`` (default: ``state_latency`` after the physics step's
        stamp)."""
        latency = self.cfg.state_latency if latency is None else latency
        if latency > 0:
            since = self.step_stamp if since is None else since
            with self._out_lock:
                heapq.heappush(self._out_queue, (since + latency, next(self._out_order), pub, msg))
        else:
            pub.publish(msg)

    def _flush(self) -> None:
        q, now = self._out_queue, self.now()
        while q and q[0][0] <= now:
            with self._out_lock:
                _, _, pub, msg = heapq.heappop(q)
            pub.publish(msg)

    def _publish_joints(self, stamp: float) -> None:
        d, cfg = self.data, self.cfg
        msg = self._joint_msg if cfg.state_latency == 0 else JointState(name=self.joint_names)  # queued: a copy
        msg.header.stamp = to_stamp(stamp)
        pos, vel = d.qpos[self.qadr].copy(), d.qvel[self.vadr].copy()
        if cfg.joint_noise > 0:
            pos += self.rng.normal(0.0, cfg.joint_noise, pos.shape)
            vel += self.rng.normal(0.0, cfg.joint_noise, vel.shape)
        msg.position, msg.velocity = pos.tolist(), vel.tolist()
        msg.effort = [*d.ctrl[self.env.arm_ctrl].tolist(), *d.actuator_force[self.env.grip_ctrl].tolist()]
        self._publish(self.pub_joint, msg)
        if self.applied_new:
            self.applied_new = False
            self._publish(self.pub_applied, Header(stamp=self.effort_stamp, frame_id="applied"))

    def _publish_aux(self, stamp: float) -> None:
        env, d, cfg = self.env, self.data, self.cfg
        ts = to_stamp(stamp)
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, d.site_xmat[env.ee_site])
        if quat @ env.home_quat < 0:
            quat = -quat
        pos = d.site_xpos[env.ee_site].copy()
        if cfg.pose_noise > 0:
            pos += self.rng.normal(0.0, cfg.pose_noise, 3)
        pose = PoseStamped()
        base = cfg.frame_prefix + "base_link"
        pose.header.stamp, pose.header.frame_id = ts, base
        set_pose(pose.pose, pos, quat)
        self._publish(self.pub_pose, pose)
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(self.model, d, mujoco.mjtObj.mjOBJ_SITE, env.ee_site, vel, 0)
        tw = TwistStamped()
        tw.header.stamp, tw.header.frame_id = ts, base
        tw.twist.angular.x, tw.twist.angular.y, tw.twist.angular.z = (float(v) for v in vel[:3])
        tw.twist.linear.x, tw.twist.linear.y, tw.twist.linear.z = (float(v) for v in vel[3:])
        self._publish(self.pub_twist, tw)
        ft = d.sensordata[env.ft_adr]
        wr = WrenchStamped()
        wr.header.stamp, wr.header.frame_id = ts, cfg.frame_prefix + "ft"
        wr.wrench.force.x, wr.wrench.force.y, wr.wrench.force.z = (float(v) for v in ft[:3])
        wr.wrench.torque.x, wr.wrench.torque.y, wr.wrench.torque.z = (float(v) for v in ft[3:])
        self._publish(self.pub_wrench, wr)
        if self.obj_body >= 0:
            obj = PoseStamped()
            obj.header.stamp, obj.header.frame_id = ts, base
            obj_pos = env._object_state()[:3]
            set_pose(obj.pose, obj_pos, d.xquat[self.obj_body])
            self._publish(self.pub_object, obj)
        fingers = JointState(name=list(FINGER_JOINTS), position=d.qpos[self.qadr[7:]].tolist(),
                             velocity=d.qvel[self.vadr[7:]].tolist())
        fingers.header.stamp = ts
        self._publish(self.pub_fingers, fingers)
        _, success, _ = env._evaluate()
        self._publish(self.pub_success, Bool(data=bool(success)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        if self._camera_thread.is_alive():
            self._camera_thread.join(timeout=2.0)
        if self.command_sub is not None:
            self.command_sub.close()


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``robot-rl-arm-hardware`` (ROS 2 executable ``arm_hardware``)."""
    return run_node(ArmHardwareNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
