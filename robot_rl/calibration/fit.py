"""The fit: what the log shows directly (state latency, joint noise, gripper speed), then the dynamics
(command latency, joint loop bandwidth, Coulomb and viscous joint friction) by CMA-ES on the replay's joint
position error, polished by least squares from CMA-ES's best.

Why two optimizers: the error has a long, narrow valley (a joint lags as much with a little more dry friction as
with a little more viscous friction at the excitation's speeds). CMA-ES finds the valley from anywhere in the
box but, with a few hundred replays, stops short along it; a trust-region least-squares step (scipy), which sees
the error's joint-by-joint residuals and their derivatives, follows the valley's floor down in a few iterations.

Why several polishes: along the valley the error is pitted at the scale of a physics step of command latency (a
command's first step moves as its due time crosses a step), and a polish stays in the pit it starts in. On a
``typical`` log, CMA-ES's best (latency 17.4 ms, viscous friction 0.43, 0.28 mrad) polished to itself; the same
point 1 ms earlier polished to 16.7 ms, 0.20 (the hidden 0.2) at 0.18 mrad. So the polish starts again from its
result shifted by whole half physics steps of latency, each way, and the least error wins.

With the motors' efforts in the log (the profile's ``joint_states.effort: motor_torque``) there is no valley: the
friction is read off the efforts first (:mod:`robot_rl.calibration.friction`), and CMA-ES and the polish fit the
latency and bandwidth only."""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from robot_rl.calibration.friction import friction_from_efforts
from robot_rl.calibration.log import DriverLog, opening_speed
from robot_rl.calibration.replay import MOVING, ArmReplay, Dynamics
from robot_rl.utils.log import get_logger

logger = get_logger(__name__)

BOUNDS = {"command_latency": (0.0, 0.12), "bandwidth_scale": (0.2, 2.0), "coulomb_friction": (0.0, 1.0),
          "viscous_friction": (0.0, 1.0)}
"""The search box of each fitted parameter (bandwidth on a log scale): a robot's values lie well inside (the
bundled ``hard`` reality has 60 ms, 0.3 of the bandwidth, 0.6 N m)."""


@dataclass
class FitConfig:
    """How the dynamics are fitted."""

    fit_seconds: float = 40.0
    """s of the log the dynamics are fitted on (from its start; each evaluation replays them): in 20 s the
    excitation moves too little for viscous friction (18 % low to 47 % high on one log); more costs time."""
    iterations: int = 15
    """CMA-ES generations (it finds the error's valley; the least-squares polish follows it down)."""
    population: int = 10
    """Candidates per generation."""
    sigma: float = 0.3
    """CMA-ES's initial step, as a share of each parameter's search box."""
    polish_iterations: int = 12
    """Least-squares iterations after CMA-ES, from its best point (each replays the log 1 + 4 times: the point and
    its finite-difference derivatives); 0: CMA-ES alone."""
    latency_restarts: int = 3
    """More polishes from the first one's result with its command latency shifted by 1 to this many half physics
    steps, each way (2 x this more; the error is pitted along latency: see the module docstring); 0: one polish."""
    workers: int = 0
    """Processes replaying a generation's candidates (0: one per CPU core, at most the population)."""
    seed: int = 0
    """CMA-ES seed."""

    def validate(self) -> None:
        if (self.fit_seconds <= 0 or self.iterations < 1 or self.population < 4 or not 0 < self.sigma <= 0.5
                or self.workers < 0 or self.polish_iterations < 0 or self.latency_restarts < 0):
            raise ValueError("calibrate: fit_seconds must be > 0, iterations >= 1, population >= 4, sigma in "
                             "(0, 0.5], workers >= 0, polish_iterations >= 0, latency_restarts >= 0")


