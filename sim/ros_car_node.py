"""MuJoCo as ROS 2 hardware for the car: the Drive task's differential-drive car in real time.

Input ``cmd_vel`` (geometry_msgs/Twist: ``linear.x`` m/s, ``angular.z`` rad/s), turned into wheel speeds by
:func:`robot_rl_controllers.driving.twist_to_wheel_speeds` (the law the sim env uses). Outputs: ``odom``
(nav_msgs/Odometry, world frame pose, body frame twist), ``joint_states`` (the wheel joints of the URDF) and
``collision`` (std_msgs/Bool, wall contact) at ``odom_rate_hz``; ``camera/front/image_raw`` with
``camera/front/camera_info`` at ``camera_rate_hz`` when ``image_size > 0`` (frame ``front_camera_optical``);
``/tf`` with the odometry (``odom`` -> ``base_link``, the wheels), ``/tf_static`` (the camera mount) and
``robot_description`` (URDF, ``robot_rl.ros.tf``). Service ``~/reset`` (std_srvs/Trigger) puts the car back at a
start pose at rest. Without a command for ``command_timeout`` the wheels
are stopped. ``command_latency`` delays commands before they act.

With ``profile`` (a car profile, :mod:`robot_rl.robots.car_profile`) the node speaks that profile's driver instead
(:mod:`robot_rl_sim.car_driver_emulation`): its command topic and semantics, odometry on its topic in its frames,
``sensor_msgs/LaserScan`` on its scan topic (``scan_rate_hz``) with the laser on ``/tf_static``; no robot_rl-only
topics (wall contact on the sim-only ``sim/collision``).

Each physics step keeps its scheduled time however busy the machine (:mod:`robot_rl_sim.step_clock`). With
``reality`` (:mod:`robot_rl_sim.car_reality`) the car differs from the training sim as a real one does: command and
odometry latency, drivetrain and steering lags, a steering trim, an odometry gain error, another floor friction.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from geometry_msgs.msg import Twist, TwistStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState, LaserScan  # noqa: E402
from std_msgs.msg import Bool  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from robot_rl.robots.profile import load_profile  # noqa: E402
from robot_rl.ros.msgs import from_stamp, image_msg, to_stamp  # noqa: E402
from robot_rl.ros.node import run_node  # noqa: E402
from robot_rl.ros.params import declare_config  # noqa: E402
from robot_rl.ros.tf import MujocoFrames, TfPublisher, camera_info  # noqa: E402
from robot_rl_controllers.driving import twist_to_wheel_speeds  # noqa: E402
from robot_rl_sim.car import DriveEnv  # noqa: E402
from robot_rl_sim.car_driver_emulation import DRIVERS, Lidar, ackermann_twist, laser_frame  # noqa: E402
from robot_rl_sim.car_model import LIDAR_HEIGHT, WHEEL_JOINTS, WHEEL_RADIUS, set_floor_grip  # noqa: E402
from robot_rl_sim.car_reality import DrivetrainLags, load_car_reality  # noqa: E402
from robot_rl_sim.ros_controller_manager import serve_list_controllers  # noqa: E402
from robot_rl_sim.step_clock import StepClock  # noqa: E402


@dataclass
class CarHardwareConfig:
    """Parameters of the sim car hardware node (all ROS 2 parameters)."""

    startup_only: ClassVar[tuple[str, ...]] = ("seed", "odom_rate_hz", "image_size", "camera_rate_hz",
                                               "frame_prefix", "profile", "scan_rate_hz", "reality")
    """Read when the node starts (rates, scene, cameras): read-only parameters."""

    seed: int = 0
    """Seed of the start poses."""
    odom_rate_hz: float = 50.0
    """Rate of odom, collision and /tf (odom -> base_link, the wheels)."""
    frame_prefix: str = ""
    """Prepended to every frame id this node publishes (several robots in one TF tree), e.g. ``car1/``."""
    image_size: int = 0
    """Side of the square front camera image (0 = no camera)."""
    camera_rate_hz: float = 20.0
    """Camera frame rate."""
    profile: str = ""
    """Car profile whose driver this node emulates (bundled name or YAML path); "" = robot_rl's own topics."""
    scan_rate_hz: float = 40.0
    """Rate of the emulated lidar's scans (with a profile)."""
    reality: str = ""
    """How this car differs from the training sim (:mod:`robot_rl_sim.car_reality`): a bundled profile (mild,
    typical, hard), a YAML path, or "" (none). Applied to this node's physics and outputs only."""
    command_latency: float = 0.0
    """Injected delay (s) before a command takes effect."""
    command_timeout: float = 0.25
    """Without a command for this long (s) the wheels are stopped."""
    odom_pose_std: float = 0.0
    """Injected Gaussian noise on the odometry pose (m for x, y; rad for yaw). The published pose covariance is its
    variance (at least ODOM_VARIANCE_FLOOR: the sim's own pose is exact)."""
    odom_twist_std: float = 0.0
    """Injected Gaussian noise on the odometry twist (m/s, rad/s); the published twist covariance is its variance."""

    def validate(self) -> None:
        if min(self.odom_rate_hz, self.camera_rate_hz, self.command_timeout, self.scan_rate_hz) <= 0:
            raise ValueError("odom_rate_hz, camera_rate_hz, scan_rate_hz and command_timeout must be > 0")
        if min(self.command_latency, self.image_size, self.odom_pose_std, self.odom_twist_std) < 0:
            raise ValueError("command_latency, image_size, odom_pose_std and odom_twist_std must be >= 0")
        load_car_reality(self.reality)  # a bad name or file fails at start, naming it


