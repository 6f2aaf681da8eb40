"""RosCarEnv: the Drive task on a ROS 2 car described by a car profile (:mod:`robot_rl.robots.car_profile`).

Same action and observation layout as the sim Drive task (:mod:`robot_rl_sim.car`), computed by the same code
(:mod:`robot_rl.robots.drive_state`), so a policy trained in sim drives the car unchanged: action ``[forward speed,
yaw rate]`` in [-1, 1], scaled by the profile's ``limits`` and sent as ``policy/cmd_vel`` (geometry_msgs/Twist) to
the car safety node, which checks it again and sends it to the driver in the profile's interface. State: the body
twist from odometry, the heading and lateral offset from the pose of ``base_frame`` in ``map_frame`` (TF) projected
on the track map, the next checkpoint in the car frame, and the wall distances from the lidar scan moved into the
car frame. Reward, checkpoints and success (a lap) as in sim; a wall contact (a scan return closer than
``collision.distance``, or the profile's contact topic) ends the episode.

First safety layer: non-finite actions become a stop, actions are clipped to [-1, 1]. ``step`` runs at
``control_hz``: it publishes, sleeps to the next period and returns the newest observation (odometry stamped in this
period). ``reset`` stops the car and calls ``reset_service`` (the rehearsal's car hardware puts the car at a start
pose), or, with none, waits for Enter on the terminal once the operator has put the car on the track.

The ROS 2 connection is made on the first ``reset``: building the env only to read its spaces touches no robot.
Make it by config: ``env.id: robot_rl.envs.ros_car_env:robot_rl/RosCar-v0`` with ``env.kwargs.profile``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import register, registry

from robot_rl.envs.contract import PAUSED, RobotUnavailable
from robot_rl.envs.estop import EstopLatch
from robot_rl.robots.drive_state import LapProgress, drive_state_head, ranges_from_scan, scan_in_car_frame
from robot_rl.robots.profile import load_profile, with_overrides
from robot_rl.robots.track import TrackMap
from robot_rl.ros.profile_check import ProfileCheck
from robot_rl.ros.tf_buffer import TfBuffer
from robot_rl.safety.limits import check_action


@dataclass
class RosCarEnvConfig:
    """Parameters of the ROS 2 car env (the task fields mean what they mean in the sim Drive task)."""

    profile: str = "diff_drive"
    """Car profile: bundled name (``diff_drive``, ``ackermann``, ``rehearsal/...``) or YAML path."""
    profile_overrides: dict[str, Any] = field(default_factory=dict)
    """Fields of the profile replaced (nested sections merged), e.g. ``{"scan": {"topic": "/lidar/scan"}}``."""
    namespace: str = ""
    """ROS 2 namespace of the env's node (relative topic names resolve in it)."""
    control_hz: float = 20.0
    """Policy rate."""
    max_episode_steps: int = 400
    """Time limit in control steps."""
    n_checkpoints: int = 12
    """Checkpoints evenly spaced along the centreline."""
    checkpoints_to_success: int = 0
    """Checkpoints to pass for success; 0 = n_checkpoints (one lap)."""
    checkpoint_reward: float = 1.0
    """Reward per checkpoint passed (in order)."""
    dense_reward: bool = False
    """Add ``progress_reward`` per metre of progress along the centreline."""
    progress_reward: float = 1.0
    """dense_reward only: reward per metre of progress."""
    collision_penalty: float = 1.0
    """Subtracted from the reward on a wall contact (which ends the episode)."""
    n_ranges: int = 7
    """Wall range readings in the state (evenly over +-90 deg around the heading)."""
    range_max: float = 3.0
    """Range readings are capped at this distance (m)."""
    reset_service: str = ""
    """std_srvs/Trigger service that puts the car at a start pose (the rehearsal's ``car_hardware/reset``); "" = the
    operator does, and presses Enter."""
    connect_timeout: float = 30.0
    """Seconds to wait for the profile's topics, TF and the safety node at the first reset."""
    estop_wait: float = 600.0
    """How long (s) a reset waits for a latched e-stop to be reset (the safety node's ``~/reset_estop``) before an
    error; steps while it is latched are held periods (nothing recorded, not steps of the episode)."""
    obs_timeout: float = 3.0
    """Seconds ``step`` waits for fresh odometry before raising (the car graph stalled); a shorter pause is ridden
    out (an observation is never built from the odometry an earlier one used)."""
    require_safety: bool = True
    """Refuse to run without the safety node (its ``safety_state`` topic and its command input)."""
    use_sim_time: bool = False
    """Follow ``/clock`` (the rehearsal with use_sim_time) instead of the wall clock."""

    def validate(self) -> None:
        if self.control_hz <= 0 or self.max_episode_steps <= 0 or self.n_checkpoints < 1:
            raise ValueError("control_hz, max_episode_steps and n_checkpoints must be > 0")
        if min(self.checkpoints_to_success, self.n_ranges, self.collision_penalty) < 0 or self.range_max <= 0:
            raise ValueError("checkpoints_to_success, n_ranges and collision_penalty must be >= 0, range_max > 0")