@dataclass
class Calibration:
    """What was fitted, and how well the sim then follows the robot."""

    dynamics: Dynamics
    """The fitted command latency, bandwidth and joint friction."""
    state_latency: float
    """s: median of (logged - stamped) over the joint states."""
    joint_noise: float
    """rad: std of the joint positions while the arm is held still."""
    gripper_speed: float
    """m/s: the gripper's speed through the middle of its strokes (0: no gripper traffic in the log)."""
    sim_gripper_speed: float
    """m/s: the same in the nominal sim (a robot as fast or faster is not limited: gripper_speed 0)."""
    rms_before: float
    """rad: joint position RMS error of the nominal sim replaying the log."""
    rms_after: float
    """rad: the same with the fitted dynamics."""
    evaluations: int
    """Replays of the log the fit made."""
    seconds: float
    """s the fit took."""
    window: float
    """s of log the dynamics were fitted on."""
    history: list[float] = field(default_factory=list)
    """The best RMS error after each generation."""
    friction_from: str = "replay"
    """Where the friction was fitted: ``efforts`` (the motors' torques) or ``replay`` (with latency and bandwidth)."""
    median_before: float = float("nan")
    """rad: median joint position error of the nominal sim replaying the log (the moving samples). Why beside the
    RMS: a stutter in the command stream (commands reaching the robot in a burst, which its log does not show) jolts
    the arm for a tenth of a second; the RMS over the log then says little about how closely the sim follows the
    rest of it."""
    median_after: float = float("nan")
    """rad: the same with the fitted dynamics."""

    def reality(self) -> dict[str, float]:
        """As a reality profile's fields (:class:`robot_rl_sim.reality.RealityProfile`)."""
        d = self.dynamics
        limited = 0 < self.gripper_speed < 0.8 * self.sim_gripper_speed
        return {"command_latency": round(d.command_latency, 4), "state_latency": round(self.state_latency, 4),
                "tracking_bandwidth_scale": round(d.bandwidth_scale, 3),
                "joint_coulomb_friction": round(d.coulomb_friction, 3),
                "joint_viscous_friction": round(d.viscous_friction, 3),
                "gripper_speed": round(self.gripper_speed, 4) if limited else 0.0,
                "joint_noise": float(f"{self.joint_noise:.2g}")}

    def summary(self) -> dict:
        return {**self.reality(), "rms_before_rad": self.rms_before, "rms_after_rad": self.rms_after,
                "median_before_rad": self.median_before, "median_after_rad": self.median_after,
                "evaluations": self.evaluations, "fit_seconds": round(self.seconds, 1),
                "friction_from": self.friction_from,
                "dynamics": asdict(self.dynamics)}


def state_latency(log: DriverLog) -> float:
    return float(np.median(log.state_t - log.state_stamp))


def holds(log: DriverLog, settle: float = 0.6, least: float = 0.3) -> list[slice]:
    """Joint state index ranges where the arm is held still: the command unchanged for ``settle`` s before and
    through the range (``least`` s at least)."""
    changed = np.r_[True, np.any(np.abs(np.diff(log.command_q, axis=0)) > 1e-9, axis=1)]
    starts = log.command_t[changed]
    ends = np.r_[starts[1:], log.command_t[-1]]
    out = []
    for a, b in zip(starts, ends, strict=True):
        if b - a >= settle + least:
            i, j = np.searchsorted(log.state_stamp, [a + settle, b])
            if j - i > 10:
                out.append(slice(int(i), int(j)))
    return out


def joint_noise(log: DriverLog) -> float:
    """The std of the joint positions around a straight line over each hold (a held arm still creeps a little)."""
    variances = []
    for sl in holds(log):
        t = log.state_stamp[sl] - log.state_stamp[sl][0]
        for q in log.state_q[sl].T:
            fit = np.polyval(np.polyfit(t, q, 1), t)
            variances.append(np.mean((q - fit) ** 2))
    if not variances:
        raise ValueError("calibrate: the log has no hold (a command unchanged for 1 s or more); record it with "
                         "robot-rl record-excitation, which holds between bursts")
    return float(math.sqrt(np.median(variances)))


def _unit_to_dynamics(u: np.ndarray, friction: tuple[float, float] | None = None) -> Dynamics:
    """The dynamics at ``u`` in the unit box: latency, bandwidth and, unless ``friction`` (Coulomb, viscous) is
    given, the two frictions."""
    u = np.clip(u, 0.0, 1.0)
    (l0, l1), (b0, b1), (c0, c1), (v0, v1) = BOUNDS.values()
    coulomb, viscous = friction if friction is not None else (c0 + u[2] * (c1 - c0), v0 + u[3] * (v1 - v0))
    return Dynamics(command_latency=float(l0 + u[0] * (l1 - l0)),
                    bandwidth_scale=float(math.exp(math.log(b0) + u[1] * (math.log(b1) - math.log(b0)))),
                    coulomb_friction=float(coulomb), viscous_friction=float(viscous))


def _dynamics_to_unit(d: Dynamics, friction: tuple[float, float] | None = None) -> np.ndarray:
    (l0, l1), (b0, b1), (c0, c1), (v0, v1) = BOUNDS.values()
    u = np.array([(d.command_latency - l0) / (l1 - l0),
                  (math.log(d.bandwidth_scale) - math.log(b0)) / (math.log(b1) - math.log(b0)),
                  (d.coulomb_friction - c0) / (c1 - c0), (d.viscous_friction - v0) / (v1 - v0)])
    return u[:2] if friction is not None else u


