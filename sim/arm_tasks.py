"""Arm tasks on the impedance-controlled 7-DoF arm (see :mod:`robot_rl_sim.arm_env` for the action and state
layout): Reach, PickCube, PegInsert and PickColor (three coloured cubes; the language instruction names the one to
lift), each with a scripted expert (``expert_action``) on privileged sim state and a language instruction
(``instruction=True`` adds it to the observation; PickColor always has it).

Rewards are sparse (1.0 on success, else 0.0) unless ``dense_reward``; ``info["is_success"]`` on every step.
Constructors take ``(cfg: ArmTaskConfig | None = None, render_mode=None, **overrides)`` where the overrides are
ArmTaskConfig field names, so ``gym.make("robot_rl/PickCube-v0", image_size=64)`` works.
"""

from __future__ import annotations

import numpy as np

from robot_rl_controllers.arm_model import CUBE_COLORS, CUBE_HALF, HOLE_DEPTH, PEG_HALF
from robot_rl_sim.arm_env import ArmEnv, ArmTaskConfig

__all__ = ["ArmEnv", "ArmTaskConfig", "ReachEnv", "PickCubeEnv", "PegInsertEnv", "PickColorEnv"]


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


class ReachEnv(ArmEnv):
    """Move the EE (tool centre point) to a random target in the workspace; success within 2 cm.
    Object state: target position (3)."""

    objects = ("target",)
    instruction_text = "move the gripper to the green ball"
    default_max_episode_steps = 50
    success_radius = 0.02
    target_low = np.array([0.35, -0.22, 0.05])
    target_high = np.array([0.62, 0.22, 0.30])

    def _bind_task(self) -> None:
        self.target_mocap = self.mocap_id("target")

    def _reset_objects(self, rng: np.random.Generator) -> None:
        self.data.mocap_pos[self.target_mocap] = rng.uniform(self.target_low, self.target_high)

    def _object_state(self) -> np.ndarray:
        return self.data.mocap_pos[self.target_mocap]

    def _evaluate(self) -> tuple[float, bool, bool]:
        dist = float(np.linalg.norm(self.data.mocap_pos[self.target_mocap] - self.data.site_xpos[self.ee_site]))
        success = dist < self.success_radius
        if self.cfg.dense_reward:
            return 1.0 - float(np.tanh(10.0 * dist)) + float(success), success, False
        return float(success), success, False

    def expert_action(self, noise: float = 0.0) -> np.ndarray:
        return self.xyz_action(self.data.mocap_pos[self.target_mocap] - self.data.site_xpos[self.ee_site], noise, -1.0)