def _yaw(quat_wxyz: np.ndarray) -> float:
    w, x, y, z = quat_wxyz
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


class RosCarEnv(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": [], "render_fps": 20}
    drives_hardware = True  # the learner never evaluates on it (it would drive the car beside the actor)

    def __init__(self, cfg: RosCarEnvConfig | None = None, render_mode: str | None = None, **overrides: Any) -> None:
        self.cfg = dataclasses.replace(cfg or RosCarEnvConfig(), **overrides)
        self.cfg.validate()
        profile = load_profile(self.cfg.profile, "car")
        if self.cfg.profile_overrides:
            profile = with_overrides(profile, self.cfg.profile_overrides)
        self.profile = profile
        t = profile.track
        self.track = TrackMap(tuple(t.size), t.corner_radius, t.width)
        self.lap = LapProgress(self.track, self.cfg.n_checkpoints)
        self.n_success = self.cfg.checkpoints_to_success or self.cfg.n_checkpoints
        self.render_mode = None
        self.period = 1.0 / self.cfg.control_hz
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"state": gym.spaces.Box(-np.inf, np.inf, (8 + self.cfg.n_ranges,), np.float32)})
        self.link: Any = None
        self.steps = self.collisions = self.overruns = 0
        self.holding = False  # set for a held period by envs/held.py
        self.estop = EstopLatch(self.safety_state, self.cfg.estop_wait)
        self.rejections: dict[str, int] = {}
        self.publish_times: list[float] = []
        self._tick = 0.0
        self._obs_stamp = -math.inf  # the odometry message the last observation was built from
        self._laser: tuple[tuple[float, float], float] | None = None

    def check_robot(self) -> None:
        """Checks the profile against the live graph from a short-lived node (``robot-rl train``'s preflight);
        ``ConfigError`` naming the profile field."""
        from robot_rl.ros.link import check_live  # optional: ros2 (imports rclpy)

        check_live(self.profile, self.cfg.namespace, self.cfg.use_sim_time, self.cfg.connect_timeout,
                   self.cfg.require_safety)

    # ------------------------------------------------------------------ ROS 2
    def _connect(self) -> None:
        # optional: ros2
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import LaserScan
        from std_msgs.msg import Bool, String

        from robot_rl.ros.clock import NodeTime  # optional: ros2 (imports rclpy)
        from robot_rl.ros.link import RosLink  # optional: ros2 (imports rclpy)

        cfg, p = self.cfg, self.profile
        link = RosLink("car_env", cfg.namespace, use_sim_time=cfg.use_sim_time)
        self.link = link
        self.clock = NodeTime(link.node, real=time.time)
        try:
            ProfileCheck(link.node, p, cfg.connect_timeout).car()  # nothing moves before the profile fits
            self.tf = TfBuffer()
            self.tf.subscribe(link.node)
            tw = lambda m: (m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.angular.z)  # noqa: E731
            link.subscribe("odom", Odometry, p.odom.topic, tw, depth=8)
            # lidar drivers publish best effort (sensor data QoS); a best-effort subscription also takes reliable ones
            link.subscribe("scan", LaserScan, p.scan.topic, lambda m: m, depth=2, best_effort=True)
            if p.collision.source == "topic":
                link.subscribe("collision", Bool, p.collision.topic, lambda m: bool(m.data), stamped=False, depth=64)
            link.subscribe("safety", String, "safety_state", lambda m: m.data, stamped=False, latched=True, depth=1)
            self._pub = link.publisher("cmd", Twist, "policy/cmd_vel")
            self._Twist = Twist
            missing = link.wait_for(["odom", "scan"] + ["safety"] * cfg.require_safety, cfg.connect_timeout)
            if missing:
                raise TimeoutError(f"no messages on {missing} (namespace {cfg.namespace!r}): is the car graph up?")
            if cfg.require_safety and link.wait_subscribed(["cmd"], cfg.connect_timeout):
                raise TimeoutError(f"nobody subscribes to policy/cmd_vel (namespace {cfg.namespace!r}): is the car "
                                   "safety node up?")
            scan = link.streams["scan"].latest()[1]
            pos, quat, _ = self.tf.wait_lookup(p.base_frame, scan.header.frame_id.lstrip("/"), cfg.connect_timeout)
            self._laser = ((float(pos[0]), float(pos[1])), _yaw(quat))
            self.clock.wait_for_clock(cfg.connect_timeout)
        except Exception:
            self.close()
            raise

    def _publish(self, v: float, w: float) -> None:
        msg = self._Twist()
        msg.linear.x, msg.angular.z = float(v), float(w)
        self._pub.publish(msg)
        self.publish_times.append(self.clock.now())

    def pose(self, after: float = -math.inf) -> tuple[np.ndarray, float]:
        """(xy [2], yaw) of the car on the track map (``map_frame`` moved to the track's ``origin``): the newest TF,
        once it is stamped at or after ``after``."""
        deadline = time.monotonic() + self.cfg.obs_timeout
        ox, oy, oyaw = self.profile.track.origin
        c, s = math.cos(oyaw), math.sin(oyaw)
        while True:
            pos, quat, stamp = self.tf.lookup(self.profile.map_frame, self.profile.base_frame)
            if stamp >= after:
                dx, dy = pos[0] - ox, pos[1] - oy
                return np.array([c * dx + s * dy, -s * dx + c * dy]), _yaw(quat) - oyaw
            if time.monotonic() > deadline:
                raise TimeoutError(f"no fresh {self.profile.map_frame} -> {self.profile.base_frame} transform within "
                                   f"{self.cfg.obs_timeout} s (car graph stalled?)")
            time.sleep(0.001)

    def _observe(self, after: float) -> tuple[np.ndarray, dict[str, Any]]:
        from robot_rl.ros.msgs import from_stamp  # optional: ros2 (ROS message packages)

        if not self.link.streams["odom"].wait_newer(after, self.cfg.obs_timeout, than=self._obs_stamp):
            raise RobotUnavailable(f"no fresh odometry within {self.cfg.obs_timeout} s (car graph stalled?)")
        stamp, twist = self.link.streams["odom"].latest()
        self._obs_stamp = stamp
        xy, yaw = self.pose(after)
        s, lateral, nearest = self.track.project(xy)
        self.lap.update(s)
        scan = self.link.streams["scan"].latest()[1]
        (lx, ly), lyaw = self._laser
        bearing, dist = scan_in_car_frame(scan.ranges, scan.angle_min, scan.angle_increment, scan.range_min, (lx, ly),
                                          lyaw)
        ranges = ranges_from_scan(bearing, dist, scan.angle_increment, self.cfg.n_ranges, self.cfg.range_max)
        self._min_range = float(dist.min()) if len(dist) else math.inf  # the closest return
        head = drive_state_head(self.track, xy, yaw, twist, lateral, nearest, self.lap.next_checkpoint_xy())
        state = np.concatenate([head, ranges]).astype(np.float32)
        # the scan read beside the odometry
        return state, {"stamp": stamp, "obs_skew": abs(stamp - from_stamp(scan.header.stamp))}

    def _collided(self, since: float) -> bool:
        p = self.profile
        if p.collision.source == "scan":
            return self._min_range < p.collision.distance
        if p.collision.source == "topic":
            return any(hit for t, hit in list(self.link.streams["collision"].items) if hit and t >= since)
        return False

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        if self.link is None:
            self._connect()
        self.estop.wait_reset()
        self._publish(0.0, 0.0)
        if self.cfg.reset_service:
            from std_srvs.srv import Trigger  # optional: ros2

            self.link.call(Trigger, self.cfg.reset_service)
        else:
            print("put the car on the track, then press Enter", file=sys.stderr, flush=True)
            sys.stdin.readline()
        self._tick = self.clock.now()
        self._obs_stamp = -math.inf  # a restarted driver's clock (sim time) may start again below the last stamp
        if "collision" in self.link.streams:
            self.link.streams["collision"].clear()
        xy, _ = self.pose(self._tick)
        self.lap.reset(self.track.project(xy)[0])  # the lap starts where the car stands
        state, info = self._observe(self._tick)
        self.steps = self.collisions = 0
        info.update(is_success=False, checkpoints=0, collisions=0, progress=0.0)
        return {"state": state}, info

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        if self.link is None:
            raise RuntimeError("call reset() before step()")
        estop = self.halted()  # the safety node rejects every command: the period is held
        action, reasons = check_action(np.zeros(2, np.float32) if estop else action, np.zeros(2, np.float32))
        for r in reasons:
            self.rejections[r] = self.rejections.get(r, 0) + 1
        lim = self.profile.limits
        self._publish(float(action[0]) * lim.max_speed, float(action[1]) * lim.max_yaw_rate)
        start = self._tick
        self._tick, overran = self.clock.next_period(self._tick, self.period, self.cfg.obs_timeout)
        self.overruns += overran
        state, info = self._observe(self._tick - 0.5 * self.period)
        cfg = self.cfg
        collided = self._collided(start)
        self.collisions += collided
        reward = cfg.checkpoint_reward * self.lap.new_checkpoints - cfg.collision_penalty * collided
        if cfg.dense_reward:
            reward += cfg.progress_reward * self.lap.delta
        success = self.lap.checkpoints >= self.n_success
        if self.holding or estop:  # a held period (envs/held.py) is not one of the episode's steps, ends nothing
            terminated = truncated = False
        else:
            self.steps += 1
            terminated = bool(success or collided)
            truncated = bool(self.steps >= cfg.max_episode_steps and not terminated)
        if terminated:
            self._publish(0.0, 0.0)  # the episode is over: the car stops now, not at the watchdog
        info.update(is_success=bool(success), checkpoints=self.lap.checkpoints, collisions=self.collisions,
                    progress=self.lap.progress, rejected_actions=sum(self.rejections.values()),
                    overruns=self.overruns, safety_state=self.safety_state())
        if estop:
            info[PAUSED] = True  # nothing to learn from: the actor records nothing
        return {"state": state}, float(reward), terminated, truncated, info

    def halted(self) -> bool:
        """The safety node's e-stop is latched: every command is rejected, the car stands (a held period)."""
        return self.estop.latched()

    def safety_state(self) -> str:
        item = self.link.streams["safety"].latest() if self.link is not None else None
        return item[1] if item else "unknown"

    def close(self) -> None:
        if self.link is not None:
            self.link.close()
            self.link = None


if "robot_rl/RosCar-v0" not in registry:
    register(id="robot_rl/RosCar-v0", entry_point="robot_rl.envs.ros_car_env:RosCarEnv", disable_env_checker=True)

__all__ = ["RosCarEnv", "RosCarEnvConfig"]
