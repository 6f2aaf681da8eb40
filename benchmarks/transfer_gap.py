"""The transfer gap: PickCube policies (state, or pixels: runs whose env has ``image_size``) and Drive policies in pure
sim and through the rehearsal driver running a reality profile (the emulated robot that differs from the training sim
as a real one does: for the arm latency, a slower joint loop, friction, a slow gripper, noise, a camera off where its
frame says, another lens and colour; for the car latency, drivetrain and steering lags, a steering trim, an
odometry gain error, another floor), on the same object placements or start poses.

    MUJOCO_GL=egl .venv/bin/python benchmarks/transfer_gap.py --runs nominal=runs/pc_state_s0
        calibrated=runs/pc_cal_s0 [--realities typical] [--episodes 50] [--out RESULT.json]

Each run's latest policy, deterministic: in the nominal sim (the hardware's placements replayed), then
through ``ros2_control_joint_position`` with the emulated driver (``reality:=NAME``) and the safety node in
processes of their own, over Fast DDS (a pixel run's robot has its front and wrist cameras as ROS image topics, at
its image size, and no object pose); the robot env reads the EE velocity through the Jacobian
(``--robot-ee-velocity`` for another reading). A Drive run laps the track through ``--car-profile``
(``car_hardware`` with ``reality:=NAME``, from ``sim/realities/car``, and the car safety node) from the driver's
first start poses.
Beside it, the policy in the sim it was trained in (its env kwargs; the nominal sim for a nominal run): the gap is
that minus the rehearsal, in points, what training promised and the robot did not keep.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import Table, write_result  # noqa: E402
from robot_profiles import policy_success  # noqa: E402
from ros_latency import policy_successes  # noqa: E402

from robot_rl.utils.run_dir import policy_file  # noqa: E402
from tests.ros.graph import Graph, ros_env  # noqa: E402
from tests.ros.test_profiles import profile_file, running_profile  # noqa: E402


def training_sim(run: str, episodes: int, policy: str | None = None) -> dict:
    """The policy in the sim it was trained in (its env kwargs: randomization drawn per episode), on the same
    placements."""
    from robot_rl.config import load_yaml
    from robot_rl.training.config import TrainConfig

    kwargs = load_yaml(TrainConfig, Path(run) / "config.yaml").env.kwargs
    ok = policy_successes(run, episodes, sim_kwargs=kwargs, policy_file=policy)
    return {"success": float(ok.mean()), "episodes": episodes, "env_kwargs": kwargs}


def task_of(run: str) -> str:
    from robot_rl.config import load_yaml
    from robot_rl.training.config import TrainConfig

    return load_yaml(TrainConfig, Path(run) / "config.yaml").env.id


def drive_gap(runs: dict[str, str], realities: list[str], profile: str, episodes: int, domain: int,
              folder: Path, which: str = "latest") -> dict:
    """Each Drive run's laps in the nominal sim, in its training sim and through ``profile`` with each reality."""
    from car_profiles import SEED, laps_in_sim, laps_through, load_policy

    out: dict = {}
    for name, run in runs.items():
        agent, kwargs = load_policy(run, which)
        task = {k: v for k, v in kwargs.items() if k != "randomization"}  # the task, as the nominal sim has it
        out[name] = {"run_dir": run, "pure_sim": laps_in_sim(episodes, agent, task),
                     "training_sim": {**laps_in_sim(episodes, agent, kwargs), "env_kwargs": kwargs}}
        for reality in realities:
            graph = Graph(domain, folder)
            graph.start("car_hardware", "-p", f"profile:=rehearsal/{profile}", "-p", f"seed:={SEED}",
                        "-p", f"reality:={reality}")
            graph.start("car_safety", "-p", f"profile:=rehearsal/{profile}")
            try:
                out[name][reality] = laps_through(f"rehearsal/{profile}", episodes, agent)
            except (TimeoutError, RuntimeError) as exc:  # recorded; the other runs still go
                out[name][reality] = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                graph.stop()
            print(name, reality, {k: v for k, v in out[name][reality].items() if k != "starts"}, flush=True)
    return out


def image_size(run: str) -> int:
    """The run's camera image size (0: a state policy)."""
    from robot_rl.config import load_yaml
    from robot_rl.training.config import TrainConfig

    return int(load_yaml(TrainConfig, Path(run) / "config.yaml").env.kwargs.get("image_size", 0))


