"""Car profiles against robot_rl's emulation of each driver: a Drive policy trained in pure sim (``--run-dir``, its
latest checkpoint, deterministic, acting on the state) and the task's pure-pursuit driver (steering on the car's pose
on the track map) lap the track from the same start poses in pure sim and through each car profile; and each
profile's command -> driver -> odometry round trip beside the DDS floor measured in the same run.

    MUJOCO_GL=egl .venv/bin/python benchmarks/car_profiles.py [--run-dir runs/drive_s0] [--episodes 20]
        [--profiles diff_drive ackermann] [--round-trip-trials 40] [--out RESULT.json]

Each profile runs as it would against a real driver: the emulated driver (``car_hardware`` with the profile) and the
car safety node in processes of their own, the env in this process reading odometry, TF and the lidar scan. The
hardware's ``~/reset`` draws the start poses from its seed as the sim's ``reset()`` does, so pure sim replays them.
Round trip: from rest, a twist (0.3 m/s forward or back) is published to the safety node (``policy/cmd_vel``); it ends
at the first odometry message whose forward speed exceeds 1 cm/s that way: the safety filter, the interface's
conversion (stamped twist, Ackermann steering), the emulated driver's wheel servos and the first physics steps, two
DDS hops each way. Beside it, in the same run, the echo node's round trip (two Fast DDS hops, nothing else).
"""

from __future__ import annotations

import argparse
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
from ros_latency import beside_floor  # noqa: E402

from tests.ros.graph import Graph, ros_env  # noqa: E402

PROFILES = ("diff_drive", "ackermann")
SEED = 0


def load_policy(run_dir: str, which: str = "latest"):  # noqa: ANN201
    """A trained Drive run's ``which`` policy (``latest`` or ``best``: robot_rl.utils.run_dir.policy_file), and the
    Drive task's kwargs it was trained with (its pure sim)."""
    from robot_rl.agents.sac import SACAgent
    from robot_rl.config import load_yaml
    from robot_rl.envs.make import EnvConfig, make_env
    from robot_rl.spaces import ObsSpec, action_dim_of
    from robot_rl.training.config import TrainConfig
    from robot_rl.utils.run_dir import policy_file

    cfg = load_yaml(TrainConfig, Path(run_dir) / "config.yaml")
    sim = make_env(EnvConfig(id="robot_rl/Drive-v0", kwargs=cfg.env.kwargs))
    agent = SACAgent(ObsSpec.from_space(sim.observation_space), action_dim_of(sim.action_space), cfg.agent)
    agent.load_policy(policy_file(run_dir, which))
    sim.close()
    return agent, dict(cfg.env.kwargs)


