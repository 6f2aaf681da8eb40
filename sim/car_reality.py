"""Car reality profiles: the ways a rehearsal car differs from the Drive task's sim, as a real 1/10-scale car does.

The car hardware node (:mod:`robot_rl_sim.ros_car_node`, parameter ``reality``) applies a profile to its own physics
and outputs; training never sees it. Bundled: ``mild``, ``typical`` and ``hard`` (``sim/realities/car/*.yaml``),
each value with where it comes from (``sim/realities/car/FACTS.md``). ``nominal`` is the training sim itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from robot_rl_sim.reality import BUNDLED, bundled_realities, check_numbers, read_reality

CAR_BUNDLED = BUNDLED / "car"


@dataclass(frozen=True)
class CarRealityProfile:
    """How the rehearsal car differs from the training sim (all defaults: not at all)."""

    name: str = "nominal"
    """What the profile is called (its file's stem)."""
    command_latency: float = 0.0
    """s from a command message to the motors acting on it (command smoother, servo frame, serial link)."""
    odom_latency: float = 0.0
    """s by which odometry, TF, joint states and the lidar scan go out late (their stamps stay the true times)."""
    speed_time_constant: float = 0.0
    """s: the forward speed follows the commanded one as a first-order lag (the motor controller and drivetrain)."""
    yaw_rate_time_constant: float = 0.0
    """s: the yaw rate follows the commanded one as a first-order lag (a steering servo's, on an Ackermann car)."""
    trim_curvature: float = 0.0
    """1/m the car curves by when commanded straight (a steering trim off by angle a on wheelbase L: tan(a) / L);
    positive to the left."""
    odometry_speed_scale_error: float = 0.0
    """The odometry's twist is 1 + x times the true one (an uncalibrated speed-to-ERPM gain or wheel radius)."""
    floor_friction: float = 0.0
    """Friction coefficient between the drive wheels and the floor; 0: the sim's own (1.0)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Where each value comes from (field -> source), as stated facts."""

    def __post_init__(self) -> None:
        check_numbers(self, "car reality profile", signed=("trim_curvature", "odometry_speed_scale_error"))
        if self.odometry_speed_scale_error <= -1.0:
            raise ValueError(f"car reality profile {self.name!r}: odometry_speed_scale_error must be > -1")

    @property
    def nominal(self) -> bool:
        return self == CarRealityProfile(name=self.name, sources=self.sources)


def bundled_car_realities() -> list[str]:
    return bundled_realities(CAR_BUNDLED)


def load_car_reality(name_or_path: str) -> CarRealityProfile:
    """A bundled car profile by name (``mild``, ``typical``, ``hard``), ``nominal``, or a YAML file's path."""
    return read_reality(CarRealityProfile, CAR_BUNDLED, name_or_path)


class FirstOrderLag:
    """``y`` follows its target with time constant ``tau`` (0: at once), advanced one physics step at a time."""

    def __init__(self, tau: float, dt: float) -> None:
        self.alpha = 1.0 if tau <= 0 else 1.0 - math.exp(-dt / tau)  # exact for a target held over the step
        self.y = 0.0

    def step(self, target: float) -> float:
        self.y += self.alpha * (target - self.y)
        return self.y


class DrivetrainLags:
    """The twist a car's wheels are driven at, from the commanded one: each physics step, the speed and yaw rate
    through their first-order lags, and the trim's curvature times the driven speed added to the yaw rate. One law
    for the emulated car, the randomized Drive task and the calibration's replay."""

    def __init__(self, speed_tau: float, yaw_rate_tau: float, trim_curvature: float, dt: float) -> None:
        self.speed, self.yaw_rate = FirstOrderLag(speed_tau, dt), FirstOrderLag(yaw_rate_tau, dt)
        self.trim = trim_curvature

    @property
    def instant(self) -> bool:
        """No lag and no trim: the driven twist is the commanded one."""
        return self.speed.alpha == 1.0 and self.yaw_rate.alpha == 1.0 and self.trim == 0.0

    def start(self) -> None:
        """The car at rest: both lags start over."""
        self.speed.y = self.yaw_rate.y = 0.0

    def step(self, v: float, w: float) -> tuple[float, float]:
        """One physics step towards the commanded ``v``, ``w``: the driven (speed, yaw rate)."""
        v_now = self.speed.step(v)
        return v_now, self.yaw_rate.step(w) + self.trim * v_now

    def series(self, v: np.ndarray, w: np.ndarray, start: tuple[float, float] = (0.0, 0.0)
               ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`step` over a whole series of commanded twists, one per physics step (the calibration's replay: its
        commands do not depend on the car's state), from the driven (speed, yaw rate) ``start`` (default: at rest).
        The lags are left as they were."""
        from scipy.signal import lfilter  # deferred: only the calibration's replay runs whole series

        def lag(f: FirstOrderLag, x: np.ndarray, y0: float) -> np.ndarray:  # y[k] = y[k-1] + alpha (x[k] - y[k-1])
            return lfilter([f.alpha], [1.0, f.alpha - 1.0], np.asarray(x, np.float64), zi=[(1.0 - f.alpha) * y0])[0]

        v_now = lag(self.speed, v, start[0])
        return v_now, lag(self.yaw_rate, w, start[1] - self.trim * start[0]) + self.trim * v_now
