"""What ``robot-rl calibrate`` writes: the fit as a reality profile (``reality.yaml``: the rehearsal driver runs
it, ``reality:=<path>``), the training env's kwargs with domain randomization around the fit (``env_kwargs.json``),
the figures (``calibration.json``) and a report with plots of sim and robot before and after (``report.md``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from robot_rl.calibration.camera import CameraCalibration
from robot_rl.calibration.fit import Calibration
from robot_rl.calibration.log import DriverLog
from robot_rl.calibration.replay import NOMINAL_OMEGA, ArmReplay, Dynamics
from robot_rl_controllers.impedance import ImpedanceGains

GRIPPER_SLOW_REACH = 1.5
"""How far below its fit the gripper's speed range reaches, in randomization widths (see :func:`env_kwargs`)."""


def whole_steps(seconds: float, control_hz: float) -> tuple[int, int]:
    """The commands' delay as the training sim's whole control steps, and one step of jitter when it falls more than a
    fifth of a step past them."""
    steps = seconds * control_hz
    return int(np.floor(steps)), int(steps - np.floor(steps) > 0.2)


def frame_lag_steps(camera_latency: float, state_latency: float, control_hz: float) -> int:
    """How many control steps older than the state the training sim's images are: the policy reads the newest frame
    beside the newest state, older by the camera's latency less the state's, and the sim shows the frame nearest
    that age, always the same. (Frames drawn 1 or 2 steps old at random teach a policy to act ahead of what it
    sees: on a robot's fresher frames it lifts before a slow gripper has closed.)"""
    return int(np.floor(max(0.0, camera_latency - state_latency) * control_hz + 0.5))


def env_kwargs(cal: Calibration, control_hz: float = 20.0, width: float = 0.3, response: dict | None = None) -> dict:
    """The arm task's kwargs for training in the calibrated sim: the fit ± ``width`` (a fraction) as randomization
    ranges. The gripper's speed, where the robot's is slower than the sim's, reaches ``GRIPPER_SLOW_REACH`` x
    ``width`` below its fit and ``width`` above: a policy whose gripper closes slower than any it trained with lifts
    before the fingers hold, a faster one costs nothing (state PickCube through ``typical``, three seeds: 1 point short
    of their sim with -45/+30 %, 4 with ± 30 %; docs/benchmarks/sim-to-real.md). The latencies (command + state)
    become whole control steps of delay, one more step of jitter when they fall between. The state's EE velocity is
    the step's mean (``ee_velocity: step``), as a robot moving at a steady speed through each period reports it.

    With a probe ``response`` fitted (:func:`robot_rl.calibration.response.fit_response`: the robot's end effector
    under the policy's own actions), the stiffness and the steps of delay are its pick, which the sim's arm then
    follows as the robot's does; without one, they come from the joint fit as below (an estimate).

    The stiffness: the training sim's arm follows its target through an impedance law of bandwidth
    sqrt(kp_pos) (20 rad/s), which stands for the whole nominal robot path, joint loop (``NOMINAL_OMEGA``) included.
    A robot whose joint loop is slower adds that loop's extra lag, 1/omega_robot - 1/omega_nominal, to the sim's
    1/omega_sim; the stiffness scales with the square of the bandwidth that leaves. (Scaling it by the joint loop's
    own bandwidth squared made the sim arm far slower than the robot: 0.25 for a loop at half speed.)"""
    d = cal.dynamics
    sim_omega = float(np.sqrt(ImpedanceGains().kp_pos))
    extra_lag = 1.0 / (NOMINAL_OMEGA * d.bandwidth_scale) - 1.0 / NOMINAL_OMEGA
    k = (1.0 / (1.0 + sim_omega * extra_lag)) ** 2
    delay, jitter = whole_steps(d.command_latency + cal.state_latency, control_hz)
    if response is not None:
        k, delay, jitter = response["stiffness_scale"], response["action_latency_steps"], 0
    lo, hi = 1.0 - width, 1.0 + width
    grip = cal.reality()["gripper_speed"]  # 0: as fast as the sim's, which then stays as it is
    # the robot's driver interpolates each command over the period: its EE velocity reads as the step's mean
    return {"ee_velocity": "step", "randomization": {
        "stiffness_scale": [round(k * lo, 3), round(k * hi, 3)],
        "joint_friction": [round(d.coulomb_friction * lo, 3), round(d.coulomb_friction * hi, 3)],
        "joint_damping": [round(d.viscous_friction * lo, 3), round(d.viscous_friction * hi, 3)],
        "action_latency_steps": delay,
        "action_latency_jitter": jitter,
        "gripper_speed": [round(grip * (1.0 - GRIPPER_SLOW_REACH * width), 4), round(grip * hi, 4)],
        "obs_noise_std": float(f"{cal.joint_noise:.2g}")}}


