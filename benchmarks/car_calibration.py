"""Car calibration against a hidden car: the emulated car runs a car reality profile behind the ``diff_drive``
profile, beside the car safety node, each in its own process (ROS 2, Fast DDS); ``robot-rl record-car-excitation``
drives it around the track and records its log, ``robot-rl calibrate-car`` fits the Drive sim to the log alone;
each of the profile's values beside what calibration found, and the sim's speed and yaw rate error replaying the
log before and after.

    MUJOCO_GL=egl .venv/bin/python benchmarks/car_calibration.py [--realities typical] [--seconds 120]
        [--fit-seconds 60] [--iterations 25] [--out FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Table, write_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.ros: the rehearsal graph

FIELDS = (("command_latency", "command latency (s)"), ("odom_latency", "odometry latency (s)"),
          ("speed_time_constant", "speed lag (s)"), ("yaw_rate_time_constant", "yaw rate lag (s)"),
          ("trim_curvature", "trim (1/m)"), ("floor_friction", "floor grip"),
          ("odometry_speed_scale_error", "odometry gain error"))


def calibrate_against(reality: str, args: argparse.Namespace, folder: Path) -> dict:
    from robot_rl.calibration.car_excite import CarExcitationConfig, record_car_excitation
    from tests.ros.graph import Graph, ros_env

    os.environ.update(ros_env(args.domain))
    graph = Graph(args.domain, folder)
    graph.start("car_hardware", "-p", "profile:=rehearsal/diff_drive", "-p", f"reality:={reality}")
    graph.start("car_safety", "-p", "profile:=rehearsal/diff_drive")
    try:
        bag = record_car_excitation(CarExcitationConfig(out=str(folder / f"log_{Path(reality).stem}"),
                                                        seconds=args.seconds))["bag"]
    finally:
        graph.stop()
    out = folder / f"calibration_{Path(reality).stem}"
    subprocess.run([sys.executable, "-m", "robot_rl.cli", "calibrate-car", "--bag", bag, "--out", str(out),
                    "--fit.fit-seconds", str(args.fit_seconds), "--fit.iterations", str(args.iterations)],
                   check=True, cwd=ROOT)
    return json.loads((out / "calibration.json").read_text())


def tables(figures: dict) -> list[Table]:
    from robot_rl_sim.car_reality import load_car_reality

    setup, out = figures["setup"], []
    for reality, found in figures["realities"].items():
        truth, got = load_car_reality(reality), found["reality"]
        table = Table(f"Car reality {reality}: hidden in the emulated car, found from {setup['seconds']:.0f} s of log "
                      f"(drivetrain fitted on {setup['fit_seconds']:.0f} s, {found['evaluations']} replays, "
                      f"{found['seconds']:.0f} s)", ["value", "hidden", "found", "error"], echo=False)
        for key, label in FIELDS:
            hidden = getattr(truth, key)
            error = (f"{1e3 * (got[key] - hidden):+.1f} ms" if key.endswith("latency")
                     else f"{100 * (got[key] / hidden - 1):+.0f} %" if hidden else "-")
            table.add(label, f"{hidden:g}", f"{got[key]:.4g}", error)
        table.add("replay error: mean |speed error| + 0.5 x median |yaw rate error|", "-",
                  f"{found['error_before']:.3f} nominal -> {found['error_after']:.3f}", "-")
        out.append(table)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--realities", nargs="+", default=["typical"])
    p.add_argument("--seconds", type=float, default=120.0, help="s of excitation recorded")
    p.add_argument("--fit-seconds", type=float, default=60.0)
    p.add_argument("--iterations", type=int, default=25)
    p.add_argument("--domain", type=int, default=93)
    p.add_argument("--out", default=None)
    p.add_argument("--keep", default="", help="folder to keep the logs and calibrations in (default: none kept)")
    args = p.parse_args()
    figures: dict = {"realities": {}, "setup": {"seconds": args.seconds, "fit_seconds": args.fit_seconds}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for reality in args.realities:
            figures["realities"][reality] = calibrate_against(reality, args, folder)
    print(f"results: {write_result('car_calibration', figures, args.out, tables=tables(figures))}")


if __name__ == "__main__":
    main()
