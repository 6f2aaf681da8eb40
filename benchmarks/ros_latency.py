"""ROS 2 path benchmark: command -> safety -> impedance controller -> MuJoCo hardware -> state round trip at 100 Hz,
actor period jitter on the ROS 2 env at 20 Hz, and the scripted expert's PickCube success through ROS 2 vs pure sim.

    MUJOCO_GL=egl .venv/bin/python benchmarks/ros_latency.py [--graph stack|separate] [--rt-priority 50]
        [--physics-dt 0.002] [--seconds 20] [--steps 400] [--episodes 20] [--round-trip-only | --floor-only]
        [--run-dir RUN [--checkpoint-episodes N]]  (also a trained PickCube run's policy: ROS 2 vs pure sim on
                                                    the same object placements)  [--out RESULT.json]

``--graph stack`` (default): hardware, controller and safety filter composed in one process (``arm_stack``, the
controller evaluated in the 1 kHz physics loop as ros2_control does); ``separate``: each in its own process. The
benchmark is a process of its own either way (Fast DDS, localhost discovery, a private ROS_DOMAIN_ID). Round trip:
the benchmark publishes a target pose stamped t0 on ``policy/target_pose`` (at 100 Hz, each at a random 0-2 ms
phase); the safety filter passes it on with the same stamp, the controller computes efforts for it (separate: at
once, published stamped t0; stack: at the next control step), the hardware applies them at its next physics step
and, after the joint state of that step, publishes ``applied_command`` stamped t0; the round trip is its arrival
time minus t0 (so it includes up to one physics period of waiting for the next step). In the same run, 5 ms after
each command, a ping to the echo node (``robot_rl.ros.echo``, a process of its own) measures the DDS floor: the
same message type over the same two hops with nothing in between; the output quotes the arm path over that floor
(this VM's scheduling moves both from run to run).
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

from robot_rl.utils.process import set_realtime  # noqa: E402
from tests.ros.conftest import wait_ready  # noqa: E402
from tests.ros.experts import run_episode  # noqa: E402
from tests.ros.graph import Graph, ros_env  # noqa: E402


def percentiles(x: np.ndarray) -> dict[str, float]:
    return {"p50_ms": float(np.percentile(x, 50) * 1e3), "p99_ms": float(np.percentile(x, 99) * 1e3),
            "max_ms": float(x.max() * 1e3), "n": int(x.size)}


def beside_floor(trips: list[float], attempts: int, sent_pings: list[float], pongs: list) -> dict:
    """A path's round trips (s) summarised beside the DDS floor of the same run: the echo node's answers
    (``pongs``: stream items of (ping stamp, arrival)) to the pings sent at ``sent_pings``."""
    answered = {round(s, 6): a for _, (s, a) in pongs}
    floor = [answered[round(t, 6)] - t for t in sent_pings if round(t, 6) in answered]
    path, dds = percentiles(np.array(trips)), percentiles(np.array(floor))
    return {**path, "answered": f"{len(trips)}/{attempts}", "dds_floor": dds,
            "over_floor_p50_ms": path["p50_ms"] - dds["p50_ms"]}


def round_trip(seconds: float, rate: float = 100.0, arm: bool = True) -> dict:
    """The arm path's round trip, and beside it in the same run (5 ms after each command) the DDS floor: a
    PoseStamped to the echo node (``robot_rl.ros.echo``) and its answer, two Fast DDS hops and nothing else.
    ``arm=False``: the floor alone (no arm graph running)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import Header

    from robot_rl.ros.echo import PING, PONG
    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import diagnostics_by_node, from_stamp, pose_arrays, pose_stamped

    paths = {"applied": "applied_command", "pong": PONG} if arm else {"pong": PONG}
    link = RosLink("latency_bench")
    try:
        # Arrival is stamped on a receive thread of its own (no executor latency: it would be measured, not the path).
        for name, topic in paths.items():
            link.subscribe(name, Header, topic, lambda m: (from_stamp(m.stamp), time.time()),
                           stamped=False, depth=100000, fast=True)
        ping = link.publisher("ping", PoseStamped, PING)
        home, quat = np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
        if arm:
            link.subscribe("pose", PoseStamped, "ee_pose", lambda m: pose_arrays(m.pose))
            link.subscribe("diag", DiagnosticArray, "/diagnostics",
                           diagnostics_by_node,
                           stamped=False, depth=1000)
            assert not link.wait_for(["pose"], 30.0)
            pub = link.publisher("target", PoseStamped, "policy/target_pose")
            assert not link.wait_subscribed(["target"], 30.0)
            home, quat = link.streams["pose"].latest()[1]
            link.node.destroy_subscription(link.subscriptions.pop("pose"))  # not needed while measuring
        assert not link.wait_subscribed(["ping"], 30.0) and not link.wait_matched(list(paths), 30.0)
        time.sleep(0.5)  # matched endpoints still lose the first messages for a while (seen with the echo test)
        sent: dict[str, list[float]] = {name: [] for name in paths}
        tick = time.monotonic()
        rng = np.random.default_rng(0)
        for k in range(int(seconds * rate)):
            # A random phase (0-2 ms) per command: the physics loop's period divides 10 ms, so commands sent on
            # the tick would meet it at one fixed phase for the whole run and report that phase's wait only.
            time.sleep(rng.uniform(0.0, 0.002))
            if arm:
                t0 = time.time()
                offset = 0.002 * np.array([np.sin(k / 10), np.cos(k / 10), 0.0])  # small moves: no limit acts
                pub.publish(pose_stamped(home + offset, quat, t0))
                sent["applied"].append(t0)
            time.sleep(max(0.0, tick + 0.5 / rate + rng.uniform(0.0, 0.002) - time.monotonic()))
            t1 = time.time()
            ping.publish(pose_stamped(home, quat, t1))
            sent["pong"].append(t1)
            tick += 1.0 / rate
            time.sleep(max(0.0, tick - time.monotonic()))
        time.sleep(0.5)
        rtt = {}
        for name, times in sent.items():
            first: dict[float, float] = {}
            for _, (stamp, arrival) in list(link.streams[name].items):
                first.setdefault(round(stamp, 6), arrival)
            rtt[name] = np.array([first[round(t, 6)] - t for t in times if round(t, 6) in first])
        floor = {**percentiles(rtt["pong"]), "answered": f"{rtt['pong'].size}/{len(sent['pong'])}"}
        if not arm:
            return {"dds_floor": floor}
        hw = [v["arm_hardware"] for _, v in list(link.streams["diag"].items) if "arm_hardware" in v]
        rates = np.array([float(h["effort_rate_hz"]) for h in hw[1:]]) if len(hw) > 1 else np.zeros(1)
        path = percentiles(rtt["applied"])
        return {**path, "answered": f"{rtt['applied'].size}/{len(sent['applied'])}", "dds_floor": floor,
                "over_floor_p50_ms": path["p50_ms"] - floor["p50_ms"],
                "over_floor_p99_ms": path["p99_ms"] - floor["p99_ms"],
                "controller_rate_hz_median": float(np.median(rates)), "controller_rate_hz_min": float(rates.min())}
    finally:
        link.close()