class PickCubeEnv(ArmEnv):
    """Grasp a 4 cm cube at a random x, y, yaw on the table and lift it >= 5 cm (held by both fingers).
    Object state: cube position (3)."""

    objects = ("cube",)
    instruction_text = "pick up the red cube"
    default_max_episode_steps = 100
    lift_height = 0.05
    cube_low = np.array([0.40, -0.15])
    cube_high = np.array([0.60, 0.15])

    def _bind_task(self) -> None:
        self.cube_q, _ = self.freejoint_adr("cube")
        self.cube_geoms = self._geoms_of("cube")

    def _reset_objects(self, rng: np.random.Generator) -> None:
        xy = rng.uniform(self.cube_low, self.cube_high)
        self.data.qpos[self.cube_q] = [*xy, CUBE_HALF, *_yaw_quat(rng.uniform(-np.pi / 4, np.pi / 4))]

    def _object_state(self) -> np.ndarray:
        return self.data.qpos[self.cube_q][:3]

    def grasped(self) -> bool:
        return all(self.touching(self.cube_geoms))

    def _evaluate(self) -> tuple[float, bool, bool]:
        cube = self.data.qpos[self.cube_q][:3]
        lift = float(cube[2] - CUBE_HALF)
        grasped = self.grasped()
        success = lift >= self.lift_height and grasped
        failure = bool(cube[2] < -0.1)  # fell off the table
        if self.cfg.dense_reward:
            reach = 1.0 - np.tanh(10.0 * np.linalg.norm(cube - self.data.site_xpos[self.ee_site]))
            lift_r = float(grasped) * (1.0 + 4.0 * min(max(lift, 0.0), self.lift_height) / self.lift_height)
            return float(reach + lift_r + 5.0 * success), success, failure
        return float(success), success, failure

    def expert_action(self, noise: float = 0.0) -> np.ndarray:
        """Above the cube -> down -> close -> lift, chosen from the current state (recovers from a missed grasp)."""
        cube = self.data.qpos[self.cube_q][:3]
        ee = self.data.site_xpos[self.ee_site]
        opening = self.gripper_opening()
        xy_err = cube[:2] - ee[:2]
        holding = self.grasped() and opening > 2 * CUBE_HALF - 0.01
        if holding:  # lift (keep the cube under the fingers)
            goal = np.array([*cube[:2], CUBE_HALF + self.lift_height + 0.04])
            return self.xyz_action(goal - ee, noise, 1.0)
        if np.linalg.norm(xy_err) > 0.01:  # move above the cube, open
            hover = CUBE_HALF + 0.08
            z = hover if np.linalg.norm(xy_err) > 0.03 or ee[2] > hover else ee[2]
            return self.xyz_action(np.array([*xy_err, z - ee[2]]), noise, -1.0)
        if ee[2] - cube[2] > 0.008 and opening > 2 * CUBE_HALF + 0.005:  # descend with the gripper open
            return self.xyz_action(np.array([*xy_err, cube[2] - ee[2]]), noise, -1.0)
        return self.xyz_action(np.array([*xy_err, 0.0]), noise, 1.0)  # close


class PegInsertEnv(ArmEnv):
    """Insert a grasped 2x2x8 cm peg >= 2 cm into a square hole with ``hole_clearance`` (default 2 mm) whose
    x, y are random. The peg starts in the closed gripper above the hole; the gripper stays closed
    (``lock_gripper`` defaults to True here). Object state: peg bottom (3), hole top centre (3)."""

    objects = ("peg",)
    instruction_text = "insert the peg into the hole"
    default_max_episode_steps = 100
    default_lock_gripper = True
    insert_depth = 0.02
    hole_low = np.array([0.45, -0.12])
    hole_high = np.array([0.60, 0.12])

    def _bind_task(self) -> None:
        self.peg_q, self.peg_v = self.freejoint_adr("peg")
        self.peg_geoms = self._geoms_of("peg")
        self.peg_bottom = self.site_id("peg_bottom")
        self.hole_site = self.site_id("hole")
        self.hole_half = PEG_HALF[0] + self.cfg.hole_clearance / 2
        self.hole_mocap = self.mocap_id("hole")

    def _reset_objects(self, rng: np.random.Generator) -> None:
        d = self.data
        d.mocap_pos[self.hole_mocap] = [*rng.uniform(self.hole_low, self.hole_high), 0.0]
        ee = d.site_xpos[self.ee_site]  # home (ArmEnv._reset_task ran mj_kinematics)
        d.qpos[self.finger_qpos] = PEG_HALF[0]
        d.ctrl[self.grip_ctrl] = 0.0
        d.qpos[self.peg_q] = [ee[0], ee[1], ee[2] - (PEG_HALF[2] - 0.015), 1.0, 0.0, 0.0, 0.0]

    def _after_reset(self, rng: np.random.Generator) -> None:
        self._simulate(50)  # settle the grasp (0.1 s) with the controller holding the home pose

    def _object_state(self) -> np.ndarray:
        return np.concatenate([self.data.site_xpos[self.peg_bottom], self.data.site_xpos[self.hole_site]])

    def _offsets(self) -> np.ndarray:
        return self.data.site_xpos[self.peg_bottom] - self.data.site_xpos[self.hole_site]

    def _depth_and_offset(self) -> tuple[float, float]:
        bottom, hole = self.data.site_xpos[self.peg_bottom], self.data.site_xpos[self.hole_site]
        return float(hole[2] - bottom[2]), float(np.max(np.abs(bottom[:2] - hole[:2])))

    def _evaluate(self) -> tuple[float, bool, bool]:
        depth, offset = self._depth_and_offset()
        success = depth >= self.insert_depth and offset < self.hole_half
        peg = self.data.qpos[self.peg_q][:3]
        dropped = np.linalg.norm(peg - self.data.site_xpos[self.ee_site]) > 0.06
        failure = bool(dropped and not success)
        if self.cfg.dense_reward:
            align = 1.0 - np.tanh(50.0 * offset)
            return float(align + 2.0 * np.clip(depth / self.insert_depth, 0.0, 1.0) * (offset < self.hole_half)
                         + 5.0 * success), success, failure
        return float(success), success, failure

    def expert_action(self, noise: float = 0.0) -> np.ndarray:
        """Hover the peg bottom 4 mm over the hole, align it within 0.8 mm, then push down (privileged state)."""
        d = self.data
        bottom, hole = d.site_xpos[self.peg_bottom], d.site_xpos[self.hole_site]
        xy_err = hole[:2] - bottom[:2]
        dist = float(np.max(np.abs(xy_err)))
        height = bottom[2] - hole[2]
        if height < -0.002 or (dist < 0.0008 and height < 0.008):  # in the hole, or aligned just above: push down
            dz = max(-HOLE_DEPTH - height, -0.5 * self.cfg.max_step)
            return self.xyz_action(np.array([*xy_err, dz]), noise, 1.0)
        hover = 0.004 if dist < 0.004 else 0.02
        return self.xyz_action(np.array([*xy_err, hover - height]), noise, 1.0)