def residuals(replay: ArmReplay, log: DriverLog, dyn: Dynamics) -> np.ndarray:
    """The sim's joint position errors (rad) replaying ``log`` with ``dyn``, at the moving samples."""
    return (replay.run(log, dyn) - log.state_q)[np.abs(log.state_qd) > MOVING]


def worker_count(asked: int, population: int) -> int:
    """Processes scoring a generation: ``asked``, or with 0 one per CPU core, at most the population."""
    return asked or min(os.cpu_count() or 1, population)


def median_error(replay: ArmReplay, log: DriverLog, dyn: Dynamics) -> float:
    """The sim's joint position error replaying ``log`` with ``dyn`` (rad, median over the moving samples)."""
    return float(np.median(np.abs(residuals(replay, log, dyn))))


def rms(replay: ArmReplay, log: DriverLog, dyn: Dynamics) -> float:
    """The sim's joint position error replaying ``log`` with ``dyn`` (rad RMS over the moving samples)."""
    return float(np.sqrt(np.mean(residuals(replay, log, dyn) ** 2)))


_JOB: tuple[ArmReplay, DriverLog, tuple[float, float] | None] | None = None
"""A worker's replay, log and fixed friction (inherited through fork)."""


def _rms_of(u: np.ndarray) -> float:
    replay, part, friction = _JOB
    return rms(replay, part, _unit_to_dynamics(np.asarray(u), friction))


def _residuals_of(u: np.ndarray) -> np.ndarray:
    replay, part, friction = _JOB
    return residuals(replay, part, _unit_to_dynamics(np.asarray(u), friction)).astype(np.float32)  # half the bytes back


class _Evaluator:
    """Replays a generation's candidates, on ``workers`` forked processes when more than one."""

    def __init__(self, replay: ArmReplay, part: DriverLog, workers: int,
                 friction: tuple[float, float] | None = None) -> None:
        self.replay, self.part, self.workers, self.friction, self.pool = replay, part, workers, friction, None

    def __enter__(self) -> _Evaluator:
        global _JOB
        _JOB = (self.replay, self.part, self.friction)
        if self.workers > 1:
            self.pool = multiprocessing.get_context("fork").Pool(self.workers)
        return self

    def map(self, job: Callable, points: list) -> list:
        return self.pool.map(job, points) if self.pool else [job(u) for u in points]

    def __exit__(self, *exc: object) -> None:
        global _JOB
        if self.pool is not None:
            self.pool.terminate()
        _JOB = None


STEP = 1e-3
"""Finite-difference step of the polish's derivatives, as a share of each parameter's search box (0.12 ms of
latency): large enough that the replay's discrete physics steps do not show in it."""


def _polish(x: np.ndarray, evaluator: _Evaluator, iterations: int) -> tuple[np.ndarray, float, int]:
    """scipy's trust-region reflective least squares from ``x`` (unit box), the derivatives' replays in parallel.
    Returns the best point, its RMS error and the replays made."""
    from scipy.optimize import least_squares  # deferred: only calibration needs it

    seen: dict[bytes, np.ndarray] = {}

    def at(points: list[np.ndarray]) -> list[np.ndarray]:
        todo = [u for u in points if u.tobytes() not in seen]
        for u, r in zip(todo, evaluator.map(_residuals_of, todo), strict=True):
            seen[u.tobytes()] = r.astype(np.float64)
        return [seen[u.tobytes()] for u in points]

    def jacobian(u: np.ndarray) -> np.ndarray:
        steps = [STEP if u[i] + STEP <= 1.0 else -STEP for i in range(len(u))]  # inside the box
        shifted = [u + np.eye(len(u))[i] * steps[i] for i in range(len(u))]
        base, *moved = at([u, *shifted])
        return np.stack([(r - base) / h for r, h in zip(moved, steps, strict=True)], axis=1)

    least_squares(lambda u: at([u])[0], np.clip(x, 0.0, 1.0), jac=jacobian, bounds=(0.0, 1.0),
                  method="trf", x_scale=1.0, max_nfev=iterations)
    best = min(seen, key=lambda k: float(np.mean(seen[k] ** 2)))  # the least error replayed, wherever it was
    return np.frombuffer(best), float(np.sqrt(np.mean(seen[best] ** 2))), len(seen)


