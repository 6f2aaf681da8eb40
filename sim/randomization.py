"""Domain randomisation for sim-to-real: physics, camera, lighting, action latency, observation noise.

Everything is off by default. Ranges are multiplicative scales around the model's nominal values (sampled
uniformly per reset), so randomisation never drifts: each reset starts again from the nominal model.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass
class RandomizationConfig:
    """Per-reset randomisation of a MuJoCo task. (1.0, 1.0) / 0 = off."""

    friction_scale: tuple[float, float] = (1.0, 1.0)
    """Uniform range of the factor applied to every geom's sliding friction."""
    mass_scale: tuple[float, float] = (1.0, 1.0)
    """Uniform range of the factor applied to every body's mass (and inertia)."""
    damping_scale: tuple[float, float] = (1.0, 1.0)
    """Uniform range of the factor applied to every joint's damping."""
    camera_pos_noise: float = 0.0
    """Camera position offset per axis, uniform in [-x, x] metres."""
    camera_offsets: dict[str, tuple[float, ...]] | None = None
    """Cameras moved from where the model puts them, as ``robot-rl calibrate`` found the robot's: camera name ->
    (x, y, z offset in m along the camera's own axes, rotation vector in degrees in them, focal length error: the
    lens's focal length is 1 + it times the model's). Not random: every reset has them (the noise above on top)."""
    image_gains: tuple[float, float, float] = (1.0, 1.0, 1.0)
    """Gain on the R, G and B channels of every image observation, as ``robot-rl calibrate`` found the robot's camera
    against the sim's renders (white balance, exposure). Not random."""
    image_latency_steps: int = 0
    """Image observations are this many control steps old (a camera's exposure, transfer and driver: tens of ms,
    ``robot-rl calibrate`` reads it off the robot's frames); the state is not delayed."""
    image_latency_jitter: int = 0
    """Each image observation up to this many control steps older still (uniform, drawn per step): a robot's frames
    arrive at the camera's rate, not the policy's, so their age varies by up to a frame period."""
    light_noise: float = 0.0
    """Light diffuse intensity offset, uniform in [-x, x] (per light, all channels)."""
    action_latency_steps: int = 0
    """Delay line: the env applies the action given this many control steps ago."""
    action_latency_jitter: int = 0
    """Per reset, up to this many more steps of latency (uniform): a policy for a robot path whose delay varies."""
    stiffness_scale: tuple[float, float] = (1.0, 1.0)
    """Uniform range of the factor applied to the arm controller's stiffness (``kp_pos`` and ``kp_rot``; the damping
    follows, critically damped): a policy that must run on drivers tracking more stiffly or softly than the sim's
    impedance controller (a position-controlled arm through a robot profile)."""
    joint_friction: tuple[float, float] = (0.0, 0.0)
    """Uniform range of the dry friction (N m) added to every arm joint: a robot's joint friction, which the nominal
    sim lacks (``robot-rl calibrate`` fits it from robot logs)."""
    joint_damping: tuple[float, float] = (0.0, 0.0)
    """Uniform range of the viscous friction (N m s/rad) added to every arm joint's damping."""
    gripper_speed: tuple[float, float] = (0.0, 0.0)
    """Uniform range of the gripper's opening speed (m/s; (0, 0): the sim's own, about 2 m/s: it closes in 40 ms): a
    real gripper is often far slower (the Franka Hand's default 0.1 m/s; ``robot-rl calibrate`` reads it off robot
    logs)."""
    obs_noise_std: float = 0.0
    """Std of Gaussian noise added to the state observation."""
    speed_lag: tuple[float, float] = (0.0, 0.0)
    """Drive: uniform range of the time constant (s) of a first-order lag from the commanded to the driven forward
    speed (a real car's drivetrain and motor controller)."""
    yaw_rate_lag: tuple[float, float] = (0.0, 0.0)
    """Drive: uniform range of the time constant (s) of a first-order lag on the yaw rate (a steering servo)."""
    trim_curvature: tuple[float, float] = (0.0, 0.0)
    """Drive: uniform range of the curvature (1/m, positive to the left) the car drives when commanded straight
    (a steering trim); may be negative."""
    odometry_speed_scale: tuple[float, float] = (1.0, 1.0)
    """Drive: uniform range of the factor on the twist in the state (a wheel odometry's gain error)."""

    def validate(self) -> None:
        for name in ("friction_scale", "mass_scale", "damping_scale", "stiffness_scale"):
            lo, hi = getattr(self, name)
            if not 0 < lo <= hi:
                raise ValueError(f"randomization.{name} must satisfy 0 < low <= high, got {(lo, hi)}")
        lo, hi = self.odometry_speed_scale
        if not 0 < lo <= hi:
            raise ValueError(f"randomization.odometry_speed_scale must satisfy 0 < low <= high, got {(lo, hi)}")
        if self.trim_curvature[0] > self.trim_curvature[1]:
            raise ValueError(f"randomization.trim_curvature must satisfy low <= high, got {self.trim_curvature}")
        for name in ("joint_friction", "joint_damping", "gripper_speed", "speed_lag", "yaw_rate_lag"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise ValueError(f"randomization.{name} must satisfy 0 <= low <= high, got {(lo, hi)}")
        for name in ("camera_pos_noise", "light_noise", "obs_noise_std"):
            if getattr(self, name) < 0:
                raise ValueError(f"randomization.{name} must be >= 0")
        if len(self.image_gains) != 3 or not all(0 < g < 4 for g in self.image_gains):
            raise ValueError(f"randomization.image_gains: 3 gains in (0, 4), got {self.image_gains}")
        for name, offset in (self.camera_offsets or {}).items():
            if len(offset) != 7 or not -0.5 < offset[6] < 1.0:
                raise ValueError(f"randomization.camera_offsets[{name!r}]: 7 numbers (x y z m, rotation vector deg, "
                                 f"focal length error in (-0.5, 1)), got {offset}")
        if min(self.action_latency_steps, self.action_latency_jitter, self.image_latency_steps,
               self.image_latency_jitter) < 0:
            raise ValueError("randomization.action_latency_steps, action_latency_jitter, image_latency_steps and "
                             "image_latency_jitter must be >= 0")


class DomainRandomizer:
    """Holds a model's nominal values and re-samples the randomised ones on every :meth:`reset`."""

    def __init__(self, model: mujoco.MjModel, cfg: RandomizationConfig) -> None:
        cfg.validate()
        self.cfg = cfg
        self.nominal = {
            "geom_friction": model.geom_friction.copy(),
            "body_mass": model.body_mass.copy(),
            "body_inertia": model.body_inertia.copy(),
            "dof_damping": model.dof_damping.copy(),
            "cam_pos": model.cam_pos.copy(),
            "cam_quat": model.cam_quat.copy(),
            "cam_fovy": model.cam_fovy.copy(),
            "light_diffuse": model.light_diffuse.copy(),
        }
        for name, offset in (cfg.camera_offsets or {}).items():
            self._move_camera(model, name, np.asarray(offset, np.float64))
        self._actions: deque[np.ndarray] = deque()
        self._images: deque[dict[str, np.ndarray]] = deque()
        self._rng = np.random.default_rng(0)  # replaced by the env's at every reset
        self.latency = cfg.action_latency_steps
        self.stiffness = 1.0
        """The controller stiffness factor drawn at the last reset (the arm tasks apply it to their gains)."""
        self.joint_friction = self.joint_damping = 0.0
        """The arm joints' added dry and viscous friction drawn at the last reset (the arm tasks apply them)."""
        self.gripper_speed = 0.0
        """m/s of opening drawn at the last reset (0: the sim's own; the arm tasks apply it)."""
        self.speed_lag = self.yaw_rate_lag = self.trim_curvature = 0.0
        self.odometry_speed_scale = 1.0
        """The car's drivetrain and odometry drawn at the last reset (Drive applies them)."""

    def _move_camera(self, model: mujoco.MjModel, name: str, offset: np.ndarray) -> None:
        """The nominal pose and lens of camera ``name`` moved by ``offset`` (see ``camera_offsets``)."""
        from scipy.spatial.transform import Rotation  # deferred: only calibrated cameras need scipy

        try:
            cid = model.camera(name).id
        except KeyError:
            raise ValueError(f"randomization.camera_offsets: the model has no camera {name!r}") from None
        nom = self.nominal
        w, x, y, z = nom["cam_quat"][cid]
        body = Rotation.from_quat([x, y, z, w])  # the camera's axes in its body's frame
        nom["cam_pos"][cid] = nom["cam_pos"][cid] + body.apply(offset[:3])
        x, y, z, w = (body * Rotation.from_rotvec(np.radians(offset[3:6]))).as_quat()
        nom["cam_quat"][cid] = (w, x, y, z)
        half = math.radians(float(nom["cam_fovy"][cid])) / 2.0
        nom["cam_fovy"][cid] = math.degrees(2.0 * math.atan(math.tan(half) / (1.0 + float(offset[6]))))

    def reset(self, model: mujoco.MjModel, rng: np.random.Generator) -> None:
        cfg, nom = self.cfg, self.nominal
        model.geom_friction[:] = nom["geom_friction"]
        model.geom_friction[:, 0] *= rng.uniform(*cfg.friction_scale)
        mass = rng.uniform(*cfg.mass_scale)
        model.body_mass[:] = nom["body_mass"] * mass
        model.body_inertia[:] = nom["body_inertia"] * mass
        model.dof_damping[:] = nom["dof_damping"] * rng.uniform(*cfg.damping_scale)
        model.cam_pos[:] = nom["cam_pos"] + rng.uniform(-1, 1, nom["cam_pos"].shape) * cfg.camera_pos_noise
        model.cam_quat[:], model.cam_fovy[:] = nom["cam_quat"], nom["cam_fovy"]
        offsets = rng.uniform(-1, 1, (len(nom["light_diffuse"]), 1)) * cfg.light_noise
        model.light_diffuse[:] = np.clip(nom["light_diffuse"] + offsets, 0.0, 1.0)
        self._actions.clear()
        self._images.clear()
        self._rng = rng  # the env's: per-step draws (image age) stay reproducible under its seed
        self.latency = cfg.action_latency_steps + (int(rng.integers(0, cfg.action_latency_jitter + 1))
                                                   if cfg.action_latency_jitter else 0)
        self.stiffness = float(rng.uniform(*cfg.stiffness_scale)) if cfg.stiffness_scale != (1.0, 1.0) else 1.0
        self.joint_friction = float(rng.uniform(*cfg.joint_friction)) if cfg.joint_friction != (0.0, 0.0) else 0.0
        self.joint_damping = float(rng.uniform(*cfg.joint_damping)) if cfg.joint_damping != (0.0, 0.0) else 0.0
        self.gripper_speed = float(rng.uniform(*cfg.gripper_speed)) if cfg.gripper_speed != (0.0, 0.0) else 0.0
        # drawn only when set: a config without them keeps its random stream (and its placements)
        self.speed_lag = float(rng.uniform(*cfg.speed_lag)) if cfg.speed_lag != (0.0, 0.0) else 0.0
        self.yaw_rate_lag = float(rng.uniform(*cfg.yaw_rate_lag)) if cfg.yaw_rate_lag != (0.0, 0.0) else 0.0
        self.trim_curvature = (float(rng.uniform(*cfg.trim_curvature)) if cfg.trim_curvature != (0.0, 0.0)
                               else 0.0)
        self.odometry_speed_scale = (float(rng.uniform(*cfg.odometry_speed_scale))
                                     if cfg.odometry_speed_scale != (1.0, 1.0) else 1.0)

    def delay(self, action: np.ndarray, hold: Callable[[], np.ndarray]) -> np.ndarray:
        """Returns the action to apply now; ``hold()`` (the task's keep-still action) until the line is full."""
        if self.latency == 0:
            return action
        self._actions.append(action)
        if len(self._actions) > self.latency:
            return self._actions.popleft()
        return hold()

    def late_images(self, images: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The images of ``image_latency_steps`` (plus a draw of up to ``image_latency_jitter``) observations ago
        (the oldest there is, just after a reset)."""
        cfg = self.cfg
        if cfg.image_latency_steps == 0 and cfg.image_latency_jitter == 0:
            return images
        self._images.append(images)
        while len(self._images) > cfg.image_latency_steps + cfg.image_latency_jitter + 1:
            self._images.popleft()
        age = cfg.image_latency_steps + (int(self._rng.integers(0, cfg.image_latency_jitter + 1))
                                         if cfg.image_latency_jitter else 0)
        return self._images[max(0, len(self._images) - 1 - age)]

    def colour(self, image: np.ndarray) -> np.ndarray:
        """``image`` (uint8 RGB) with ``image_gains``; itself when they are 1."""
        gains = self.cfg.image_gains
        if tuple(gains) == (1.0, 1.0, 1.0):
            return image
        return np.clip(image * np.asarray(gains, np.float32), 0, 255).astype(np.uint8)

    def noisy_state(self, state: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.cfg.obs_noise_std == 0:
            return state
        return (state + rng.normal(0, self.cfg.obs_noise_std, state.shape)).astype(state.dtype)
