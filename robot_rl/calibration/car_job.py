"""``robot-rl calibrate-car``: a car's log in, a calibrated Drive sim out: ``reality.yaml`` (a car reality profile
the rehearsal car runs), ``env_kwargs.json`` (Drive's randomization around the fit), ``calibration.json`` and
``report.md``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from robot_rl.calibration.car_fit import CarFitConfig, fit_car
from robot_rl.calibration.car_log import read_car_bag
from robot_rl.robots.profile import load_profile


@dataclass
class CalibrateCarConfig:
    """``robot-rl calibrate-car``: what is read, fitted and written."""

    bag: str = ""
    """The car's rosbag2 bag (a folder): its driver's commands and odometry on the profile's topics while it drives
    (``robot-rl record-car-excitation`` records one)."""
    profile: str = "rehearsal/diff_drive"
    """Car profile (bundled name or YAML path) naming the bag's topics."""
    out: str = "car_calibration"
    """Folder for reality.yaml, env_kwargs.json, calibration.json and report.md."""
    control_hz: float = 20.0
    """The training env's control rate (turns the latencies into control steps of action delay)."""
    randomization_width: float = 0.3
    """Domain randomization ranges in env_kwargs.json: the fit times 1 ± this."""
    fit: CarFitConfig = field(default_factory=CarFitConfig)
    """How the drivetrain is fitted."""

    def validate(self) -> None:
        if not self.bag:
            raise ValueError("calibrate-car: --bag: the car's bag (record one with robot-rl record-car-excitation)")
        if not 0 <= self.randomization_width < 1 or self.control_hz <= 0:
            raise ValueError("calibrate-car: randomization_width must be in [0, 1), control_hz > 0")
        self.fit.validate()


def calibrate_car(cfg: CalibrateCarConfig) -> dict:
    """Reads the bag, fits, writes the four files; returns the figures."""
    cfg.validate()
    log = read_car_bag(cfg.bag, load_profile(cfg.profile, "car"))
    cal = fit_car(log, cfg.fit)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    reality = cal.reality()
    sources = dict.fromkeys(reality, f"robot-rl calibrate-car {cfg.bag}")
    (out / "reality.yaml").write_text(
        "# The car as calibrated from its log (robot_rl_sim.car_reality fields): the rehearsal car runs it with\n"
        f"# reality:={out / 'reality.yaml'}\n" + yaml.safe_dump({**reality, "sources": sources}, sort_keys=False))
    kwargs = cal.env_kwargs(cfg.control_hz, cfg.randomization_width)
    (out / "env_kwargs.json").write_text(json.dumps(kwargs, indent=1) + "\n")
    figures = {**cal.to_json(), "log_seconds": round(log.seconds, 1), "env_kwargs": kwargs}
    (out / "calibration.json").write_text(json.dumps(figures, indent=1, default=float) + "\n")
    rows = "\n".join(f"| {k} | {v} |" for k, v in reality.items())
    (out / "report.md").write_text(f"""# Calibration of the Drive sim from {cfg.bag}

{log.seconds:.0f} s of log; the drivetrain fitted on its first {cal.window:.0f} s by CMA-ES ({cal.evaluations}
replays, {cal.seconds:.0f} s), then the floor grip by a scan. Error of the sim replaying the log (mean absolute
speed error + 0.5 x median absolute yaw rate error): {cal.error_before:.4f} nominal, {cal.error_after:.4f}
calibrated.

| parameter | fitted |
|---|---|
{rows}

Train in the calibrated, randomized sim:

```bash
robot-rl train drive --env.kwargs "$(cat {out / 'env_kwargs.json'})"
```

Rehearse against the calibrated car: `car_hardware` with `reality:={out / 'reality.yaml'}`.
""")
    return figures