def _polishes(x: np.ndarray, evaluator: _Evaluator, cfg: FitConfig, dt: float, evaluations: int,
              started: float) -> tuple[np.ndarray, float, int]:
    """The polish from ``x`` (CMA-ES's best; its own replay is among the first polish's), then again from its result
    with the latency shifted by 1 to ``latency_restarts`` half physics steps, each way. Returns the point of the
    least error seen."""
    span = BOUNDS["command_latency"][1] - BOUNDS["command_latency"][0]
    first, first_error, replays = _polish(x, evaluator, cfg.polish_iterations)
    evaluations += replays
    logger.info(f"calibrate: least-squares polish: joint RMS {1e3 * first_error:.2f} mrad ({evaluations} replays, "
                f"{time.monotonic() - started:.0f} s)")
    best, best_error = first, first_error
    for k in range(1, cfg.latency_restarts + 1):
        for sign in (-1, 1):
            start = first.copy()
            start[0] += sign * k * 0.5 * dt / span
            if not 0.0 <= start[0] <= 1.0:
                continue
            point, got, replays = _polish(start, evaluator, cfg.polish_iterations)
            evaluations += replays
            logger.info(f"calibrate: polish from {1e3 * sign * k * 0.5 * dt:+.0f} ms of latency: joint RMS "
                        f"{1e3 * got:.2f} mrad ({evaluations} replays, {time.monotonic() - started:.0f} s)")
            if got < best_error:
                best, best_error = point, got
    return best, best_error, evaluations


def fit(log: DriverLog, cfg: FitConfig, replay: ArmReplay | None = None, efforts: bool = False) -> Calibration:
    """See the module docstring. ``efforts``: the log's joint efforts are the motors' torques; friction is then read
    off them (:mod:`robot_rl.calibration.friction`) and CMA-ES fits the latency and bandwidth only."""
    import cma  # deferred: only calibration needs it

    cfg.validate()
    started = time.monotonic()
    replay = replay or ArmReplay()
    part = log.window(0.0, cfg.fit_seconds)
    nominal = np.abs(residuals(replay, part, Dynamics()))
    before = float(np.sqrt(np.mean(nominal ** 2)))  # rms(), from the one replay the median also reads
    measured = friction_from_efforts(part, replay) if efforts else None
    fixed = (measured.coulomb, measured.viscous) if measured else None
    if measured:
        logger.info(f"calibrate: friction from {measured.samples} steps of the efforts: Coulomb {measured.coulomb:.3f} "
                    f"N m, viscous {measured.viscous:.3f} N m s/rad (velocity RMS {1e3 * measured.rms:.2f} mrad/s)")
    options = {"bounds": [0.0, 1.0], "popsize": cfg.population, "seed": cfg.seed + 1, "verbose": -9,
               "maxiter": cfg.iterations}
    es = cma.CMAEvolutionStrategy(_dynamics_to_unit(Dynamics(0.01, 1.0, 0.1, 0.1), fixed), cfg.sigma, options)
    history: list[float] = []
    evaluations = 0
    workers = worker_count(cfg.workers, cfg.population)
    with _Evaluator(replay, part, workers, fixed) as evaluator:
        while not es.stop():
            candidates = es.ask()
            es.tell(candidates, evaluator.map(_rms_of, candidates))
            evaluations += len(candidates)
            history.append(float(es.result.fbest))
            logger.info(f"calibrate: generation {len(history)}/{cfg.iterations}: best joint RMS "
                        f"{1e3 * es.result.fbest:.2f} mrad ({evaluations} replays, {time.monotonic() - started:.0f} s)")
        x, error = np.asarray(es.result.xbest), float(es.result.fbest)
        if cfg.polish_iterations:
            x, error, evaluations = _polishes(x, evaluator, cfg, replay.dt, evaluations, started)
            history.append(error)
    best = _unit_to_dynamics(x, fixed)
    speed = opening_speed(log.state_stamp, log.opening, log.gripper_t) if len(log.gripper_t) else 0.0
    return Calibration(dynamics=best, state_latency=state_latency(log), joint_noise=joint_noise(log),
                       gripper_speed=speed, sim_gripper_speed=replay.gripper_speed() if speed else 0.0,
                       rms_before=before, rms_after=error, median_before=float(np.median(nominal)),
                       median_after=median_error(replay, part, best), evaluations=evaluations,
                       seconds=time.monotonic() - started, window=part.seconds, history=history,
                       friction_from="efforts" if measured else "replay")
