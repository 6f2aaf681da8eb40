"""Calibration against a hidden robot: the emulated arm driver runs a reality profile in its own process (ROS 2,
Fast DDS), ``robot-rl record-excitation`` records its log, ``robot-rl calibrate`` fits the sim to the log alone;
each of the profile's values beside what calibration found, and the sim's joint error replaying the log before
and after. The arm has a camera beside it and one on its wrist (``front``, ``wrist``, ``--image-size`` pixels
square), whose frames of the arm held at twelve poses calibration fits each camera's pose, lens and colour to.

    MUJOCO_GL=egl .venv/bin/python benchmarks/calibration.py [--realities typical] [--seconds 120]
        [--fit-seconds 40] [--iterations 15] [--population 10] [--image-size 128] [--out FILE] [--keep DIR]
        [--no-response]

Then ``robot-rl record-response`` probes the same robot through the robot env and the safety node, and calibrate
fits the training sim's stiffness and delay to it (``--response``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Table, write_result

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.ros: the rehearsal graph

FIELDS = (("command_latency", "command latency (s)"), ("state_latency", "state latency (s)"),
          ("tracking_bandwidth_scale", "joint loop bandwidth (x sim)"),
          ("joint_coulomb_friction", "dry friction (N m)"), ("joint_viscous_friction", "viscous friction (N m s/rad)"),
          ("gripper_speed", "gripper speed (m/s)"), ("joint_noise", "joint noise (rad)"),
          ("camera_latency", "camera latency (s)"), ("camera_position_error", "camera position error (m)"),
          ("camera_rotation_error", "camera rotation error (deg)"), ("camera_focal_error", "focal length error"),
          ("brightness_change", "colour: brightness change"))


def probe_through(reality: str, args: argparse.Namespace, folder: Path) -> str:
    """``robot-rl record-response`` through the robot env and the safety node, the driver running ``reality``."""
    from robot_rl.calibration.response import ResponseConfig, record_response
    from tests.ros.test_profiles import profile_file, running_profile

    path = profile_file(args.profile, folder)
    with running_profile(args.domain, folder, path, "-p", f"reality:={reality}"):
        out = str(folder / f"response-{reality}.json")
        record_response(ResponseConfig(profile=path, out=out, reset_service="arm_driver/reset"))
        return out


def calibrate_against(reality: str, args: argparse.Namespace, folder: Path) -> dict:
    import yaml

    from robot_rl.calibration.excite import ExcitationConfig, record_excitation
    from robot_rl.calibration.fit import FitConfig
    from robot_rl.calibration.job import CalibrateConfig, calibrate

    profile = folder / "arm_with_camera.yaml"
    profile.write_text(yaml.safe_dump({"extends": args.profile, "cameras": [
        {"name": "front", "source": "ros", "topic": "/camera/color/image_raw"},
        {"name": "wrist", "source": "ros", "topic": "/wrist_camera/color/image_raw"}],
        "joint_states": {"effort": args.efforts}}))
    env = dict(os.environ, ROS_DOMAIN_ID=str(args.domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    os.environ.update(ROS_DOMAIN_ID=env["ROS_DOMAIN_ID"], ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    driver = subprocess.Popen([sys.executable, "-c", "import sys; from robot_rl_sim.ros_arm_driver import main; "
                               "sys.exit(main())", "--ros-args", "-p", f"profile:={profile}",
                               "-p", f"reality:={reality}", "-p", f"image_size:={args.image_size}"], env=env,
                              stdout=subprocess.DEVNULL)
    try:
        bag = record_excitation(ExcitationConfig(profile=str(profile), out=str(folder / f"log-{reality}"),
                                                 seconds=args.seconds))["bag"]
    finally:
        driver.send_signal(signal.SIGINT)
        driver.wait(30)
    response = probe_through(reality, args, folder) if args.response else ""
    started = time.monotonic()
    found = calibrate(CalibrateConfig(bag=bag, profile=str(profile), out=str(folder / f"calibration-{reality}"),
                                      response=response,
                                      fit=FitConfig(fit_seconds=args.fit_seconds, iterations=args.iterations,
                                                    population=args.population)))
    return {**found, "wall_s": round(time.monotonic() - started, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--realities", nargs="+", default=["typical"])
    p.add_argument("--profile", default="ros2_control_joint_position")
    p.add_argument("--seconds", type=float, default=120.0, help="s of excitation recorded")
    p.add_argument("--fit-seconds", type=float, default=40.0)
    p.add_argument("--iterations", type=int, default=15)
    p.add_argument("--population", type=int, default=10)
    p.add_argument("--image-size", type=int, default=128, help="the camera's frames (pixels square)")
    p.add_argument("--domain", type=int, default=91)
    p.add_argument("--efforts", choices=("motor_torque", "none"), default="motor_torque",
                   help="the profile's joint_states.effort: the rehearsal driver's efforts are its motors' torques "
                        "(friction read off them); none: friction fitted with the latency and bandwidth")
    p.add_argument("--no-response", dest="response", action="store_false",
                   help="skip robot-rl record-response (the training sim's stiffness and delay then come from the "
                        "joint fit's estimate)")
    p.add_argument("--out", default=None)
    p.add_argument("--keep", default=None, help="folder to keep the logs and calibrations in (default: a temporary "
                                                 "folder, removed)")
    args = p.parse_args()
    figures: dict = {"realities": {}, "setup": {"seconds": args.seconds, "fit_seconds": args.fit_seconds,
                                                "efforts": args.efforts, "image_size": args.image_size}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = args.keep or tmp
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for reality in args.realities:
            figures["realities"][reality] = calibrate_against(reality, args, Path(tmp))
    print(f"results: {write_result('calibration', figures, args.out, tables=tables(figures))}")


def _error(key: str, hidden: float, got: float) -> str:
    if key.endswith("latency"):
        return f"{1e3 * (got - hidden):+.1f} ms"
    return f"{100 * (got / hidden - 1):+.0f} %" if hidden else "-"


def tables(figures: dict) -> list[Table]:
    """One table per reality profile: each hidden value beside what calibration found."""
    from robot_rl_sim.reality import load_reality

    setup, out = figures["setup"], []
    for reality, found in figures["realities"].items():
        truth = load_reality(reality)
        table = Table(f"Reality profile {reality}: hidden in the driver, found from {setup['seconds']:.0f} s of log "
                      f"and {setup.get('image_size', 128)}-pixel frames (dynamics fitted on "
                      f"{setup['fit_seconds']:.0f} s, {found['evaluations']} replays, "
                      f"{found['wall_s']:.0f} s in all)", ["parameter", "hidden", "found", "error"], echo=False)
        for key, label in FIELDS:
            if key in found and not key.startswith(("camera_", "brightness")):
                table.add(label, getattr(truth, key), found[key], _error(key, getattr(truth, key), found[key]))
        table.add("joint RMS error replaying the log (mrad)", f"{1e3 * found['rms_before_rad']:.2f} (nominal sim)",
                  f"{1e3 * found['rms_after_rad']:.2f}", "")
        for cam in found.get("cameras", []):
            for key, label in FIELDS:
                if key.startswith(("camera_", "brightness")):
                    hidden, got = getattr(truth, key), cam["reality"][key]
                    table.add(f"{cam['camera']} {label}", hidden, got, _error(key, hidden, got))
            table.add(f"{cam['camera']} image RMS error (of 255)", f"{cam['rms_before']:.1f} (described)",
                      f"{cam['rms_after']:.2f}", f"{cam['frames']} frames, {cam['seconds']:.0f} s")
        if "response_fit" in found:
            r = found["response_fit"]
            table.add("training sim: stiffness x, steps of delay (probe response)", "-",
                      f"{r['stiffness_scale']}, {r['action_latency_steps']}", f"{r['rms_mm']} mm RMS")
        out.append(table)
    return out


if __name__ == "__main__":
    main()