def laps_in_sim(episodes: int, agent=None, kwargs: dict | None = None) -> dict:  # noqa: ANN001
    """The policy (``agent``) or the pure-pursuit driver in pure sim (the Drive task with ``kwargs``) from the
    hardware's start poses (its seed, then one draw per reset)."""
    import mujoco

    from robot_rl_sim.car import DriveEnv

    env = DriveEnv(image_size=0, **(kwargs or {}))
    env.reset(seed=SEED)  # the hardware node's own start (before its first ~/reset)
    starts, steps, ok = [], [], []
    for _ in range(episodes):
        env._reset_task(env.np_random)  # what the hardware's ~/reset does: the next start from its seed
        mujoco.mj_forward(env.model, env.data)
        env.steps = 0
        starts.append(env.car_pose()[0].tolist())
        info: dict = {}
        obs = env._obs()
        for _ in range(env.cfg.max_episode_steps):
            action = env.expert_action() if agent is None else agent.act(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        ok.append(bool(info.get("is_success")))
        steps.append(env.steps)
    env.close()
    return _laps(ok, steps, starts)


def laps_through(profile: str, episodes: int, agent=None) -> dict:  # noqa: ANN001
    """The policy (``agent``) or the pure-pursuit driver through the profile, from the hardware's next starts."""
    from robot_rl.envs.ros_car_env import RosCarEnv
    from tests.ros.test_car_profiles import drive_lap

    env = RosCarEnv(profile=profile, reset_service="car_hardware/reset", connect_timeout=60.0)
    starts, steps, ok = [], [], []
    try:
        for _ in range(episodes):
            obs, info = env.reset()
            starts.append(env.pose()[0].tolist())
            if agent is None:
                info = drive_lap(env)
            else:
                for _ in range(env.cfg.max_episode_steps):
                    obs, _, terminated, truncated, info = env.step(agent.act(obs, deterministic=True))
                    if terminated or truncated:
                        break
            ok.append(bool(info.get("is_success")))
            steps.append(env.steps)
        overruns = env.overruns
    finally:
        env.close()
    return {**_laps(ok, steps, starts), "overruns": overruns}


def _laps(ok: list[bool], steps: list[int], starts: list) -> dict:
    done = [s for s, o in zip(steps, ok) if o]
    return {"success": float(np.mean(ok)), "episodes": len(ok), "failed": [i for i, o in enumerate(ok) if not o],
            "lap_s": float(np.mean(done)) / 20.0 if done else float("nan"), "starts": starts}


def round_trip(profile_name: str, trials: int) -> dict:
    """See the module docstring."""
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from std_msgs.msg import Header

    from robot_rl.robots.profile import load_profile
    from robot_rl.ros.echo import PING, PONG
    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import from_stamp, pose_stamped

    profile = load_profile(profile_name)
    link = RosLink("car_round_trip")
    try:
        link.subscribe("odom", Odometry, profile.odom.topic, lambda m: (time.time(), m.twist.twist.linear.x),
                       depth=20000, fast=True)
        link.subscribe("pong", Header, PONG, lambda m: (from_stamp(m.stamp), time.time()), stamped=False,
                       depth=10000, fast=True)
        ping = link.publisher("ping", PoseStamped, PING)
        pub = link.publisher("cmd", Twist, "policy/cmd_vel")
        assert not link.wait_for(["odom"], 60.0) and not link.wait_subscribed(["cmd", "ping"], 30.0)
        trips, sent_pings = [], []
        rng = np.random.default_rng(0)
        for k in range(trials):
            direction = 1.0 if k % 2 == 0 else -1.0  # forth and back: the car stays near its start
            end = time.monotonic() + 3.0
            while abs(link.streams["odom"].latest()[1][1]) > 0.005 and time.monotonic() < end:
                time.sleep(0.01)
            time.sleep(0.2 + rng.uniform(0.0, 0.002))
            cmd = Twist()
            cmd.linear.x = 0.3 * direction
            t0 = time.time()
            pub.publish(cmd)
            t_ping = time.time()
            ping.publish(pose_stamped(np.zeros(3), np.array([1.0, 0, 0, 0]), t_ping))
            sent_pings.append(t_ping)
            got = None
            for _ in range(6):  # keep commanding for 0.3 s (the watchdog stops the car without commands)
                deadline = time.monotonic() + 0.05
                while time.monotonic() < deadline:
                    if got is None:
                        got = next((a - t0 for _, (a, v) in list(link.streams["odom"].items)
                                    if a > t0 and v * direction > 0.01), None)
                    time.sleep(0.0005)
                pub.publish(cmd)
            pub.publish(Twist())
            if got is not None:
                trips.append(got)
        return beside_floor(trips, trials, sent_pings, list(link.streams["pong"].items))
    finally:
        link.close()


def tables(result: dict) -> list[Table]:
    n = result["setup"]["episodes"]
    out = []
    kwargs = result["setup"].get("task_kwargs") or {}
    trained = ", ".join([str(result["setup"]["run_dir"])] + [f"{k} {v}" for k, v in kwargs.items()])
    for driver, title in (("policy", f"Drive policy trained in pure sim ({trained}), deterministic, on the state"),
                          ("expert", "Pure-pursuit driver on the map pose")):
        if driver not in result["pure_sim"]:
            continue
        sim = result["pure_sim"][driver]
        laps = Table(f"{title}: the same {n} start poses (seed {SEED}), one lap to succeed",
                     ["path", "command interface", "laps", "vs pure sim", "mean lap s", "start pose max diff m"],
                     echo=False)
        laps.add("pure sim", "-", f"{round(sim['success'] * n)}/{n}", "-", f"{sim['lap_s']:.2f}", "-")
        for name, r in result["profiles"].items():
            p = r[driver]
            diff = float(np.max(np.abs(np.array(p["starts"]) - np.array(sim["starts"][:len(p["starts"])]))))
            laps.add(name, r["interface"], f"{round(p['success'] * n)}/{n}",
                     f"{100 * (p['success'] - sim['success']):+.0f} points", f"{p['lap_s']:.2f}", f"{diff:.3f}")
        out.append(laps)
    trip = Table("Command -> driver -> odometry (from rest, 0.3 m/s, first 1 cm/s) beside the DDS floor of the same "
                 "run", ["profile", "p50 ms", "p99 ms", "answered", "DDS floor p50 / p99 ms",
                         "over the floor p50 ms"], echo=False)
    for name, r in result["profiles"].items():
        t = r["round_trip"]
        trip.add(name, f"{t['p50_ms']:.1f}", f"{t['p99_ms']:.1f}", t["answered"],
                 f"{t['dds_floor']['p50_ms']:.2f} / {t['dds_floor']['p99_ms']:.2f}", f"{t['over_floor_p50_ms']:.1f}")
    return [*out, trip]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", default=None, help="a Drive (state) run trained in pure sim")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    parser.add_argument("--round-trip-trials", type=int, default=40)
    parser.add_argument("--domain", type=int, default=204)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.update(ros_env(args.domain))
    tmp = Path(tempfile.mkdtemp(prefix="car_profiles_bench_"))
    agent, kwargs = load_policy(args.run_dir) if args.run_dir else (None, {})
    drivers = {"policy": agent} if agent is not None else {}
    drivers["expert"] = None
    result: dict = {"pure_sim": {d: laps_in_sim(args.episodes, a, kwargs) for d, a in drivers.items()},
                    "profiles": {}}
    from robot_rl.robots.profile import load_profile

    for name in args.profiles:
        profile = f"rehearsal/{name}"
        entry = {"interface": load_profile(profile).command.interface}
        for driver, a in drivers.items():  # each from the hardware's first starts: a fresh graph from its seed
            graph = Graph(args.domain, tmp)
            graph.start("car_hardware", "-p", f"profile:={profile}", "-p", f"seed:={SEED}")
            graph.start("car_safety", "-p", f"profile:={profile}")
            graph.start("dds_echo")
            try:
                entry[driver] = laps_through(profile, args.episodes, a)
                if driver == "expert":
                    entry["round_trip"] = round_trip(profile, args.round_trip_trials)
            finally:
                graph.stop()
        result["profiles"][name] = entry
        print(name, {d: {k: v for k, v in entry[d].items() if k != "starts"} for d in drivers}, entry["round_trip"])
    result["setup"] = {"episodes": args.episodes, "profiles": args.profiles, "seed": SEED, "run_dir": args.run_dir,
                       "task_kwargs": kwargs,
                       "expert": "robot_rl.robots.track.pure_pursuit on the map pose"}
    print(f"results: {write_result('car_profiles', result, args.out, tables=tables(result))}")


if __name__ == "__main__":
    main()
