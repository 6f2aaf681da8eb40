"""ArmEnv: the 7-DoF arm under Cartesian impedance control, the base of the arm tasks in :mod:`arm_tasks`.

Action (float32 in [-1, 1]): ``[dx, dy, dz, (rx, ry, rz,) gripper]``. ``d*`` move the target EE position by
``action * max_step`` metres; with ``rotation_actions`` the ``r*`` rotate the target orientation by the world-frame
axis-angle ``action * max_rot_step`` radians; ``gripper`` is an absolute command: -1 fully open (8 cm), +1 closed.
The target is clipped to the workspace box and kept within ``max_target_lead`` of the measured EE position
(anti-windup: pushing against an obstacle never builds up more than a bounded force), then tracked by the OSC
impedance law (robot_rl_controllers.impedance) at every 2 ms physics step for ``n_substeps`` steps.

State (float32): EE position (3, m, world frame: origin at the robot base, z = 0 the table top), EE orientation
quaternion (4, w-x-y-z, sign chosen nearest to the home orientation so it is continuous around it), EE linear
velocity (3, m/s), gripper opening (1, m, 0-0.08), [wrist wrench (6: force N, torque N m, sensor frame) if
``include_wrench``], [the task's object/goal state if ``object_state``].
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

os.environ.setdefault("MUJOCO_GL", "egl")  # must precede the first `import mujoco` (offscreen rendering; base.py)

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from robot_rl.robots.future import roll_ee_target  # noqa: E402
from robot_rl_controllers.arm_model import ARM_JOINTS, EE_SITE, FINGER_JOINTS, FINGER_MAX, HOME_QPOS, build_arm_xml  # noqa
from robot_rl_controllers.impedance import ImpedanceGains, MujocoArmState  # noqa: E402
from robot_rl_sim.base import MujocoTaskEnv, TaskConfig  # noqa: E402
from robot_rl_sim.randomization import RandomizationConfig  # noqa: E402


@dataclass
class ArmTaskConfig(TaskConfig):
    """Config of the arm tasks (Reach, PickCube, PegInsert); TaskConfig's fields plus these."""

    max_step: float = 0.02
    """Metres the target EE position moves per control step at |action| = 1 (0.4 m/s at 20 Hz)."""
    rotation_actions: bool = False
    """Add 3 rotation deltas to the action (7-D instead of 4-D); otherwise the orientation is held at home."""
    max_rot_step: float = 0.1
    """Radians the target orientation rotates per control step at |action| = 1 (rotation_actions only)."""
    max_tilt: float = 1.2
    """The target orientation stays within this angle (rad) of the home orientation (rotation_actions only)."""
    workspace_low: tuple[float, float, float] = (0.3, -0.25, 0.015)
    """Lower corner of the box the target EE position (tool centre point) is clipped to (m)."""
    workspace_high: tuple[float, float, float] = (0.65, 0.25, 0.35)
    """Upper corner of the workspace box (m); the default box keeps clear of the arm's stretched singularity."""
    max_target_lead: float = 0.05
    """The target stays within this distance (m, per axis) of the measured EE position (anti-windup)."""
    ee_velocity: str = "instant"
    """The state's EE linear velocity: ``instant``, the site's velocity at the end of the control step; ``step``,
    the EE's displacement over the last control step divided by its period. A robot whose driver interpolates each
    command over the period moves at a steady speed through it and reports about the step's mean, where a stiff
    impedance arm (a calibrated sim's) covers the step in a burst and is slowing at its end: at 20 mm steps the
    rehearsal robot's reading was 0.40 m/s and the sim's ``instant`` one 0.23 (``robot-rl calibrate`` writes
    ``step``)."""
    include_wrench: bool = False
    """Append the wrist force/torque sensor reading (6) to the state."""
    object_state: bool = True
    """Append the task's object/goal positions to the state (privileged; switch off for pixel-only policies)."""
    lock_gripper: bool | None = None
    """Ignore the gripper action and keep the gripper closed; None = the task's default (PegInsert: True)."""
    hole_clearance: float = 0.002
    """PegInsert: hole width minus peg width (m); 2 mm = 1 mm per side."""
    offset_scale: float = 0.0
    """If > 0 (with ``object_state``), the state also carries tanh(offset / offset_scale) of the task's offsets
    (PegInsert: peg bottom - hole top; PickCube and PickColor: each cube - tool centre point; Reach: target -
    tool centre point), so a network sees the last millimetres of an alignment as large changes of its input
    (0.005: 1 mm near zero moves it by 0.2; with absolute positions alone 1 mm is about 2 % of their spread)."""
    start_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Per reset, the EE starts at rest away from home: home plus a uniform offset in [-x, x] per axis (m; along z
    only downwards), inside the workspace, where the controller takes it before the episode begins. A policy
    trained so has acted from rest anywhere in that box (a robot path whose arm stops short, or an operator who
    hands over mid-task); (0, 0, 0) starts every episode at home."""
    gains: ImpedanceGains = field(default_factory=ImpedanceGains)
    """Impedance / OSC gains (torque limits default to the Panda's)."""

    def validate(self) -> None:
        if self.max_step <= 0 or self.max_rot_step <= 0 or self.max_target_lead <= 0:
            raise ValueError("max_step, max_rot_step and max_target_lead must be > 0")
        if np.any(np.asarray(self.workspace_low) >= np.asarray(self.workspace_high)):
            raise ValueError("workspace_low must be < workspace_high on every axis")
        if self.image_size < 0:
            raise ValueError("image_size must be >= 0")
        if self.ee_velocity not in ("instant", "step"):
            raise ValueError(f"ee_velocity must be 'instant' or 'step', got {self.ee_velocity!r}")
        if self.offset_scale < 0:
            raise ValueError("offset_scale must be >= 0 (0 = off)")
        if len(self.start_offset) != 3 or min(self.start_offset) < 0:
            raise ValueError(f"start_offset must be 3 half-widths >= 0 (m), got {self.start_offset}")
        self.gains.validate()


class ArmEnv(MujocoTaskEnv):
    """Base of the arm tasks: subclasses set ``objects``, ``default_max_episode_steps`` and the task hooks
    ``_reset_objects``, ``_object_state``, ``_evaluate`` and ``expert_action``."""

    default_cameras = ("front", "wrist")
    objects: tuple[str, ...] = ()
    default_max_episode_steps = 100
    default_lock_gripper = False

    def __init__(self, cfg: ArmTaskConfig | None = None, render_mode: str | None = None, **overrides) -> None:
        """``cfg`` (default: ArmTaskConfig with this task's max_episode_steps), with ``overrides`` (ArmTaskConfig
        field names) applied on top: ``PickCubeEnv(image_size=64)`` or ``gym.make(id, image_size=64)``."""
        if cfg is None:
            overrides.setdefault("max_episode_steps", self.default_max_episode_steps)
            cfg = ArmTaskConfig(**overrides)
        elif overrides:
            cfg = dataclasses.replace(cfg, **overrides)
        if isinstance(cfg.randomization, dict):
            cfg.randomization = RandomizationConfig(**cfg.randomization)
        if isinstance(cfg.gains, dict):
            cfg.gains = ImpedanceGains(**cfg.gains)
        cfg.validate()
        self._h = None
        self._nominal_friction: np.ndarray | None = None  # the arm joints' own frictionloss (randomisation adds)
        self.lock_gripper = self.default_lock_gripper if cfg.lock_gripper is None else cfg.lock_gripper
        super().__init__(build_arm_xml(self.objects, cfg.hole_clearance), cfg,
                         7 if cfg.rotation_actions else 4, render_mode)

    # ------------------------------------------------------------------ handles
    def _bind(self) -> None:
        """Ids, address slices and preallocated buffers (once; the base calls _state() during __init__)."""
        m, cfg = self.model, self.cfg
        name2id = mujoco.mj_name2id
        first = name2id(m, mujoco.mjtObj.mjOBJ_JOINT, ARM_JOINTS[0])
        self.arm_dofs = range(int(m.jnt_dofadr[first]), int(m.jnt_dofadr[first]) + len(ARM_JOINTS))
        self.arm_qpos = slice(int(m.jnt_qposadr[first]), int(m.jnt_qposadr[first]) + len(ARM_JOINTS))
        self.finger_qpos = np.array([m.jnt_qposadr[name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in FINGER_JOINTS])
        self.ee_site = name2id(m, mujoco.mjtObj.mjOBJ_SITE, EE_SITE)
        self.arm = MujocoArmState(m, self.ee_site, self.arm_dofs, cfg.gains)
        self.arm_ctrl = slice(0, len(ARM_JOINTS))
        self.grip_ctrl = slice(len(ARM_JOINTS), len(ARM_JOINTS) + 2)
        sensor = name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, "ft_force")
        self.ft_adr = slice(int(m.sensor_adr[sensor]), int(m.sensor_adr[sensor]) + 6)
        self.pad_geoms = tuple(self._geoms_of(b, cls_pad=True) for b in ("finger_left", "finger_right"))
        self._pad_side = np.zeros(m.ngeom, np.int8)  # geom id -> 1 left pad, 2 right pad, 0 other
        for side, ids in enumerate(self.pad_geoms, start=1):
            self._pad_side[ids] = side
        self._pad_side_list = self._pad_side.tolist()
        self._geom_sets: dict[int, frozenset] = {}
        self.ws_low = np.asarray(cfg.workspace_low, dtype=np.float64)
        self.ws_high = np.asarray(cfg.workspace_high, dtype=np.float64)
        self.target_pos = np.zeros(3)
        self.target_quat = np.array([0.0, 1.0, 0.0, 0.0])
        self.home_quat = np.array([0.0, 1.0, 0.0, 0.0])
        self._vel = np.zeros(6)
        self._step_start = np.zeros(3)  # the EE position when the control step began (ee_velocity: step)
        self._aa = np.zeros(3)
        self._h = True
        self._bind_task()

    def _bind_task(self) -> None:
        """Task ids and buffers (called once from _bind)."""

    def site_id(self, name: str) -> int:
        return mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, name)

    def mocap_id(self, body: str) -> int:
        return int(self.model.body_mocapid[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, body)])

    def freejoint_adr(self, name: str) -> tuple[slice, slice]:
        """(qpos slice [7], qvel slice [6]) of a free joint."""
        j = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)
        qa, va = int(self.model.jnt_qposadr[j]), int(self.model.jnt_dofadr[j])
        return slice(qa, qa + 7), slice(va, va + 6)

    def _geoms_of(self, body: str, cls_pad: bool = False) -> np.ndarray:
        """Geom ids of a body (with cls_pad: only its condim-4 finger pad geoms)."""
        b = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, body)
        ids = np.flatnonzero(self.model.geom_bodyid == b)
        return ids[self.model.geom_condim[ids] == 4] if cls_pad else ids

    # ---------------------------------------------------------------- task hooks
    def _reset_task(self, rng: np.random.Generator) -> None:
        if self._h is None:
            self._bind()
        d = self.data
        k = self.randomizer.stiffness  # drawn by the randomiser's reset, which runs just before
        self.arm.gains = self.cfg.gains if k == 1.0 else dataclasses.replace(
            self.cfg.gains, kp_pos=self.cfg.gains.kp_pos * k, kp_rot=self.cfg.gains.kp_rot * k)
        m, arm = self.model, self.arm_dofs
        if self._nominal_friction is None:
            self._nominal_friction = m.dof_frictionloss[arm].copy()
        m.dof_frictionloss[arm] = self._nominal_friction + self.randomizer.joint_friction
        m.dof_damping[arm] += self.randomizer.joint_damping  # on the randomiser's damping of this reset
        d.qpos[self.arm_qpos] = HOME_QPOS
        d.qpos[self.finger_qpos] = FINGER_MAX
        d.ctrl[self.grip_ctrl] = 0.0 if self.lock_gripper else FINGER_MAX
        mujoco.mj_kinematics(self.model, d)  # the home EE pose, for placing objects relative to it
        self._reset_objects(rng)
        mujoco.mj_forward(self.model, d)
        self.target_pos[:] = d.site_xpos[self.ee_site]
        mujoco.mju_mat2Quat(self.home_quat, d.site_xmat[self.ee_site])
        self.target_quat[:] = self.home_quat
        if any(self.cfg.start_offset):
            self._move_to_start(rng)
        self._after_reset(rng)
        self._step_start[:] = d.site_xpos[self.ee_site]  # at rest: no step yet

    START_SETTLE_S = 1.0
    """Seconds the controller gets to bring the EE to rest at a randomised start (``start_offset``)."""

    def _move_to_start(self, rng: np.random.Generator) -> None:
        """Drives the EE, gripper open, from home to rest at a random offset (``start_offset``) in the workspace."""
        half = np.asarray(self.cfg.start_offset, np.float64)
        offset = rng.uniform(-half, half)
        offset[2] = -abs(offset[2])
        self.target_pos[:] = np.clip(self.target_pos + offset, self.ws_low, self.ws_high)
        self._simulate(int(round(self.START_SETTLE_S / self.model.opt.timestep)))
        self.target_pos[:] = self.data.site_xpos[self.ee_site]

    def _reset_objects(self, rng: np.random.Generator) -> None:
        """Places the task's objects in ``self.data`` (the arm is at home, the gripper open)."""

    def _after_reset(self, rng: np.random.Generator) -> None:
        """Runs after the target is set (e.g. to settle a grasp with the controller running)."""

    def _apply_action(self, action: np.ndarray) -> None:
        cfg, d = self.cfg, self.data
        ee = d.site_xpos[self.ee_site]
        t = self.target_pos
        t += action[:3] * cfg.max_step
        np.clip(t, ee - cfg.max_target_lead, ee + cfg.max_target_lead, out=t)
        np.clip(t, self.ws_low, self.ws_high, out=t)
        if cfg.rotation_actions:
            self._rotate_target(action[3:6].astype(np.float64) * cfg.max_rot_step)
        if not self.lock_gripper:
            finger = FINGER_MAX * 0.5 * (1.0 - float(action[-1]))
            speed = self.randomizer.gripper_speed
            if speed > 0:  # a slower gripper: each finger's target moves at half the opening's speed
                step = 0.5 * speed * self.n_substeps * self.model.opt.timestep
                now = float(np.ravel(d.ctrl[self.grip_ctrl])[0])
                finger = now + float(np.clip(finger - now, -step, step))
            d.ctrl[self.grip_ctrl] = finger
        self._step_start[:] = ee
        self._simulate(self.n_substeps)

    def _hold_action(self) -> np.ndarray:
        """Zero motion and the gripper command currently applied (inverse of the mapping in _apply_action)."""
        action = np.zeros(self.action_space.shape, np.float32)
        if not self.lock_gripper:
            action[-1] = 1.0 - 2.0 * float(np.ravel(self.data.ctrl[self.grip_ctrl])[0]) / FINGER_MAX
        return action

    def _rotate_target(self, axis_angle: np.ndarray) -> None:
        """Rotates the target orientation by a world-frame axis-angle, within max_tilt of the home orientation."""
        angle = float(np.linalg.norm(axis_angle))
        if angle == 0.0:
            return
        dq, tq, rel = np.empty(4), np.empty(4), np.empty(4)
        mujoco.mju_axisAngle2Quat(dq, axis_angle / angle, angle)
        mujoco.mju_mulQuat(tq, dq, self.target_quat)
        mujoco.mju_negQuat(rel, self.home_quat)
        mujoco.mju_mulQuat(rel, tq, rel.copy())  # home -> new target, world frame
        mujoco.mju_quat2Vel(self._aa, rel, 1.0)
        tilt = float(np.linalg.norm(self._aa))
        if tilt > self.cfg.max_tilt:
            mujoco.mju_axisAngle2Quat(rel, self._aa / tilt, self.cfg.max_tilt)
            mujoco.mju_mulQuat(tq, rel, self.home_quat)
        self.target_quat[:] = tq / np.linalg.norm(tq)

    def _simulate(self, n: int) -> None:
        """``n`` physics steps with the impedance law evaluated at every one (mj_step1 -> torques -> mj_step2),
        compiled and without the GIL (robot_rl_controllers.osc_kernel), then mj_forward for the observations."""
        self.arm.simulate(self.data, n, self.target_pos, self.target_quat, HOME_QPOS, self.arm_ctrl.start)

    # --------------------------------------------------------------- observation
    def _state(self) -> np.ndarray:
        if self._h is None:
            self._bind()
        d = self.data
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, d.site_xmat[self.ee_site])
        if quat @ self.home_quat < 0:
            quat = -quat
        if self.cfg.ee_velocity == "step":
            velocity = (d.site_xpos[self.ee_site] - self._step_start) / (self.n_substeps * self.model.opt.timestep)
        else:
            mujoco.mj_objectVelocity(self.model, d, mujoco.mjtObj.mjOBJ_SITE, self.ee_site, self._vel, 0)
            velocity = self._vel[3:]
        parts = [d.site_xpos[self.ee_site], quat, velocity, [self.gripper_opening()]]
        if self.cfg.include_wrench:
            parts.append(d.sensordata[self.ft_adr])
        if self.cfg.object_state:
            parts.append(self._object_state())
            if self.cfg.offset_scale > 0:
                parts.append(np.tanh(self._offsets() / self.cfg.offset_scale))
        return np.concatenate(parts).astype(np.float32)

    def _object_state(self) -> np.ndarray:
        return np.zeros(0)

    def _offsets(self) -> np.ndarray:
        """The task's alignment offsets (m) that ``offset_scale`` squashes into the state: by default each object
        position of the object state minus the tool centre point (tasks whose object state is not positions of
        things to reach override this)."""
        return (self._object_state().reshape(-1, 3) - self.data.site_xpos[self.ee_site]).ravel()

    # ------------------------------------------------------------------ helpers
    @property
    def ee_pos(self) -> np.ndarray:
        return self.data.site_xpos[self.ee_site].copy()

    def gripper_opening(self) -> float:
        return float(self.data.qpos[self.finger_qpos].sum())

    def touching(self, geoms: np.ndarray) -> tuple[bool, bool]:
        """Whether the (left, right) finger pads are in contact with any of ``geoms``."""
        ncon = self.data.ncon
        if ncon == 0:
            return False, False
        key = id(geoms)
        if key not in self._geom_sets:  # a plain loop over the few contacts beats numpy's per-call overhead
            self._geom_sets[key] = frozenset(np.asarray(geoms).tolist())
        objs, side = self._geom_sets[key], self._pad_side_list
        left = right = False
        for g1, g2 in self.data.contact.geom[:ncon].tolist():
            s = side[g1] if g2 in objs else side[g2] if g1 in objs else 0
            left, right = left or s == 1, right or s == 2
        return left, right

    def predict_state(self, state: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The state expected after ``actions [k, A]`` from now (future-state-aware chunk execution): the EE
        position moved as the controller target moves (robot_rl.robots.future)."""
        return roll_ee_target(state, actions, self.target_pos, self.cfg.max_step, self.ws_low, self.ws_high,
                              self.cfg.max_target_lead, 1.0 / self.cfg.control_hz)

    def xyz_action(self, move: np.ndarray, noise: float, gripper: float, gain: float = 0.6) -> np.ndarray:
        """An expert action for moving the EE by ``move`` metres from where it is now: it steers the controller's
        target towards ``ee + move`` by ``gain`` of the remaining distance (scaled into [-1, 1]), plus Gaussian
        noise of std ``noise`` (action units) on xyz. Planning on the target rather than the lagging measured EE
        avoids overshoot; ``gain`` < 1 keeps the loop damped under action latency."""
        d = self.data
        a = np.zeros(self.action_space.shape, np.float32)
        a[:3] = gain * (d.site_xpos[self.ee_site] + np.asarray(move) - self.target_pos) / self.cfg.max_step
        if noise > 0:
            a[:3] += self.np_random.normal(0.0, noise, 3)
        a[-1] = gripper
        return np.clip(a, -1.0, 1.0)