def _plot(path: Path, log: DriverLog, before: np.ndarray, after: np.ndarray, seconds: float = 8.0) -> None:
    import matplotlib  # deferred: only the report draws

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: see above

    t = log.state_stamp - log.state_stamp[0]
    keep = t <= seconds
    joints = (0, 3, 5)
    fig, axes = plt.subplots(len(joints), 1, figsize=(8, 2.2 * len(joints)), sharex=True)
    for ax, j in zip(axes, joints, strict=True):
        ax.plot(t[keep], log.state_q[keep, j], "k-", lw=1.6, label="robot")
        ax.plot(t[keep], before[keep, j], "C3--", lw=1.0, label="sim, nominal")
        ax.plot(t[keep], after[keep, j], "C0-", lw=1.0, label="sim, calibrated")
        ax.set_ylabel(f"joint {j + 1} (rad)")
    axes[0].legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("s")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(out: str | Path, cal: Calibration, log: DriverLog, source: str, replay: ArmReplay,
                 control_hz: float = 20.0, width: float = 0.3, response: dict | None = None,
                 cameras: list[CameraCalibration] = ()) -> dict:
    """Writes the five files into ``out``; returns the figures. ``response``: a probe response's fit, whose
    stiffness and delay env_kwargs.json takes (see :func:`env_kwargs`). ``cameras``: the cameras fitted; the
    first one's values are the reality profile's camera fields (which a profile gives every camera)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    reality = {**cal.reality(), **(cameras[0].reality() if cameras else {})}
    sources = dict.fromkeys(reality, f"robot-rl calibrate {source}")
    (out / "reality.yaml").write_text(
        "# The robot as calibrated from its log (robot_rl_sim.reality fields): the rehearsal driver runs it with\n"
        f"# reality:={out / 'reality.yaml'}\n" + yaml.safe_dump({**reality, "sources": sources}, sort_keys=False))
    kwargs = env_kwargs(cal, control_hz, width, response)
    if cameras:  # the training sim's cameras where the robot's are
        kwargs["randomization"]["camera_offsets"] = {
            c.camera: [round(v, 5) for v in c.position] + [round(v, 3) for v in c.rotation] + [round(c.focal_error, 4)]
            for c in cameras}
        kwargs["randomization"]["image_gains"] = [round(g, 4) for g in cameras[0].gains]  # one sim colour for all
        kwargs["randomization"].update(image_latency_steps=frame_lag_steps(cameras[0].latency, cal.state_latency,
                                                                          control_hz), image_latency_jitter=0)
    (out / "env_kwargs.json").write_text(json.dumps(kwargs, indent=1) + "\n")
    figures = {**cal.summary(), "log_seconds": round(log.seconds, 1), "env_kwargs": kwargs}
    if response is not None:
        figures["response_fit"] = {k: v for k, v in response.items() if k != "candidates"}
    if cameras:
        figures.update(cameras[0].reality())
        figures["cameras"] = [c.summary() for c in cameras]
    (out / "calibration.json").write_text(json.dumps(figures, indent=1, default=float) + "\n")
    part = log.window(0.0, 10.0)
    _plot(out / "joints.png", part, replay.run(part, Dynamics()), replay.run(part, cal.dynamics))
    rows = [("command latency (s)", "0", reality["command_latency"]),
            ("state latency (s)", "0", reality["state_latency"]),
            ("joint loop bandwidth (x nominal)", "1", reality["tracking_bandwidth_scale"]),
            ("joint Coulomb friction (N m)", "0", reality["joint_coulomb_friction"]),
            ("joint viscous friction (N m s/rad)", "0", reality["joint_viscous_friction"]),
            ("gripper speed (m/s; 0: the sim's own)", f"0 ({cal.sim_gripper_speed:.2f})", reality["gripper_speed"]),
            ("joint noise (rad)", "0", reality["joint_noise"])]
    if response is not None:
        rows += [("sim stiffness x, steps of delay (probe response)", "1, 0",
                  f"{response['stiffness_scale']}, {response['action_latency_steps']} "
                  f"({response['rms_mm']} mm RMS)")]
    for c in cameras:
        rows += [(f"camera {c.camera}: offset (mm; its x, y, z), rotation (deg)", "0, 0",
                  f"{', '.join(f'{1e3 * v:.1f}' for v in c.position)}; {', '.join(f'{v:.2f}' for v in c.rotation)}"),
                 (f"camera {c.camera}: focal length error, gains R G B", "0, 1 1 1",
                  f"{c.focal_error:+.3f}, {' '.join(f'{g:.3f}' for g in c.gains)} (image RMS {c.rms_before:.1f} "
                  f"-> {c.rms_after:.2f} of 255, {c.frames} frames)"),
                 (f"camera {c.camera}: latency (s)", "0", f"{c.latency:.3f}")]
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    (out / "report.md").write_text(f"""# Calibration of the sim from {source}

{log.seconds:.0f} s of log; the dynamics fitted on its first {cal.window:.0f} s by CMA-ES ({cal.evaluations} replays,
friction {"read off the motors' efforts" if cal.friction_from == "efforts" else "fitted with them"},
{cal.seconds:.0f} s). Joint position RMS error of the sim replaying the log:
{1e3 * cal.rms_before:.2f} mrad nominal, {1e3 * cal.rms_after:.2f} mrad calibrated (median
{1e3 * cal.median_before:.2f} and {1e3 * cal.median_after:.2f} mrad).

| parameter | nominal sim | fitted |
|---|---|---|
{table}

![Joints 1, 4 and 6: the robot, the nominal sim and the calibrated sim replaying the same commands](joints.png)

Train in the calibrated, randomized sim:

```bash
robot-rl train pickcube --env.kwargs "$(cat {out / 'env_kwargs.json'})"
```

Rehearse against the calibrated robot: the arm driver with `reality:={out / 'reality.yaml'}`.
""")
    return figures

