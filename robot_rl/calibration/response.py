"""The arm's response to the policy's own actions, and the training sim fitted to it (``robot-rl record-response``,
``robot-rl calibrate --response``).

The joint-level fit (:mod:`robot_rl.calibration.fit`) finds the robot's joint loop, friction, latencies and gripper,
but the training sim does not run a joint loop: its arm follows the policy's target through an impedance law
(``stiffness_scale``) with whole control steps of delay (``action_latency_steps``). What a policy needs is that its
actions move the sim's end effector as they move the robot's. So the robot is probed through the robot env, as a
policy drives it (a push along x, a hold, a push down, a hold: :data:`PROBE`), and the sim's stiffness and delay are
picked on a grid to move the same way (RMS of the end effector's path).

Why not from the joint fit: through the bundled joint position profile, whose emulated joint loop runs at 50 rad/s,
the nominal robot moves its end effector as the sim does at twice its stiffness, and the ``typical`` robot (half
the loop's bandwidth, 25 ms of latency) as the sim at four times its stiffness and one step of delay. Translating
the joint loop's bandwidth into a stiffness gave 0.5 instead: a policy trained there expected an arm that was not
there (74 % in its sim, 44 % through the robot).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.utils.log import get_logger

logger = get_logger(__name__)

PROBE = np.array([[1, 0, 0, -1]] * 3 + [[0, 0, 0, -1]] * 5 + [[0, 0, -1, -1]] * 3 + [[0, 0, 0, -1]] * 5,
                 np.float32)
"""The probe's actions (``[dx, dy, dz, gripper]``, gripper open): 3 steps of full push along x, 5 of hold, 3 of full
push down, 5 of hold. Full pushes: the target leads the arm as far as the env lets it, where the lag shows."""

STIFFNESS_GRID = tuple(round(0.25 * 2 ** (i / 3), 3) for i in range(19))
"""Sim stiffness scales tried: 0.25 to 16, each 26 % above the last (the randomization around the pick is wider)."""


def probe_response(env: Any, repeats: int = 3) -> np.ndarray:
    """The end effector's mean path [len(PROBE), 3] (m, from where each repeat starts) while ``env`` (the robot env,
    or a sim arm task with the same state layout) runs :data:`PROBE` from a reset, ``repeats`` times."""
    paths = []
    for r in range(repeats):
        obs, _ = env.reset(seed=r)
        start = np.asarray(obs["state"][:3], np.float64).copy()
        path = []
        for action in PROBE:
            obs, *_ = env.step(action)
            path.append(np.asarray(obs["state"][:3], np.float64) - start)
        paths.append(path)
    return np.mean(paths, axis=0)


def fit_response(response: np.ndarray, task: str = "PickCube", base_kwargs: dict | None = None,
                 max_latency_steps: int = 2, grid: tuple[float, ...] = STIFFNESS_GRID) -> dict:
    """The sim stiffness scale (one of ``grid``) and whole steps of action delay (up to ``max_latency_steps``) whose
    probe path is nearest ``response`` (RMS over the path, mm), the other sim kwargs (friction, gripper, ...) from
    ``base_kwargs``. Returns the pick, its RMS and every candidate's."""
    from robot_rl.envs.make import EnvConfig, make_env  # deferred: loads MuJoCo

    response = np.asarray(response, np.float64)
    if response.shape != (len(PROBE), 3):
        raise ValueError(f"calibrate: a probe response has shape ({len(PROBE)}, 3), got {response.shape}")
    base = dict(base_kwargs or {})
    candidates = []
    for steps in range(max_latency_steps + 1):
        for k in grid:
            rand = {**base.get("randomization", {}), "stiffness_scale": [k, k], "action_latency_steps": steps,
                    "action_latency_jitter": 0}
            env = make_env(EnvConfig(id=f"robot_rl/{task}-v0", kwargs={**base, "randomization": rand}))
            try:
                path = probe_response(env, repeats=1)
            finally:
                env.close()
            rms = float(1e3 * np.sqrt(np.mean(np.sum((path - response) ** 2, axis=1))))
            candidates.append({"stiffness_scale": k, "action_latency_steps": steps, "rms_mm": round(rms, 2)})
    best = min(candidates, key=lambda c: c["rms_mm"])
    logger.info(f"response fit: stiffness x{best['stiffness_scale']}, {best['action_latency_steps']} steps of delay "
                f"({best['rms_mm']} mm RMS over the probe)")
    return {**best, "candidates": candidates}


@dataclass
class ResponseConfig:
    """``robot-rl record-response``: the probe run through the robot env, its path written for calibrate."""

    profile: str = "ros2_control_joint_position"
    """Robot profile (bundled name or YAML path) the robot env connects through, as training would."""
    out: str = "calibration_response.json"
    """File the mean path is written to (``robot-rl calibrate --response`` reads it); must not exist yet."""
    repeats: int = 3
    """Probes run (each from a reset: the arm home, the gripper open); their mean is written."""
    reset_service: str = ""
    """std_srvs/Trigger the env calls at each reset ("" = none; the rehearsal driver's is ``arm_driver/reset``)."""
    connect_timeout: float = 60.0
    """s to wait for the robot's topics."""

    def validate(self) -> None:
        if self.repeats < 1 or self.connect_timeout <= 0:
            raise ValueError("record-response: repeats must be >= 1, connect_timeout > 0")
        if Path(self.out).exists():
            raise ValueError(f"record-response: {self.out} exists (choose a new file)")


def record_response(cfg: ResponseConfig) -> dict:
    """Runs :data:`PROBE` through the robot env ``cfg.repeats`` times and writes the mean path (see the module
    docstring). Returns a summary."""
    from robot_rl.envs.ros_env import RosArmEnv  # deferred: loads rclpy

    cfg.validate()
    env = RosArmEnv(profile=cfg.profile, reset_service=cfg.reset_service, connect_timeout=cfg.connect_timeout)
    try:
        path = probe_response(env, cfg.repeats)
        period = env.period
    finally:
        env.close()
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps({"probe": PROBE.tolist(), "path_m": np.round(path, 5).tolist(),
                                         "control_period_s": period, "repeats": cfg.repeats}, indent=1) + "\n")
    logger.info(f"probe response ({cfg.repeats} repeats) -> {cfg.out}")
    return {"out": cfg.out, "repeats": cfg.repeats, "reach_m": np.round(path[-1], 4).tolist()}


def read_response(path: str | Path, control_hz: float | None = None) -> np.ndarray:
    """A response file's mean path; refuses one recorded with another probe, or (``control_hz`` given) at another
    control rate than the training env's (its steps of delay and path per step would not be the sim's)."""
    got = json.loads(Path(path).read_text())
    if np.asarray(got.get("probe")).shape != PROBE.shape or not np.allclose(got["probe"], PROBE):
        raise ValueError(f"calibrate: {path} was recorded with another probe (record it again with robot-rl "
                         "record-response)")
    period = got.get("control_period_s")
    if control_hz is not None and period is not None and abs(period * control_hz - 1.0) > 0.01:
        raise ValueError(f"calibrate: {path} was recorded at {1 / period:.1f} Hz, the training env runs at "
                         f"{control_hz:g} Hz (--control-hz, or record it again at the env's rate)")
    return np.asarray(got["path_m"], np.float64)