ODOM_VARIANCE_FLOOR = 1e-9
"""Variance published for exact sim quantities: zero would read as "unknown" to filters such as robot_localization."""


def odom_covariance(std: float, noisy: tuple[int, ...] = (0, 1, 5)) -> list[float]:
    """Row-major 6x6 covariance of (x, y, z, roll, pitch, yaw) or (vx, vy, vz, wx, wy, wz), the form nav_msgs/Odometry
    carries: independent dimensions, variance ``std**2`` on the ``noisy`` ones (the planar x, y, yaw the noise is
    added to), the floor on the exact rest."""
    diagonal = [max(std * std, ODOM_VARIANCE_FLOOR) if i in noisy else ODOM_VARIANCE_FLOOR for i in range(6)]
    return [diagonal[i // 6] if i % 7 == 0 else 0.0 for i in range(36)]


class CarHardwareNode(Node):
    """The sim car in real time (see the module docstring)."""

    def __init__(self, cfg: CarHardwareConfig | None = None, name: str = "car_hardware") -> None:
        super().__init__(name)
        self.cfg = declare_config(self, cfg or CarHardwareConfig())

        self.env = DriveEnv(image_size=0)
        self.env.reset(seed=self.cfg.seed)
        self.model, self.data = self.env.model, self.env.data
        self.dt = float(self.model.opt.timestep)
        self.lock = threading.Lock()
        self._queue: deque[tuple[float, float, float]] = deque()
        self.last_cmd = -math.inf
        self.noise = np.random.default_rng(self.cfg.seed)
        self.reality = load_car_reality(self.cfg.reality)
        use_sim = bool(self.get_parameter("use_sim_time").value)
        self.pub_clock = self.create_publisher(Clock, "/clock", 10) if use_sim else None
        self.sim_t = 0.0
        self.step_time = 0.0  # the current physics step's time (now())
        self._interfaces()
        m = self.model
        wheel_ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in WHEEL_JOINTS]
        self.wheel_q = [int(m.jnt_qposadr[j]) for j in wheel_ids]
        self.wheel_v = [int(m.jnt_dofadr[j]) for j in wheel_ids]
        self._apply_reality()
        self.pub_cam = self.create_publisher(Image, "camera/front/image_raw", 2) if self.cfg.image_size else None
        self.pub_cam_info = (self.create_publisher(CameraInfo, "camera/front/camera_info", 2) if self.cfg.image_size
                             else None)
        self.frames = MujocoFrames(self.model, "car", self.odom_frame, cameras=("front",), move_root=True,
                                   rename={"car": self.base_frame})
        laser = [] if self.lidar is None else [(self.base_frame, laser_frame(self.base_frame),
                                                np.array([self.lidar.laser_x, 0.0, LIDAR_HEIGHT]), np.eye(4)[0])]
        self.tf = TfPublisher(self, self.frames, "robot_rl_car", self.cfg.frame_prefix, extra_static=laser)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="physics", daemon=True)
        self._thread.start()

    def _interfaces(self) -> None:
        """Topics: robot_rl's own, or the profile's driver's."""
        cfg = self.cfg
        profile = load_profile(cfg.profile, "car") if cfg.profile else None
        self.lidar = None
        if profile is None:
            self.odom_frame, self.base_frame, self.timeout = "odom", "base_link", cfg.command_timeout
            self.pub_odom = self.create_publisher(Odometry, "odom", 10)
            # the wheels are joints of the URDF: robot_state_publisher (and RViz) need their positions
            self.pub_joints = self.create_publisher(JointState, "joint_states", 10)
            self.pub_collision = self.create_publisher(Bool, "collision", 10)
            self.create_subscription(Twist, "cmd_vel", self._on_cmd, 10)
            return
        facts = DRIVERS[profile.command.interface]
        if profile.command.controller:  # diff_drive_controller under a controller manager
            serve_list_controllers(self, profile.command.controller_manager, {
                "joint_state_broadcaster": "joint_state_broadcaster/JointStateBroadcaster",
                profile.command.controller: "diff_drive_controller/DiffDriveController"})
        self.odom_frame, self.base_frame, self.timeout = profile.map_frame, profile.base_frame, facts.cmd_timeout
        self.pub_odom = self.create_publisher(Odometry, profile.odom.topic, 10)
        self.pub_joints = self.create_publisher(JointState, "joint_states", 10) if facts.joint_states else None
        self.pub_collision = self.create_publisher(Bool, "sim/collision", 10)
        self.pub_scan = self.create_publisher(LaserScan, profile.scan.topic, 10)
        self.lidar = Lidar(self.model, self.env.car_body, WHEEL_RADIUS + LIDAR_HEIGHT, facts)
        if profile.command.interface == "diff_drive":
            self.create_subscription(TwistStamped, profile.command.topic, self._on_twist_stamped, 10)
        else:
            # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
            from ackermann_msgs.msg import AckermannDriveStamped

            wheelbase = profile.command.wheelbase
            self.create_subscription(AckermannDriveStamped, profile.command.topic,
                                     lambda m: self._command(*ackermann_twist(m.drive.speed, m.drive.steering_angle,
                                                                              wheelbase)), 10)

    def _apply_reality(self) -> None:
        """The reality profile on this node's physics and outputs (never on what training sees: the env reads
        topics)."""
        m, reality = self.model, self.reality
        self.drivetrain = DrivetrainLags(reality.speed_time_constant, reality.yaw_rate_time_constant,
                                         reality.trim_curvature, self.dt)
        self.target = (0.0, 0.0)  # the commanded twist the lags follow
        self._outbox: deque[tuple[float, object, object]] = deque()  # (due, publisher, message): odom_latency
        if reality.floor_friction:
            set_floor_grip(m, reality.floor_friction)
        if not reality.nominal:
            self.get_logger().info(f"reality profile {reality.name}: {reality}")

    def _on_twist_stamped(self, msg: TwistStamped) -> None:
        """diff_drive_controller: a zero stamp is now; a command as old as the timeout is ignored."""
        stamp = from_stamp(msg.header.stamp)
        if stamp and self.now() - stamp >= self.timeout:
            return
        self._command(msg.twist.linear.x, msg.twist.angular.z)

    def now(self) -> float:
        """Physics time with ``use_sim_time``, else wall clock (commands, latency and timeout count it)."""
        return self.sim_t if self.pub_clock is not None else time.time()

    def _on_cmd(self, msg: Twist) -> None:
        self._command(msg.linear.x, msg.angular.z)

    def _command(self, v: float, w: float) -> None:
        v, w = float(v), float(w)
        if math.isfinite(v) and math.isfinite(w):
            with self.lock:
                self._queue.append((self.now() + self.cfg.command_latency + self.reality.command_latency, v, w))

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self.lock:
            self.env._reset_task(self.env.np_random)
            self.drivetrain.start()  # at rest: the drivetrain's lags start over
            self.target = (0.0, 0.0)
        response.success, response.message = True, "car placed at a start pose"
        return response

    def _loop(self) -> None:
        try:
            self._run()
        finally:
            self.env.close()  # the renderer's GL context is current on this thread: release it here, not at exit

    def _run(self) -> None:
        m, d, env, cfg = self.model, self.data, self.env, self.cfg
        clock, step = StepClock(self.dt), 0
        odom_every = max(1, int(round(1.0 / (cfg.odom_rate_hz * self.dt))))
        cam_every = max(1, int(round(1.0 / (cfg.camera_rate_hz * self.dt))))
        scan_every = max(1, int(round(1.0 / (cfg.scan_rate_hz * self.dt))))
        while not self._stop.is_set() and self.context.ok():
            scheduled = clock.tick()
            now = self.now() if self.pub_clock is not None else scheduled
            self.step_time = now
            with self.lock:
                while self._queue and self._queue[0][0] <= now:
                    _, v, w = self._queue.popleft()
                    self.target = (v, w)
                    self.last_cmd = now
                if now - self.last_cmd > self.timeout:
                    self.target = (0.0, 0.0)
                self._drive_wheels()
                mujoco.mj_step(m, d)
                step += 1
                self.sim_t = step * self.dt  # physics time (a sum of dt would drift)
                stamp = self.sim_t if self.pub_clock is not None else now
                if self.pub_clock is not None and step % odom_every == 0:  # use_sim_time: this node is the clock
                    self.pub_clock.publish(Clock(clock=to_stamp(stamp)))
                try:
                    if step % odom_every == 0:
                        mujoco.mj_forward(m, d)
                        self._publish_odom(stamp)
                    if self.lidar is not None and step % scan_every == 0:
                        mujoco.mj_forward(m, d)
                        self._publish_scan(stamp)
                    if self.pub_cam is not None and step % cam_every == 0:
                        mujoco.mj_forward(m, d)
                        frame = f"{cfg.frame_prefix}front_camera_optical"
                        self.pub_cam.publish(image_msg(env.render_camera("front", cfg.image_size), stamp, frame))
                        info = camera_info(m, "front", cfg.image_size, cfg.image_size, frame)
                        info.header.stamp = to_stamp(stamp)
                        self.pub_cam_info.publish(info)
                    self._flush(now)
                except Exception:  # noqa: BLE001  (rclpy shut down under us: stop quietly)
                    if self.context.ok() and not self._stop.is_set():
                        raise
                    return

    def _drive_wheels(self) -> None:
        """The wheel servos' targets: the commanded twist through the reality's drivetrain lags and trim."""
        left, right = twist_to_wheel_speeds(*self.drivetrain.step(*self.target), self.env.drive)
        self.data.ctrl[self.env.wheel_ctrl[0]], self.data.ctrl[self.env.wheel_ctrl[1]] = float(left), float(right)

    def _publish(self, pub: object, msg: object) -> None:
        """Publishes now, or after the reality's ``odom_latency`` (the stamp keeps the state's time)."""
        if self.reality.odom_latency <= 0:
            pub.publish(msg)
        else:
            self._outbox.append((self.step_time + self.reality.odom_latency, pub, msg))

    def _flush(self, now: float) -> None:
        """Publishes the delayed messages that are due (one latency for all: the outbox stays in time order)."""
        while self._outbox and self._outbox[0][0] <= now:
            _, pub, msg = self._outbox.popleft()
            pub.publish(msg)

    def _publish_odom(self, stamp: float) -> None:
        env, d = self.env, self.data
        q, v = d.qpos[env.car_q], d.qvel[env.car_v]
        _, yaw = env.car_pose()
        c, s = math.cos(yaw), math.sin(yaw)
        msg = Odometry()
        prefix = self.cfg.frame_prefix
        msg.header.stamp = to_stamp(stamp)
        msg.header.frame_id, msg.child_frame_id = prefix + self.odom_frame, prefix + self.base_frame
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        p.x, p.y, p.z = float(q[0]), float(q[1]), float(q[2])
        o.w, o.x, o.y, o.z = (float(x) for x in q[3:7])
        scale = 1.0 + self.reality.odometry_speed_scale_error  # the wheel odometry's gain error
        msg.twist.twist.linear.x = float(c * v[0] + s * v[1]) * scale
        msg.twist.twist.linear.y = float(-s * v[0] + c * v[1]) * scale
        msg.twist.twist.angular.z = float(v[5]) * scale
        pose_std, twist_std = self.cfg.odom_pose_std, self.cfg.odom_twist_std
        if pose_std > 0:  # x, y and yaw (a yaw turn about the body's z keeps the quaternion's roll and pitch)
            dx, dy, dyaw = self.noise.normal(0.0, pose_std, 3)
            p.x, p.y = p.x + dx, p.y + dy
            cw, sz = math.cos(dyaw / 2), math.sin(dyaw / 2)  # the turn (cw, 0, 0, sz) composed before the pose
            w0, x0, y0, z0 = o.w, o.x, o.y, o.z
            o.w, o.x, o.y, o.z = cw * w0 - sz * z0, cw * x0 - sz * y0, cw * y0 + sz * x0, cw * z0 + sz * w0
        if twist_std > 0:
            lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
            nx, ny, nz = self.noise.normal(0.0, twist_std, 3)
            lin.x, lin.y, ang.z = lin.x + nx, lin.y + ny, ang.z + nz
        msg.pose.covariance = odom_covariance(pose_std)
        msg.twist.covariance = odom_covariance(twist_std)
        self._publish(self.pub_odom, msg)
        if self.pub_joints is not None:
            joints = JointState(name=list(WHEEL_JOINTS), position=[float(d.qpos[i]) for i in self.wheel_q],
                                velocity=[float(d.qvel[i]) for i in self.wheel_v])
            joints.header.stamp = msg.header.stamp
            self._publish(self.pub_joints, joints)
        tf = self.tf.moving(d, msg.header.stamp, root_pose=((p.x, p.y, p.z), (o.w, o.x, o.y, o.z)))
        if tf is not None:
            self._publish(self.tf.pub, tf)
        self._publish(self.pub_collision, Bool(data=bool(d.sensordata[env.wall_sensor] > 0)))

    def _publish_scan(self, stamp: float) -> None:
        xy, yaw = self.env.car_pose()
        lidar = self.lidar
        msg = LaserScan(angle_min=float(lidar.angle_min), angle_max=float(lidar.angles[-1]),
                        angle_increment=float(lidar.increment), range_min=0.02, range_max=float(lidar.range_max),
                        scan_time=float(1.0 / self.cfg.scan_rate_hz),
                        ranges=[float(r) for r in lidar.scan(self.data, xy, yaw)])
        msg.header.stamp = to_stamp(stamp)
        msg.header.frame_id = self.cfg.frame_prefix + laser_frame(self.base_frame)
        self._publish(self.pub_scan, msg)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``robot-rl-car-hardware`` (ROS 2 executable ``car_hardware``)."""
    return run_node(CarHardwareNode, argv)
