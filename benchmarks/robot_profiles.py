"""Robot profiles against robot_rl's emulation of each driver: the PickCube policy trained in pure sim through every
arm profile on the same object placements as pure sim, and each profile's command -> driver -> observed-state round
trip beside the DDS floor measured in the same run.

    MUJOCO_GL=egl .venv/bin/python benchmarks/robot_profiles.py --run-dir runs/pc_state_s0 [--episodes 50]
        [--profiles ros2_control_joint_position joint_trajectory franka_fr3_cartesian ur5e_servo]
        [--round-trip-seconds 30] [--out RESULT.json]

Each profile runs as it would against a real driver: the emulated driver (``arm_driver``) and the safety node
(``arm_safety``) in processes of their own, the env in this process reading joint states, TF and the URDF. Round
trip: from a resting arm, a target pose 1 cm away is published to the safety node (``policy/target_pose``); the
round trip ends when the first joint state arrives whose tool position (forward kinematics of the URDF) has moved
0.1 mm towards it: the safety filter, the interface's conversion (IK, twist, pose), the driver's controller and the
first physics steps of the motion, two DDS hops each way. Beside it, in the same run, the echo node's round trip
(two Fast DDS hops, nothing else) is the floor. ``joint_trajectory`` is the generic profile driving a joint
trajectory controller.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from common import Table, write_result  # noqa: E402
from ros_latency import beside_floor, policy_successes  # noqa: E402

from tests.ros.graph import ros_env  # noqa: E402
from tests.ros.test_profiles import ARM_PROFILES, profile_file, running_profile  # noqa: E402


def round_trip(profile_path: str, seconds: float) -> dict:
    """See the module docstring."""
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Header

    from robot_rl.robots.profile import load_profile
    from robot_rl.ros.echo import PING, PONG
    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import from_stamp, pose_stamped
    from robot_rl.ros.robot_state import JointReader, RobotDescription

    profile = load_profile(profile_path)
    link = RosLink("profile_round_trip")
    try:
        kin = RobotDescription(link.node, profile.robot_description).kinematics(
            profile.joint_states.names, profile.base_frame, profile.tool_frame, 30.0)
        reader = JointReader(profile.joint_states.names)
        link.subscribe("joints", JointState, profile.joint_states.topic,
                       lambda m: None if (j := reader(m)) is None else (time.time(), kin.forward(j[0])[0]),
                       depth=20000, fast=True)
        link.subscribe("pong", Header, PONG, lambda m: (from_stamp(m.stamp), time.time()), stamped=False,
                       depth=10000, fast=True)
        ping = link.publisher("ping", PoseStamped, PING)
        pub = link.publisher("target", PoseStamped, "policy/target_pose")
        assert not link.wait_for(["joints"], 30.0) and not link.wait_subscribed(["target", "ping"], 30.0)
        time.sleep(0.5)
        start = link.streams["joints"].latest()[1][1]
        quat = np.asarray(profile.limits.home_quat, np.float64)
        points = [start, start + np.array([0.0, 0.01, 0.0])]
        trips, sent_pings = [], []
        rng = np.random.default_rng(0)
        deadline = time.monotonic() + seconds
        k = 0
        while time.monotonic() < deadline:
            goal = points[(k + 1) % 2]
            for _ in range(8):  # hold the current point (the watchdog would stop the arm without commands)
                pub.publish(pose_stamped(points[k % 2], quat, time.time()))
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.002))
            before = link.streams["joints"].latest()[1][1]
            t0 = time.time()
            pub.publish(pose_stamped(goal, quat, t0))
            direction = (goal - before) / np.linalg.norm(goal - before)
            t_ping = time.time()
            ping.publish(pose_stamped(goal, quat, t_ping))
            sent_pings.append(t_ping)
            got = None
            end = time.monotonic() + 0.5
            while got is None and time.monotonic() < end:
                for _, (arrival, pos) in list(link.streams["joints"].items):
                    if arrival > t0 and (pos - before) @ direction > 1e-4:
                        got = arrival - t0
                        break
                time.sleep(0.0005)
            if got is not None:
                trips.append(got)
            for _ in range(4):  # keep commanding the goal while the arm settles there
                pub.publish(pose_stamped(goal, quat, time.time()))
                time.sleep(0.05)
            k += 1
        return beside_floor(trips, k, sent_pings, list(link.streams["pong"].items))
    finally:
        link.close()


def policy_success(run_dir: str, profile_path: str | None, episodes: int, obs_timeout: float = 1.0,
                   policy_file: str | Path | None = None, ee_velocity: str = "instant") -> dict:
    """The run's latest policy (or ``policy_file``), deterministic, on the emulated hardware's first ``episodes``
    placements: through the profile (``profile_path``), or in pure sim with those placements replayed (None). The
    robot env reads the EE velocity as ``ee_velocity`` (``trained``: as the run's sim did)."""
    from robot_rl.config import load_yaml
    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl.training.config import TrainConfig

    extra = {}
    if profile_path is None:
        ok = policy_successes(run_dir, episodes, policy_file=policy_file)
    else:
        if ee_velocity == "trained":
            ee_velocity = load_yaml(TrainConfig, Path(run_dir) / "config.yaml").env.kwargs.get("ee_velocity",
                                                                                                "instant")
        env = RosArmEnv(profile=profile_path, reset_service="arm_driver/reset", connect_timeout=60.0,
                        obs_timeout=obs_timeout, ee_velocity=ee_velocity)
        extra["ee_velocity"] = ee_velocity
        try:
            ok = policy_successes(run_dir, episodes, env, policy_file=policy_file)
            extra["overruns"] = env.overruns
        finally:
            env.close()
    return {"success": float(ok.mean()), "episodes": episodes, "failed": np.flatnonzero(ok < 1).tolist(), **extra}


def tables(result: dict) -> list[Table]:
    n = result["setup"]["episodes"]
    sim = result["pure_sim"]  # success NaN with --skip-sim
    success = Table(f"PickCube policy trained in pure sim ({result['setup']['run_dir']}), deterministic, the same "
                    f"{n} placements", ["profile", "command interface", "success", "vs pure sim"], echo=False)
    if np.isfinite(sim["success"]):
        success.add("pure sim", "-", f"{round(sim['success'] * n)}/{n}", "-")
    trip = Table("Command -> driver -> observed state (from rest, 1 cm target, first 0.1 mm of motion) beside the "
                 "DDS floor of the same run", ["profile", "p50 ms", "p99 ms", "answered", "DDS floor p50 / p99 ms",
                                               "over the floor p50 ms"], echo=False)
    for name, r in result["profiles"].items():
        if "policy_error" in r:
            success.add(name, r["interface"], "stopped: " + r["policy_error"][:120], "-")
        if "policy" in r:
            p = r["policy"]
            vs = f"{100 * (p['success'] - sim['success']):+.0f} points" if np.isfinite(sim["success"]) else "-"
            success.add(name, r["interface"], f"{round(p['success'] * n)}/{n}", vs)
        if "round_trip" in r:
            t = r["round_trip"]
            trip.add(name, f"{t['p50_ms']:.1f}", f"{t['p99_ms']:.1f}", t["answered"],
                     f"{t['dds_floor']['p50_ms']:.2f} / {t['dds_floor']['p99_ms']:.2f}",
                     f"{t['over_floor_p50_ms']:.1f}")
    return [success, trip]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", required=True, help="a PickCube (state) run trained in pure sim")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--profiles", nargs="+", default=[p for p in ARM_PROFILES if p != "parallel_gripper"],
                        choices=list(ARM_PROFILES))
    parser.add_argument("--round-trip-seconds", type=float, default=30.0)
    parser.add_argument("--domain", type=int, default=203)
    parser.add_argument("--override", default="{}",
                        help="profile fields changed for every profile, as JSON (e.g. '{\"command\": "
                             "{\"reference_omega\": 0}}')")
    parser.add_argument("--skip-sim", action="store_true", help="no pure-sim baseline")
    parser.add_argument("--driver-params", nargs="*", default=[],
                        help="parameters of the emulated driver, e.g. cartesian_stiffness:=400.0")
    parser.add_argument("--obs-timeout", type=float, default=1.0,
                        help="seconds a step waits for a fresh joint state (RosArmEnvConfig.obs_timeout); a longer "
                             "pause of the emulated driver's state stream ends the profile's policy run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.update(ros_env(args.domain))
    tmp = Path(tempfile.mkdtemp(prefix="profiles_bench_"))
    result: dict = {"pure_sim": {"success": float("nan")} if args.skip_sim else
                    policy_success(args.run_dir, None, args.episodes), "profiles": {}}
    override = json.loads(args.override)
    for name in args.profiles:
        import yaml

        from robot_rl.config import to_dict
        from robot_rl.robots.profile import load_profile, with_overrides

        path = profile_file(name, tmp)
        Path(path).write_text(yaml.safe_dump(to_dict(with_overrides(load_profile(path), override))))
        with running_profile(args.domain, tmp, path, *[a for p in args.driver_params for a in ("-p", p)]) as graph:
            graph.start("dds_echo")
            entry = {"interface": load_profile(path).command.interface}
            entry["round_trip"] = round_trip(path, args.round_trip_seconds)
            try:
                entry["policy"] = policy_success(args.run_dir, path, args.episodes, args.obs_timeout)
            except (TimeoutError, RuntimeError) as exc:  # recorded, and the other profiles still run
                entry["policy_error"] = f"{type(exc).__name__}: {exc}"
        result["profiles"][name] = entry
        print(name, json.dumps(entry))
    result["setup"] = {"run_dir": args.run_dir, "episodes": args.episodes, "profiles": args.profiles,
                       "override": override, "obs_timeout": args.obs_timeout}
    print(f"results: {write_result('robot_profiles', result, args.out, tables=tables(result))}")


if __name__ == "__main__":
    main()