class PickColorEnv(PickCubeEnv):
    """Three 4 cm cubes (red, green, blue) at random places at least 9 cm apart; the instruction ("pick up the
    green cube") names the one to lift >= 5 cm. Lifting another cube by 3 cm ends the episode as a failure.
    Object state: the three cube positions in the fixed order red, green, blue (9) - the instruction says which
    one matters. The instruction is always in the observation."""

    objects = ("cubes",)
    needs_instruction = True
    colors = tuple(CUBE_COLORS)
    min_separation = 0.09

    def _bind_task(self) -> None:
        self.cubes_q = [self.freejoint_adr(f"cube_{c}")[0] for c in self.colors]
        self.cubes_geoms = [self._geoms_of(f"cube_{c}") for c in self.colors]
        self.target = 0
        self.cube_q, self.cube_geoms = self.cubes_q[0], self.cubes_geoms[0]

    def _reset_objects(self, rng: np.random.Generator) -> None:
        placed: list[np.ndarray] = []
        while len(placed) < len(self.colors):
            xy = rng.uniform(self.cube_low, self.cube_high)
            if all(np.linalg.norm(xy - p) >= self.min_separation for p in placed):
                placed.append(xy)
        for q, xy in zip(self.cubes_q, placed):
            self.data.qpos[q] = [*xy, CUBE_HALF, *_yaw_quat(rng.uniform(-np.pi / 4, np.pi / 4))]
        self.target = int(rng.integers(len(self.colors)))
        self.cube_q, self.cube_geoms = self.cubes_q[self.target], self.cubes_geoms[self.target]

    def instruction(self) -> str:
        return f"pick up the {self.colors[self.target]} cube"

    def _object_state(self) -> np.ndarray:
        return np.concatenate([self.data.qpos[q][:3] for q in self.cubes_q])

    def wrong_cube_lifted(self) -> bool:
        """A cube other than the named one is 3 cm or more off the table (the episode's failure)."""
        return any(self.data.qpos[q][2] - CUBE_HALF > 0.03 for i, q in enumerate(self.cubes_q) if i != self.target)

    def _evaluate(self) -> tuple[float, bool, bool]:
        reward, success, failure = super()._evaluate()
        if self.wrong_cube_lifted() and not success:
            return (0.0 if not self.cfg.dense_reward else reward), False, True
        return reward, success, failure