def camera_profile(profile: str, size: int, folder: Path) -> str:
    """``profile``'s rehearsal file with the sim's front and wrist cameras (``size`` pixels) and no object pose, as
    a pixel policy's robot has."""
    import yaml

    data = yaml.safe_load(Path(profile_file(profile, folder)).read_text())
    data["cameras"] = [{"name": c, "source": "ros", "topic": f"/{c}_camera/color/image_raw", "resize": [size, size]}
                       for c in ("front", "wrist")]
    data["objects"] = []
    path = folder / f"{profile}_cameras_{size}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def fresh_robot(domain: int, folder: Path, profile: str, reality: str, size: int) -> AbstractContextManager[Graph]:
    """The robot, started fresh for the block: the emulated driver running ``reality`` (its cameras at ``size``
    pixels; 0: none) and the safety node. A fresh driver places the cube in the same sequence from its first reset."""
    return running_profile(domain, folder, profile, "-p", f"reality:={reality}",
                           *(["-p", f"image_size:={size}"] if size else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", required=True, help="NAME=RUN_DIR: PickCube runs (state or pixels)")
    parser.add_argument("--realities", nargs="+", default=["typical"], help="bundled names or reality YAML paths")
    parser.add_argument("--profile", default="ros2_control_joint_position", help="the arm profile")
    parser.add_argument("--car-profile", default="diff_drive", help="the car profile of Drive runs")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--domain", type=int, default=207)
    parser.add_argument("--policy", choices=["latest", "best"], default="latest",
                        help="each run's newest checkpoint's policy, or its best evaluation's (keep_best)")
    parser.add_argument("--robot-ee-velocity", choices=["instant", "step", "trained"], default="instant",
                        help="how the robot env reads the EE velocity (trained: as each run's sim did)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    runs = dict(r.split("=", 1) for r in args.runs)
    os.environ.update(ros_env(args.domain))
    folder = Path(tempfile.mkdtemp(prefix="transfer_gap_"))
    drives = {n: r for n, r in runs.items() if task_of(r) == "robot_rl/Drive-v0"}
    runs = {n: r for n, r in runs.items() if n not in drives}
    sizes = {name: image_size(run) for name, run in runs.items()}
    policies = {name: str(policy_file(run, args.policy)) for name, run in runs.items()}
    result: dict = {"runs": {name: {"run_dir": run, "policy": args.policy,
                                    "pure_sim": policy_success(run, None, args.episodes, policy_file=policies[name]),
                                    "training_sim": training_sim(run, args.episodes, policies[name])}
                             for name, run in runs.items()}}
    for reality, name in ((r, n) for r in args.realities for n in runs):
        size = sizes[name]
        path = camera_profile(args.profile, size, folder) if size else profile_file(args.profile, folder)
        # a driver of its own for each run: its resets place the cubes in one sequence from its start, so every
        # run meets the placements the sim columns replay (hardware_placements), not those after another run's
        try:
            with fresh_robot(args.domain, folder, path, reality, size):
                got = policy_success(runs[name], path, args.episodes, policy_file=policies[name],
                                     ee_velocity=args.robot_ee_velocity)
        except (TimeoutError, RuntimeError) as exc:  # recorded; the other runs still go
            got = {"error": f"{type(exc).__name__}: {exc}"}
        result["runs"][name][reality] = got
        print(name, reality, got, flush=True)
    if drives:
        result["drive"] = drive_gap(drives, args.realities, args.car_profile, args.episodes, args.domain, folder,
                                    args.policy)
    result["setup"] = {"episodes": args.episodes, "profile": args.profile, "car_profile": args.car_profile,
                       "realities": args.realities}
    print(f"results: {write_result('transfer_gap', result, args.out, tables=tables(result))}")


def tables(result: dict) -> list[Table]:
    n, realities = result["setup"]["episodes"], result["setup"]["realities"]
    out = []
    for key, title in (("runs", f"PickCube, deterministic, the same {n} placements: pure sim and through "
                                f"{result['setup']['profile']}"),
                       ("drive", f"Drive, deterministic, the same {n} start poses, one lap to succeed: pure sim and "
                                 f"through {result['setup'].get('car_profile', 'diff_drive')}")):
        if not result.get(key):
            continue
        table = Table(f"{title} with each reality profile hidden in the driver",
                      ["policy", "run", "nominal sim", "its training sim", *[f"{r} (gap)" for r in realities]],
                      echo=False)
        for name, r in result[key].items():
            sim = r["pure_sim"]["success"]
            own = r["training_sim"]["success"]
            cells = []
            for reality in realities:
                got = r.get(reality, {})
                cells.append(got["error"][:80] if "error" in got else
                             f"{round(got['success'] * n)}/{n} ({100 * (own - got['success']):.0f} points)")
            table.add(name, r["run_dir"], f"{round(sim * n)}/{n}", f"{round(own * n)}/{n}", *cells)
        out.append(table)
    return out


if __name__ == "__main__":
    main()