def actor_jitter(steps: int) -> dict:
    """The ROS 2 env stepped at 20 Hz with a 256x256 MLP policy's inference in the loop (as an actor does)."""
    import torch

    from robot_rl.envs.ros_env import RosArmEnv

    torch.set_num_threads(1)
    policy = torch.nn.Sequential(torch.nn.Linear(14, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                 torch.nn.ReLU(), torch.nn.Linear(256, 4), torch.nn.Tanh())
    env = RosArmEnv(max_episode_steps=10**9)
    try:
        obs, _ = env.reset()
        start = len(env.publish_times)
        for _ in range(steps):
            with torch.no_grad():
                a = policy(torch.as_tensor(obs["state"])[None])[0].numpy() * 0.3
            obs, *_ = env.step(a)
        periods = np.diff(env.publish_times[start:])
        jitter = np.abs(periods - env.period)
        return {"period_mean_ms": float(periods.mean() * 1e3), "jitter_p50_ms": float(np.percentile(jitter, 50) * 1e3),
                "jitter_p99_ms": float(np.percentile(jitter, 99) * 1e3), "jitter_max_ms": float(jitter.max() * 1e3),
                "overruns": env.overruns, "steps": steps}
    finally:
        env.close()


def expert_success(episodes: int) -> dict:
    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl_sim.arm_tasks import PickCubeEnv

    sim = PickCubeEnv()
    sim_ok = [run_episode(sim, s)[0] for s in range(episodes)]
    env = RosArmEnv()
    try:
        ros = [run_episode(env, s) for s in range(episodes)]
    finally:
        env.close()
    return {"pure_sim": float(np.mean(sim_ok)), "ros2": float(np.mean([ok for ok, _ in ros])),
            "ros2_mean_steps": float(np.mean([n for _, n in ros])), "episodes": episodes}


def hardware_placements(episodes: int, seed: int = 0) -> list[np.ndarray]:
    """The cube poses the PickCube hardware node (parameter ``seed``) gives its first ``episodes`` resets."""
    from robot_rl_sim.arm_tasks import PickCubeEnv

    hw = PickCubeEnv(image_size=0)
    hw.reset(seed=seed)  # as the node does once at start; every reset service call then re-places the objects
    out = []
    for _ in range(episodes):
        hw._reset_objects(hw.np_random)
        out.append(hw.data.qpos[hw.cube_q].copy())
    return out


def policy_successes(run_dir: str, episodes: int, env: object | None = None,
                     sim_kwargs: dict | None = None, policy_file: str | Path | None = None) -> np.ndarray:
    """A trained PickCube run's latest policy (or ``policy_file``, e.g. one a checkpoint kept), deterministic, per
    episode success: on ``env`` (a robot env), or with ``env=None`` in pure sim on the PickCube hardware's first
    ``episodes`` placements, replayed (the sim task made with ``sim_kwargs``: when None, the nominal sim observed as
    the run's was: its env kwargs less the randomization)."""
    from robot_rl.agents.sac import SACAgent
    from robot_rl.config import load_yaml
    from robot_rl.envs.make import EnvConfig, make_env
    from robot_rl.runtime.checkpoint import latest_checkpoint
    from robot_rl.spaces import ObsSpec, action_dim_of
    from robot_rl.training.config import TrainConfig
    from robot_rl.training.evaluation import rollout

    cfg = load_yaml(TrainConfig, Path(run_dir) / "config.yaml")
    if sim_kwargs is None:  # the nominal sim, observed as the run was (its cameras, no object state, ...)
        sim_kwargs = {k: v for k, v in cfg.env.kwargs.items() if k != "randomization"}
    sim = make_env(EnvConfig(id="robot_rl/PickCube-v0", kwargs=dict(sim_kwargs)))
    agent = SACAgent(ObsSpec.from_space(sim.observation_space), action_dim_of(sim.action_space), cfg.agent)
    agent.load_policy(policy_file or latest_checkpoint(run_dir) / "policy.safetensors")
    if env is None:
        placements = iter(hardware_placements(episodes))
        task = sim.unwrapped
        task._reset_objects = lambda rng: task.data.qpos.__setitem__(task.cube_q, next(placements))
        env = sim
    return rollout(agent, env, episodes)["successes"]


def checkpoint_success(run_dir: str, episodes: int) -> dict:
    """A trained run's latest policy (deterministic) through the ROS 2 path and in pure sim on the same object
    placements (the hardware's, replayed into the sim env)."""
    from robot_rl.envs.ros_env import RosArmEnv

    sim_ok = policy_successes(run_dir, episodes)
    env = RosArmEnv()
    try:
        ros_ok = policy_successes(run_dir, episodes, env)
    finally:
        env.close()
    return {"run": str(run_dir), "pure_sim": float(sim_ok.mean()), "ros2": float(ros_ok.mean()),
            "episodes": episodes, "failed_pure_sim": np.flatnonzero(sim_ok < 1).tolist(),
            "failed_ros2": np.flatnonzero(ros_ok < 1).tolist()}


def tables(result: dict) -> list[Table]:
    """The result's tables: the round trip beside its DDS floor, then the rest of the run (controller rate, actor
    jitter, success through ROS 2 against pure sim)."""
    setup = result["setup"]
    prio = f"SCHED_FIFO {setup['rt_priority']}" if setup["rt_priority"] else "normal scheduling"
    rt = result["round_trip_100hz"]
    trip = Table(f"Round trip at 100 Hz, graph {setup['graph']}, physics_dt {setup['physics_dt']}, {prio}",
                 ["path", "p50 ms", "p99 ms", "max ms", "answered"], echo=False)
    if "p50_ms" in rt:
        trip.add("arm path: target pose -> applied_command echo", f"{rt['p50_ms']:.2f}", f"{rt['p99_ms']:.2f}",
                 f"{rt['max_ms']:.1f}", rt["answered"])
    floor = rt["dds_floor"]
    trip.add("DDS floor: echo node, same run", f"{floor['p50_ms']:.2f}", f"{floor['p99_ms']:.2f}",
             f"{floor['max_ms']:.1f}", floor["answered"])
    if "p50_ms" in rt:
        trip.add("arm path over the floor", f"{rt['over_floor_p50_ms']:.2f}", f"{rt['over_floor_p99_ms']:.2f}", "-",
                 "-")
    rest = Table(f"The rest of the run, graph {setup['graph']}, {prio}", ["quantity", "figure"], echo=False)
    if "controller_rate_hz_median" in rt:
        rest.add("controller rate at the hardware", f"median {rt['controller_rate_hz_median']:.0f} Hz, "
                 f"min {rt['controller_rate_hz_min']:.0f} Hz")
    if "actor_jitter_20hz" in result:
        j = result["actor_jitter_20hz"]
        rest.add(f"actor period on the ROS 2 env at 20 Hz, |period - 50 ms| ({j['steps']} steps)",
                 f"p50 {j['jitter_p50_ms']:.2f} ms, p99 {j['jitter_p99_ms']:.1f} ms, max {j['jitter_max_ms']:.1f} ms; "
                 f"{j['overruns']} overruns")
    for key, label in (("expert_pickcube", "scripted PickCube expert"),
                       ("checkpoint_pickcube", "trained policy (--run-dir), deterministic, same placements")):
        if key in result:
            r, n = result[key], result[key]["episodes"]
            rest.add(f"{label}, {n} episodes",
                     f"ROS 2 {round(r['ros2'] * n)}/{n}, pure sim {round(r['pure_sim'] * n)}/{n}")
    return [trip] + ([rest] if rest.rows else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="round-trip measurement at 100 Hz")
    parser.add_argument("--steps", type=int, default=400, help="20 Hz env steps for the jitter measurement")
    parser.add_argument("--episodes", type=int, default=20, help="expert episodes (each of pure sim and ROS 2)")
    parser.add_argument("--domain", type=int, default=201)
    parser.add_argument("--run-dir", default=None, help="also compare this PickCube run's policy: sim vs ROS 2")
    parser.add_argument("--checkpoint-episodes", type=int, default=0,
                        help="episodes for --run-dir on each side (0 = --episodes); the same placements on both")
    parser.add_argument("--graph", choices=("separate", "stack"), default="stack",
                        help="stack: hardware + controller + safety composed in one process (arm_stack); separate: "
                             "each in its own process")
    parser.add_argument("--physics-dt", type=float, default=0.0,
                        help="hardware physics/control period (s); 0 = the node's default (stack 1 ms, separate 2 ms)")
    parser.add_argument("--rt-priority", type=int, default=0,
                        help="SCHED_FIFO priority for the nodes and this process (the actor side); 0 = normal")
    parser.add_argument("--round-trip-only", action="store_true", help="skip the jitter and success measurements")
    parser.add_argument("--floor-only", action="store_true",
                        help="the DDS floor alone: the echo node's round trip, no arm graph (e.g. to compare Fast DDS "
                             "settings: FASTDDS_BUILTIN_TRANSPORTS, RMW_FASTRTPS_PUBLICATION_MODE)")
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/ros_latency.json)")
    args = parser.parse_args()
    os.environ.update(ros_env(args.domain))
    if args.rt_priority:
        set_realtime(args.rt_priority, "--rt-priority")  # before rclpy: its threads inherit it
    graph = Graph(args.domain, Path(tempfile.mkdtemp(prefix="ros_bench_")))
    node_args = ("--rt-priority", str(args.rt_priority)) if args.rt_priority else ()
    params = ("-p", f"physics_dt:={args.physics_dt}") if args.physics_dt else ()
    if args.graph == "stack" and not args.floor_only:
        graph.start("arm_stack", *params, args=node_args)
    elif not args.floor_only:
        graph.start("arm_hardware", *params, args=node_args)
        graph.start("arm_controller", args=node_args)
        graph.start("arm_safety", args=node_args)
    graph.start("dds_echo", args=node_args)
    try:
        if args.floor_only:
            result = {"round_trip_100hz": round_trip(args.seconds, arm=False)}
        else:
            wait_ready(graph, "arm_hardware", "arm_safety")
            result = {"round_trip_100hz": round_trip(args.seconds)}
        if not (args.round_trip_only or args.floor_only):
            result |= {"actor_jitter_20hz": actor_jitter(args.steps), "expert_pickcube": expert_success(args.episodes)}
        if args.run_dir:
            result["checkpoint_pickcube"] = checkpoint_success(args.run_dir,
                                                                args.checkpoint_episodes or args.episodes)
    finally:
        graph.stop()
    result["setup"] = {"graph": "none (--floor-only)" if args.floor_only else args.graph,
                       "physics_dt": args.physics_dt or "default", "rt_priority": args.rt_priority}
    print(json.dumps(result, indent=2))
    print(f"results: {write_result('ros_latency', result, args.out, tables=tables(result))}")


if __name__ == "__main__":
    main()
