"""Drive: a differential-drive car laps a closed walled track (FastRLAP-style checkpoints), ``robot_rl/Drive-v0``.

Action (float32 in [-1, 1]): a twist ``[forward speed, yaw rate]`` scaled by ``max_speed`` (m/s) and
``max_yaw_rate`` (rad/s), the ``geometry_msgs/Twist`` a ROS 2 driving controller receives; the env turns it into
wheel speeds with :func:`robot_rl_controllers.driving.twist_to_wheel_speeds` (the same law the node uses).

State (float32, all in the car frame, what a real car estimates from wheel odometry/IMU, a 2-D lidar and a
localiser on a known track map): forward speed, lateral speed (m/s), yaw rate (rad/s), sin/cos of the heading
relative to the track direction, lateral offset from the centreline (m, + = left), next checkpoint position (x
forward, y left, m), then ``n_ranges`` wall distances (m, capped at ``range_max``) on rays spread over +-90 deg.
Pixels (``image_size > 0``): the forward camera ``front`` on the car (``top`` overlooks the track).

Reward (FastRLAP): ``checkpoint_reward`` for each checkpoint passed in order (``n_checkpoints`` evenly spaced along
the centreline, so a lap is worth ``n_checkpoints``), ``- collision_penalty`` on hitting a wall and, with
``dense_reward``, ``progress_reward`` per metre of progress along the centreline (negative when reversing).
Success: ``checkpoints_to_success`` checkpoints passed (default: one lap). On a wall contact the episode ends
(``collision_mode="terminate"``) or the car is put back on the centreline at the last checkpoint passed, at rest
(``"reset_to_checkpoint"``, FastRLAP's autonomous reset), and the episode goes on; ``info["collisions"]`` counts
them. The start pose is random from the seed: anywhere along the track, with a small lateral and heading offset.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

os.environ.setdefault("MUJOCO_GL", "egl")  # must precede the first `import mujoco` (offscreen rendering; base.py)

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from robot_rl.robots.drive_state import LapProgress, drive_state_head, range_angles
from robot_rl.robots.track import pure_pursuit
from robot_rl_controllers.driving import (  # noqa: E402
    DifferentialDriveParams,
    limit_yaw_rate,
    twist_to_wheel_speeds,
)
from robot_rl_sim.base import MujocoTaskEnv, TaskConfig  # noqa: E402
from robot_rl_sim.car_model import (  # noqa: E402
    LIDAR_HEIGHT,
    WHEEL_JOINTS,
    WHEEL_RADIUS,
    WHEEL_TRACK,
    Track,
    build_drive_xml,
)
from robot_rl_sim.car_reality import DrivetrainLags  # noqa: E402
from robot_rl_sim.randomization import RandomizationConfig  # noqa: E402

__all__ = ["DriveConfig", "DriveEnv", "COLLISION_MODES"]

COLLISION_MODES = ("terminate", "reset_to_checkpoint")


@dataclass
class DriveConfig(TaskConfig):
    """Config of the driving task; TaskConfig's fields plus these."""

    max_episode_steps: int = 400
    """Time limit in control steps (20 s at 20 Hz; the expert needs ~11 s for a lap from a standing start)."""
    max_speed: float = 2.0
    """Forward speed (m/s) at action[0] = +-1 (reverse is allowed)."""
    max_yaw_rate: float = 3.0
    """Yaw rate (rad/s, counter-clockwise) at action[1] = +-1."""
    min_turn_radius: float = 0.0
    """A car-like robot's smallest turning radius (m): the yaw rate is limited to ``|speed| / min_turn_radius`` (speed
    at least 0.1 m/s), as an Ackermann car steers (``wheelbase / tan(max steering angle)``: 0.74 m for the
    ``ackermann`` profile's car); 0 = a differential drive, which turns in place. Train a car-like robot's policy
    with its radius: a policy that learned to turn in place cannot on it."""
    max_wheel_speed: float = 50.0
    """Wheel speed limit (rad/s; 2.5 m/s at the rim): larger twists are scaled down keeping the curvature."""
    wheel_torque: float = 0.5
    """Torque limit of each wheel's velocity servo (N m): sets the acceleration (~5.5 m/s^2 from rest)."""
    track_size: tuple[float, float] = (6.0, 4.0)
    """Outer size (x, y) of the rounded-rectangle centreline (m)."""
    corner_radius: float = 1.2
    """Radius of the centreline's corners (m); min(track_size) / 2 gives a stadium."""
    track_width: float = 1.0
    """Distance between the walls (m); the car is 0.34 m wide."""
    n_checkpoints: int = 12
    """Checkpoints evenly spaced along the centreline (a 17.9 m lap by default: one per ~1.5 m)."""
    checkpoints_to_success: int = 0
    """Checkpoints to pass for success; 0 = n_checkpoints (one lap)."""
    checkpoint_reward: float = 1.0
    """Reward per checkpoint passed (in order)."""
    progress_reward: float = 1.0
    """dense_reward only: reward per metre of progress along the centreline (negative when going backwards)."""
    collision_mode: str = "terminate"
    """On a wall contact: "terminate" the episode, or "reset_to_checkpoint" (back to the last checkpoint, go on)."""
    collision_penalty: float = 1.0
    """Subtracted from the reward on each wall contact."""
    n_ranges: int = 7
    """Wall range readings in the state (rays evenly spread over +-90 deg around the heading); 0 = none."""
    range_max: float = 3.0
    """Range readings are capped at this distance (m)."""
    random_start: bool = True
    """Start anywhere along the track (from the seed); False = always at s = 0 (the green checkpoint)."""
    start_lateral_noise: float = 0.15
    """Start lateral offset from the centreline, uniform in [-x, x] (m)."""
    start_heading_noise: float = 0.3
    """Start heading offset from the track direction, uniform in [-x, x] (rad)."""

    def validate(self) -> None:
        for name in ("max_speed", "max_yaw_rate", "max_wheel_speed", "wheel_torque", "corner_radius",
                     "track_width", "range_max", "control_hz"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        for name in ("start_lateral_noise", "start_heading_noise", "collision_penalty", "image_size", "min_turn_radius",
                     "checkpoints_to_success", "n_ranges"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if len(self.track_size) != 2 or min(self.track_size) < 2 * self.corner_radius:
            raise ValueError("track_size must be (x, y) with both sides >= 2 * corner_radius")
        if not 0.5 <= self.track_width <= 2 * self.corner_radius - 0.2:
            raise ValueError("track_width must be >= 0.5 (the car fits) and <= 2 * corner_radius - 0.2 (inner walls)")
        if self.start_lateral_noise > self.track_width / 2 - 0.3:
            raise ValueError("start_lateral_noise must leave the car (0.17 m half-width) clear of the walls")
        if self.n_checkpoints < 1:
            raise ValueError("n_checkpoints must be >= 1")
        if self.collision_mode not in COLLISION_MODES:
            raise ValueError(f"collision_mode must be one of {COLLISION_MODES}, got {self.collision_mode!r}")
        if self.max_episode_steps < 1:
            raise ValueError("max_episode_steps must be >= 1")


class DriveEnv(MujocoTaskEnv):
    """The driving task (see the module docstring). ``DriveEnv(cfg=None, render_mode=None, **overrides)`` with
    DriveConfig field names as overrides, so ``gym.make("robot_rl/Drive-v0", image_size=64)`` works."""

    default_cameras = ("front",)

    def __init__(self, cfg: DriveConfig | None = None, render_mode: str | None = None, **overrides) -> None:
        cfg = DriveConfig(**overrides) if cfg is None else dataclasses.replace(cfg, **overrides)
        if isinstance(cfg.randomization, dict):
            cfg.randomization = RandomizationConfig(**cfg.randomization)
        cfg.track_size = tuple(cfg.track_size)
        cfg.validate()
        self.track = Track(cfg.track_size, cfg.corner_radius, cfg.track_width)
        self.drive = DifferentialDriveParams(WHEEL_TRACK, WHEEL_RADIUS, cfg.max_wheel_speed)
        self._bound = False
        xml = build_drive_xml(self.track, cfg.n_checkpoints, cfg.wheel_torque, cfg.max_wheel_speed)
        super().__init__(xml, cfg, 2, render_mode)

    # ------------------------------------------------------------------ handles
    def _bind(self) -> None:
        """Ids, address slices and buffers (once; the base calls _state() during __init__)."""
        m, cfg = self.model, self.cfg
        self.car_body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "car")
        j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "car")
        self.car_q = slice(int(m.jnt_qposadr[j]), int(m.jnt_qposadr[j]) + 7)
        self.car_v = slice(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + 6)
        self.wheel_ctrl = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in WHEEL_JOINTS]
        sensor = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, "wall_contact")
        self.wall_sensor = int(m.sensor_adr[sensor])
        self._proj_key: tuple[float, float] | None = None
        self.lap = LapProgress(self.track, cfg.n_checkpoints)
        self.n_success = cfg.checkpoints_to_success or cfg.n_checkpoints
        angles = range_angles(cfg.n_ranges)
        self._ray_cos, self._ray_sin = np.cos(angles), np.sin(angles)
        self._ray_vec = np.zeros(3 * cfg.n_ranges)
        self._ray_geom = np.zeros(cfg.n_ranges, np.int32)
        self._ray_dist = np.zeros(cfg.n_ranges)
        self._ray_groups = np.array([0, 1, 0, 0, 0, 0], np.uint8)  # walls only
        self._ray_from = np.zeros(3)
        self.collisions = 0
        self._collided = False
        self._bound = True

    # lap bookkeeping (robot_rl.robots.drive_state.LapProgress, shared with the ROS 2 car env)
    @property
    def progress(self) -> float:
        """Metres along the centreline since the start (unwrapped, signed)."""
        return self.lap.progress

    @property
    def checkpoints(self) -> int:
        """Checkpoints passed so far, in order."""
        return self.lap.checkpoints

    @property
    def next_checkpoint(self) -> float:
        """Progress value of the next checkpoint."""
        return self.lap.next_checkpoint

    @property
    def spacing(self) -> float:
        """Distance between checkpoints along the centreline (m)."""
        return self.lap.spacing

    # ---------------------------------------------------------------- task hooks
    def _reset_task(self, rng: np.random.Generator) -> None:
        if not self._bound:
            self._bind()
        cfg = self.cfg
        s0 = float(rng.uniform(0.0, self.track.length)) if cfg.random_start else 0.0
        lateral = float(rng.uniform(-1, 1)) * cfg.start_lateral_noise
        heading = float(rng.uniform(-1, 1)) * cfg.start_heading_noise
        self.lap.reset(s0)
        self.place_car(s0, lateral, heading)
        r, dt = self.randomizer, float(self.model.opt.timestep)
        self._drivetrain = DrivetrainLags(r.speed_lag, r.yaw_rate_lag, r.trim_curvature, dt)  # at rest
        self.collisions = 0
        self._collided = False

    def place_car(self, s: float, lateral: float = 0.0, heading: float = 0.0) -> None:
        """Puts the car at rest at arc length ``s``, ``lateral`` m left of the centreline, ``heading`` rad from
        the track direction (progress bookkeeping is not changed: the car continues from there)."""
        xy, yaw = self.track.pose(s, lateral)
        yaw += heading
        d = self.data
        d.qpos[self.car_q] = [xy[0], xy[1], WHEEL_RADIUS, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        d.qvel[:] = 0.0
        d.ctrl[:] = 0.0
        mujoco.mj_forward(self.model, d)
        self.lap.s = self.project()[0]

    def _apply_action(self, action: np.ndarray) -> None:
        m, d, cfg = self.model, self.data, self.cfg
        v = float(action[0]) * cfg.max_speed
        w = limit_yaw_rate(v, float(action[1]) * cfg.max_yaw_rate, cfg.min_turn_radius)
        self._collided = False
        step, sensordata, wall, lags = mujoco.mj_step, d.sensordata, self.wall_sensor, self._drivetrain
        left, right = self.wheel_ctrl
        lagging = not lags.instant  # a randomized drivetrain (lags, trim): new wheel speeds every physics step
        if not lagging:
            d.ctrl[left], d.ctrl[right] = twist_to_wheel_speeds(v, w, self.drive)
        for _ in range(self.n_substeps):
            if lagging:
                d.ctrl[left], d.ctrl[right] = twist_to_wheel_speeds(*lags.step(v, w), self.drive)
            step(m, d)
            if sensordata[wall] > 0:  # car-wall contacts (sensors see the state the step started from)
                self._collided = True
                break
        mujoco.mj_forward(m, d)
        self._collided |= bool(sensordata[wall] > 0)  # ... and in the final state
        self.lap.update(self.project()[0])
        if self._collided:
            self.collisions += 1
            if cfg.collision_mode == "reset_to_checkpoint":
                self.place_car(self.lap.back_to_last_checkpoint())

    def _evaluate(self) -> tuple[float, bool, bool]:
        cfg = self.cfg
        reward = cfg.checkpoint_reward * self.lap.new_checkpoints - cfg.collision_penalty * self._collided
        if cfg.dense_reward:
            reward += cfg.progress_reward * self.lap.delta
        success = self.checkpoints >= self.n_success
        failure = self._collided and cfg.collision_mode == "terminate"
        return float(reward), success, failure

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        info.update(checkpoints=self.checkpoints, collisions=self.collisions, progress=self.progress)
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, info = super().reset(seed=seed, options=options)
        info.update(checkpoints=0, collisions=0, progress=0.0)
        return obs, info

    # --------------------------------------------------------------- observation
    def project(self) -> tuple[float, float, int]:
        """The car's (s, lateral offset, nearest centreline sample) on the track (cached per position)."""
        q = self.data.qpos[self.car_q]
        key = (float(q[0]), float(q[1]))
        if key != self._proj_key:
            self._proj, self._proj_key = self.track.project(q), key
        return self._proj

    def car_pose(self) -> tuple[np.ndarray, float]:
        """(xy [2], yaw) of the car in the world frame."""
        q = self.data.qpos[self.car_q]
        return q[:2].copy(), math.atan2(2 * (q[3] * q[6] + q[4] * q[5]), 1 - 2 * (q[5] ** 2 + q[6] ** 2))

    def _state(self) -> np.ndarray:
        if not self._bound:
            self._bind()
        xy, yaw = self.car_pose()
        c, s = math.cos(yaw), math.sin(yaw)
        v = self.data.qvel[self.car_v]
        _, lateral, i = self.project()
        k = self.randomizer.odometry_speed_scale
        twist = (k * (c * v[0] + s * v[1]), k * (-s * v[0] + c * v[1]), k * v[5])  # in the car frame
        head = drive_state_head(self.track, xy, yaw, twist, lateral, i, self.lap.next_checkpoint_xy())
        return np.concatenate([head, self._ranges(xy, c, s)]).astype(np.float32)

    def _ranges(self, xy: np.ndarray, c: float, s: float) -> np.ndarray:
        n = self.cfg.n_ranges
        if n == 0:
            return np.zeros(0)
        vec = self._ray_vec.reshape(n, 3)
        vec[:, 0] = c * self._ray_cos - s * self._ray_sin
        vec[:, 1] = s * self._ray_cos + c * self._ray_sin
        self._ray_from[:2] = xy
        self._ray_from[2] = WHEEL_RADIUS + LIDAR_HEIGHT
        mujoco.mj_multiRay(self.model, self.data, self._ray_from, self._ray_vec, self._ray_groups, 1,
                           self.car_body, self._ray_geom, self._ray_dist, None, n, self.cfg.range_max)
        dist = self._ray_dist
        return np.where((self._ray_geom < 0) | (dist < 0) | (dist > self.cfg.range_max), self.cfg.range_max, dist)

    # ------------------------------------------------------------------- expert
    def expert_action(self, noise: float = 0.0, lookahead: float = 0.8, cruise: float = 1.6,
                      lateral_accel: float = 2.0) -> np.ndarray:
        """Pure pursuit on the centreline (privileged pose): steer along the arc through the centreline point
        ``lookahead`` m ahead, at ``cruise`` m/s capped so the lateral acceleration stays under
        ``lateral_accel``; plus Gaussian noise of std ``noise`` (action units)."""
        xy, yaw = self.car_pose()
        a = pure_pursuit(self.track, xy, yaw, self.project()[0], self.cfg.max_speed, self.cfg.max_yaw_rate,
                         lookahead, cruise, lateral_accel)
        if noise > 0:
            a += self.np_random.normal(0.0, noise, 2).astype(np.float32)
        return np.clip(a, -1.0, 1.0)
