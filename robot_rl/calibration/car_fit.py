"""Car calibration: what the log shows directly (odometry latency, the odometry's gain error), then the drivetrain
(command latency, speed and yaw rate lags, steering trim) by CMA-ES on the replay's speed and yaw rate error, then
the wheels' grip on the floor by a scan with the drivetrain held (the grip shows only where the wheels slip, a few
moments of the log: searched with the rest, it wanders and drags them along).

The replay (:class:`CarReplay`) runs the Drive task's car from rest where the log starts, its logged commands
applied through the same lags and trim the emulated car and the randomized Drive task use, and puts it back on the
logged pose every ``segment`` seconds (its motion kept). It is compared with the odometry's twist corrected by the
odometry's gain, which the poses (a localiser's, or the sim's) tell first: the poses' own differences smooth the
motion over two odometry periods, the twist is of the instant."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace

import mujoco
import numpy as np

from robot_rl.calibration.car_log import CarLog, pose_twist
from robot_rl.utils.log import get_logger
from robot_rl_controllers.driving import twist_to_wheel_speeds
from robot_rl_sim.car import DriveEnv
from robot_rl_sim.car_model import WHEEL_JOINTS, WHEEL_RADIUS, set_floor_grip
from robot_rl_sim.car_reality import DrivetrainLags

logger = get_logger(__name__)

BOUNDS = {"command_latency": (0.0, 0.3), "speed_time_constant": (0.0, 0.6), "yaw_rate_time_constant": (0.0, 0.6),
          "trim_curvature": (-0.5, 0.5)}
"""The search box of each parameter CMA-ES fits: a car's values lie well inside (the bundled ``hard`` car has 0.2 s,
0.3 s, 0.25 s and 0.24 1/m)."""
GRIP = (0.3, 1.5)
"""The floor grips scanned (the bundled ``hard`` car's is 0.5)."""
GRIP_TOLERANCE = 0.02
"""A grip whose replay error is within this share of the best near the knee explains the log as well."""
GRIP_REACH = 0.1
"""How far above the scan's knee its best error is looked for."""


@dataclass(frozen=True)
class Drivetrain:
    """The car parameters the replay fits (the nominal sim: the defaults)."""

    command_latency: float = 0.0
    """s from a command's logging to the motors acting on it."""
    speed_time_constant: float = 0.0
    """s of first-order lag from the commanded to the driven forward speed."""
    yaw_rate_time_constant: float = 0.0
    """s of first-order lag on the yaw rate."""
    trim_curvature: float = 0.0
    """1/m the car curves by when commanded straight."""
    floor_friction: float = 1.0
    """The drive wheels' sliding friction on the floor (the sim's own: 1.0): less grip, more wheel slip when the car
    speeds up or slows down hard."""


@dataclass
class CarFitConfig:
    """How the car's drivetrain is fitted."""

    fit_seconds: float = 40.0
    """s of the log the drivetrain is fitted on (from its start; each evaluation replays them)."""
    segment: float = 2.0
    """s between the replay's returns to the logged pose (the sim's path drifts off the car's and would meet the
    walls)."""
    iterations: int = 20
    """CMA-ES generations."""
    population: int = 10
    """Candidates per generation."""
    sigma: float = 0.3
    """CMA-ES's initial step, as a share of each parameter's search box."""
    command_timeout: float = 0.5
    """s without a command after which the replayed car's wheels stop, as the driver's watchdog does."""
    seed: int = 0
    """CMA-ES seed."""
    searches: int = 2
    """First drivetrain searches, each from its own seed; the one whose result's replay errs least goes on (on one
    30 s log a single search ended with its error 0.013 or 0.019, the command latency 1 or 8 ms off, by its seed)."""
    grip_steps: int = 25
    """Floor grips tried, evenly spaced over ``GRIP``."""
    refine_iterations: int = 10
    """CMA-ES generations of a second drivetrain search, at the fitted grip and from the first search's result with a
    third of its step, then the grip scanned again; kept if its replay errs less. The first search runs at the sim's
    own grip, where a car that slips reads as one with a slower speed lag (0: no second search)."""

    def validate(self) -> None:
        if (self.fit_seconds <= 0 or self.segment <= 0 or self.iterations < 1 or self.population < 4
                or not 0 < self.sigma <= 0.5 or self.command_timeout <= 0 or self.grip_steps < 3
                or self.refine_iterations < 0 or self.searches < 1):
            raise ValueError("calibrate-car: fit_seconds, segment and command_timeout must be > 0, iterations >= 1, "
                             "population >= 4, sigma in (0, 0.5], grip_steps >= 3, refine_iterations >= 0, "
                             "searches >= 1")


@dataclass
class CarCalibration:
    """What was fitted, and how well the sim then follows the car."""

    drivetrain: Drivetrain
    """The fitted command latency, lags, trim and floor grip."""
    odom_latency: float
    """s: median of (logged - stamped) over the odometry."""
    odometry_speed_scale_error: float
    """The odometry's forward speed over the poses' (moving), minus 1."""
    error_before: float
    """The nominal sim's replay error (:meth:`CarReplay.error`)."""
    error_after: float
    """The same with the fitted drivetrain."""
    evaluations: int
    """Replays of the log the fit made."""
    seconds: float
    """s the fit took."""
    window: float
    """s of log the drivetrain was fitted on."""
    history: list[float] = field(default_factory=list)
    """The best replay's error after each generation."""

    def reality(self) -> dict:
        """The fit as a car reality profile's fields (``robot_rl_sim.car_reality``)."""
        d = self.drivetrain
        return {"command_latency": round(d.command_latency, 4), "odom_latency": round(self.odom_latency, 4),
                "speed_time_constant": round(d.speed_time_constant, 4),
                "yaw_rate_time_constant": round(d.yaw_rate_time_constant, 4),
                "trim_curvature": round(d.trim_curvature, 4), "floor_friction": round(d.floor_friction, 4),
                "odometry_speed_scale_error": round(self.odometry_speed_scale_error, 4)}

    def env_kwargs(self, control_hz: float = 20.0, width: float = 0.3) -> dict:
        """Drive's randomization around the fit (each value times 1 ± ``width``, the grip ± ``width`` / 3; the trim ±
        ``width`` of its size and at least 0.02 1/m), the latencies as whole control steps of action delay."""
        d = self.drivetrain

        def around(x: float) -> list[float]:
            return [round(max(0.0, x * (1 - width)), 4), round(x * (1 + width), 4)]

        spread = max(abs(d.trim_curvature) * width, 0.02)
        scale = 1.0 + self.odometry_speed_scale_error
        steps = int(round((d.command_latency + self.odom_latency) * control_hz))
        return {"randomization": {
            "speed_lag": around(d.speed_time_constant), "yaw_rate_lag": around(d.yaw_rate_time_constant),
            "trim_curvature": [round(d.trim_curvature - spread, 4), round(d.trim_curvature + spread, 4)],
            "odometry_speed_scale": [round(scale * (1 - width / 3), 4), round(scale * (1 + width / 3), 4)],
            "friction_scale": [round(d.floor_friction * (1 - width / 3), 4),
                               round(d.floor_friction * (1 + width / 3), 4)],
            "action_latency_steps": steps}}

    def to_json(self) -> dict:
        return {**asdict(self), "reality": self.reality()}


YAW_WEIGHT = 0.5
"""m per rad in the error: a yaw rate error of 1 rad/s counts as a speed error of 0.5 m/s."""


class CarReplay:
    """The Drive task's car (its track scene) replaying a :class:`CarLog`'s commands."""

    def __init__(self, segment: float = 2.0, command_timeout: float = 0.5) -> None:
        self.env = DriveEnv(image_size=0)
        self.env.reset(seed=0)
        m = self.env.model
        self.dt = float(m.opt.timestep)
        self.segment, self.timeout = segment, command_timeout
        wheels = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in WHEEL_JOINTS]
        self.wheel_v = [int(m.jnt_dofadr[j]) for j in wheels]

    def run(self, log: CarLog, dt: Drivetrain, gain_error: float = 0.0) -> np.ndarray:
        """The car's forward speed and yaw rate [M, 2] at the log's odometry stamps, from its first pose moving as
        its first odometry says (over 1 + ``gain_error``; a log from the car at rest: at rest). Every ``segment``
        seconds the car is put back on the logged pose, keeping its motion in its own frame: the sim's speed and yaw
        rate run on, only the drift of its path is taken out (it would meet the walls)."""
        env, m = self.env, self.env.model
        set_floor_grip(m, dt.floor_friction)
        d = mujoco.MjData(m)
        d.qpos[:] = env.data.qpos
        first = log.twist[0] / (1.0 + gain_error)
        self._place(d, log.pose[0], (float(first[0]), 0.0, float(first[1])))
        times, left, right = self.wheel_targets(log, dt, (float(first[0]), float(first[1])))
        done_by = np.searchsorted(times, log.odom_stamp, side="left")  # physics steps before each stamp
        a, b = env.wheel_ctrl
        out = np.zeros((len(log.odom_stamp), 2))
        step, anchor = 0, float(log.odom_stamp[0])
        for k, stamp in enumerate(log.odom_stamp):
            if stamp - anchor >= self.segment:
                self._place(d, log.pose[k])
                anchor = stamp
            for s in range(step, int(done_by[k])):
                d.ctrl[a], d.ctrl[b] = left[s], right[s]
                mujoco.mj_step(m, d)
            step = max(step, int(done_by[k]))
            out[k] = self._motion(d)[::2]
        return out

    def wheel_targets(self, log: CarLog, dt: Drivetrain, start: tuple[float, float] = (0.0, 0.0)
                      ) -> tuple[np.ndarray, list[float], list[float]]:
        """The replay's physics step times from the log's first odometry stamp, and the wheel speed targets at each:
        the logged commands held from their due time (logged + the command latency) until the next, or zero once
        the watchdog's timeout ran; a command landing within a step takes its share of it (the error stays smooth
        in latency); then the drivetrain's lags and trim, from the driven twist ``start``. None of it depends on the
        car's state, so it is computed for the whole log at once."""
        t0, last = float(log.odom_stamp[0]), float(log.odom_stamp[-1])
        times = t0 + self.dt * np.arange(int(math.ceil((last - t0) / self.dt)) + 1)
        due = log.command_t + dt.command_latency
        v, w = self._held(log, due, times)
        landing = np.searchsorted(due, times + self.dt, side="right") - 1
        lands = landing > np.searchsorted(due, times, side="right") - 1
        share = np.where(lands, (times + self.dt - due[np.maximum(landing, 0)]) / self.dt, 0.0)
        v_next, w_next = self._held(log, due, times + self.dt)
        v, w = v + share * (v_next - v), w + share * (w_next - w)
        lags = DrivetrainLags(dt.speed_time_constant, dt.yaw_rate_time_constant, dt.trim_curvature, self.dt)
        left, right = twist_to_wheel_speeds(*lags.series(v, w, start), self.env.drive)
        return times, left.tolist(), right.tolist()

    def _held(self, log: CarLog, due: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The logged command in force at each time ``t``: zero before the first one and once the watchdog's timeout
        ran."""
        i = np.searchsorted(due, t, side="right") - 1
        live = (i >= 0) & (t - due[np.maximum(i, 0)] <= self.timeout)
        cmd = np.where(live[:, None], log.command[np.maximum(i, 0)], 0.0)
        return cmd[:, 0], cmd[:, 1]

    def _motion(self, d: mujoco.MjData) -> tuple[float, float, float]:
        """(forward, lateral speed, yaw rate) in the car's frame."""
        env = self.env
        q, vel = d.qpos[env.car_q], d.qvel[env.car_v]
        heading = math.atan2(2 * (q[3] * q[6] + q[4] * q[5]), 1 - 2 * (q[5] ** 2 + q[6] ** 2))
        c, s = math.cos(heading), math.sin(heading)
        return c * vel[0] + s * vel[1], -s * vel[0] + c * vel[1], float(vel[5])

    def _place(self, d: mujoco.MjData, pose: np.ndarray, motion: tuple[float, float, float] | None = None) -> None:
        """The car on ``pose`` (x, y, yaw), upright, moving as it was in its own frame (or as ``motion`` says:
        forward, lateral speed, yaw rate, its wheels rolling with it)."""
        env = self.env
        fwd, lat, wz = self._motion(d) if motion is None else motion
        if motion is not None:
            for dof, speed in zip(self.wheel_v, twist_to_wheel_speeds(fwd, wz, env.drive), strict=True):
                d.qvel[dof] = float(speed)
        x, y, yaw = pose
        c, s = math.cos(yaw), math.sin(yaw)
        d.qpos[env.car_q] = [x, y, WHEEL_RADIUS, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        d.qvel[env.car_v] = (c * fwd - s * lat, s * fwd + c * lat, 0.0, 0.0, 0.0, wz)
        mujoco.mj_forward(self.env.model, d)

    def error(self, log: CarLog, dt: Drivetrain, gain_error: float = 0.0) -> float:
        """The replay's error against the odometry's twist over 1 + ``gain_error``: the mean absolute speed error
        plus ``YAW_WEIGHT`` times the median absolute yaw rate error. The median: while its wheels slip (hard
        acceleration on a low-grip floor) a car's yaw rate chatters chaotically, the sim's as the robot's (a change of
        1e-3 in a lag moves single samples by 0.6 rad/s), and no replay can follow that; the median rests on the
        samples it can, and is three times sharper about the yaw lag and trim than the RMS error."""
        got, truth = self.run(log, dt, gain_error), log.twist / (1.0 + gain_error)
        return float(np.mean(np.abs(got[:, 0] - truth[:, 0])) + YAW_WEIGHT * np.median(np.abs(got[:, 1] - truth[:, 1])))


def odometry_gain_error(log: CarLog, least: float = 0.2) -> float:
    """The odometry's forward speed over the poses' where the car moves faster than ``least`` m/s, minus 1."""
    truth = pose_twist(log)[:, 0]
    moving = np.abs(truth) > least
    if moving.sum() < 20:
        raise ValueError("calibrate-car: the car hardly moved in the log; drive it (record-car-excitation)")
    return float(np.median(log.twist[moving, 0] / truth[moving]) - 1.0)


def _to_unit(dt: Drivetrain) -> np.ndarray:
    return np.array([(getattr(dt, k) - lo) / (hi - lo) for k, (lo, hi) in BOUNDS.items()])


def _from_unit(u: np.ndarray) -> Drivetrain:
    u = np.clip(np.asarray(u, np.float64), 0.0, 1.0)
    return Drivetrain(**{k: float(lo + x * (hi - lo)) for x, (k, (lo, hi)) in zip(u, BOUNDS.items(), strict=True)})


def fit_grip(replay: CarReplay, log: CarLog, dt: Drivetrain, gain_error: float, steps: int) -> float:
    """The least floor grip whose replay, with the drivetrain ``dt`` held, errs within ``GRIP_TOLERANCE`` of the
    best near the knee (:func:`grip_knee`, up to ``GRIP_REACH`` above it), the scan's errors averaged with their
    neighbours' (what chaos is left in each). The error falls as the grip rises to the car's and is flat above the
    grip at which the wheels stop slipping (on a log the sim made: it rises again): the least grip that explains the
    log sits at that knee (a car that never slipped in its log gets about the grip it would need to). The best
    error is taken near the knee because far above it, on the flat, the best is only the luckiest."""
    grips = np.linspace(*GRIP, steps)
    errors = np.array([replay.error(log, replace(dt, floor_friction=float(g)), gain_error) for g in grips])
    smooth = np.convolve(np.pad(errors, 1, mode="edge"), np.ones(3) / 3, mode="valid")
    near = grips <= grip_knee(grips, errors) + GRIP_REACH + 1e-9
    return float(grips[int(np.argmax(smooth <= smooth[near].min() * (1 + GRIP_TOLERANCE)))])


def grip_knee(grips: np.ndarray, errors: np.ndarray) -> float:
    """Where two straight lines, joined, fit the log of ``errors`` best: a steep rise below the knee and a gentle
    slope above it (what the scans look like: on ROS logs of the ``typical`` car, a rise of 2.6-3.1 per unit of
    grip below it and about 0.1 above). Fitted to every point, the knee moves less with the chaos left in each than
    the least grip near the best error, which read 0.95 for 0.74 where a drivetrain 5 % off made the approach to the
    level slow; a level line above the knee instead of a sloped one read it 8 % low."""
    y = np.log(np.asarray(errors, np.float64))
    best, knee = np.inf, float(grips[0])
    for k in np.linspace(grips[0], grips[-1], 1 + int(round((grips[-1] - grips[0]) / 0.005))):
        a = np.stack([np.ones_like(grips), np.minimum(0.0, grips - k), np.maximum(0.0, grips - k)], axis=1)
        coef = np.linalg.lstsq(a, y, rcond=None)[0]
        if coef[1] >= 0:  # no rise below the knee: no knee
            continue
        if (sse := float(np.sum((a @ coef - y) ** 2))) < best:
            best, knee = sse, float(k)
    return knee


def _search(replay: CarReplay, log: CarLog, gain: float, start: Drivetrain, sigma: float, iterations: int,
            cfg: CarFitConfig, history: list[float]) -> tuple[Drivetrain, int]:
    """The drivetrain (its grip held at ``start``'s) by CMA-ES from ``start``, and the replays it took; each
    generation's best error is appended to ``history``."""
    import cma  # deferred: only calibration needs it

    grip = start.floor_friction
    options = {"bounds": [0.0, 1.0], "popsize": cfg.population, "seed": cfg.seed + 1 + len(history), "verbose": -9,
               "maxiter": iterations}
    es = cma.CMAEvolutionStrategy(_to_unit(start), sigma, options)
    first = len(history)
    while not es.stop():
        candidates = es.ask()
        es.tell(candidates, [replay.error(log, replace(_from_unit(u), floor_friction=grip), gain) for u in candidates])
        history.append(float(es.result.fbest))
        logger.info(f"calibrate-car: generation {len(history) - first}/{iterations} at grip {grip:.2f}: best replay "
                    f"error {es.result.fbest:.4f}")
    # the search's mean, not its best replay: what chaos is left in the error makes the best replay partly the
    # luckiest one
    return replace(_from_unit(es.result.xfavorite), floor_friction=grip), int(es.result.evaluations)


def fit_car(log: CarLog, cfg: CarFitConfig, replay: CarReplay | None = None) -> CarCalibration:
    """The car's odometry latency and gain read off ``log``, its drivetrain fitted by CMA-ES on the replay at the
    sim's own grip, then its grip by :func:`fit_grip`; then, with ``refine_iterations``, both again from there."""
    cfg.validate()
    started = time.monotonic()
    replay = replay or CarReplay(cfg.segment, cfg.command_timeout)
    part = log.window(0.0, cfg.fit_seconds)
    gain = odometry_gain_error(log)
    before = replay.error(part, Drivetrain(), gain)
    history: list[float] = []
    evaluations, tried = 0, []
    for _ in range(cfg.searches):  # each from its own seed (_search's: the history's length)
        result, n = _search(replay, part, gain, Drivetrain(0.05, 0.1, 0.1, 0.0), cfg.sigma, cfg.iterations,
                            cfg, history)
        tried.append((replay.error(part, result, gain), result))
        evaluations += n + 1
    found = min(tried, key=lambda t: t[0])[1]
    found = replace(found, floor_friction=fit_grip(replay, part, found, gain, cfg.grip_steps))
    evaluations += cfg.grip_steps
    if cfg.refine_iterations:
        again, more = _search(replay, part, gain, found, cfg.sigma / 3, cfg.refine_iterations, cfg, history)
        again = replace(again, floor_friction=fit_grip(replay, part, again, gain, cfg.grip_steps))
        evaluations += more + cfg.grip_steps + 2
        # the second search's mean can wander where the error is rough (a log whose first search was not pulled
        # off by the grip): the replay decides
        if replay.error(part, again, gain) < replay.error(part, found, gain):
            found = again
    logger.info(f"calibrate-car: floor grip {found.floor_friction:.2f} ({time.monotonic() - started:.0f} s)")
    return CarCalibration(drivetrain=found, odom_latency=float(np.median(log.odom_t - log.odom_stamp)),
                          odometry_speed_scale_error=gain, error_before=before,
                          error_after=replay.error(part, found, gain), evaluations=evaluations + 1,
                          seconds=time.monotonic() - started, window=part.seconds, history=history)
