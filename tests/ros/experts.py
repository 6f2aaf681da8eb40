"""A PickCube expert that acts from the observation alone (plus the env's own target position), so the same
policy runs on the pure sim env and on the ROS 2 env (whose sim internals it cannot see)."""

from __future__ import annotations

import numpy as np

CUBE_HALF = 0.02
LIFT = 0.05


def pickcube_expert(state: np.ndarray, target_pos: np.ndarray, max_step: float = 0.02,
                    gain: float = 0.6) -> np.ndarray:
    """Above the cube -> down -> close -> lift, chosen from the current state (state layout of the arm tasks:
    ee pos 0:3, quat 3:7, ee velocity 7:10, gripper opening 10, cube position 11:14)."""
    ee, opening, cube = state[0:3].astype(np.float64), float(state[10]), state[11:14].astype(np.float64)

    def act(move: np.ndarray, gripper: float) -> np.ndarray:
        a = np.zeros(4, np.float32)
        a[:3] = gain * (ee + move - target_pos) / max_step
        a[3] = gripper
        return np.clip(a, -1.0, 1.0)

    xy_err = cube[:2] - ee[:2]
    near = np.linalg.norm(xy_err) < 0.015 and abs(cube[2] - ee[2]) < 0.02
    holding = near and 2 * CUBE_HALF - 0.01 < opening < 2 * CUBE_HALF * np.sqrt(2) + 0.002  # yaw up to 45 deg
    if holding:
        goal = np.array([*cube[:2], CUBE_HALF + LIFT + 0.04])
        return act(goal - ee, 1.0)
    if np.linalg.norm(xy_err) > 0.01:
        hover = CUBE_HALF + 0.08
        z = hover if np.linalg.norm(xy_err) > 0.03 or ee[2] > hover else ee[2]
        return act(np.array([*xy_err, z - ee[2]]), -1.0)
    if ee[2] - cube[2] > 0.008 and opening > 2 * CUBE_HALF + 0.005:
        return act(np.array([*xy_err, cube[2] - ee[2]]), -1.0)
    return act(np.array([*xy_err, 0.0]), 1.0)


def run_episode(env, seed: int, max_steps: int = 100) -> tuple[bool, int]:
    """(success, steps) of one expert episode on an env with ``target_pos`` (the sim arm env or RosArmEnv)."""
    obs, _ = env.reset(seed=seed)
    base = getattr(env, "unwrapped", env)
    for t in range(max_steps):
        obs, _, terminated, truncated, info = env.step(pickcube_expert(obs["state"], base.target_pos))
        if terminated or truncated:
            return bool(info["is_success"]), t + 1
    return False, max_steps
