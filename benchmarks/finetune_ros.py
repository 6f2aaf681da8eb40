"""A fine-tuned run (an agent on a base policy, e.g. a residual on the small VLA) through the ROS 2 sim hardware
path against pure sim, on the same object placements: what the policy learned in sim holds on the robot path.

    MUJOCO_GL=egl python benchmarks/finetune_ros.py --run-dir RUN [--episodes 50] [--graph separate|stack]

RUN: a finished PickCube training run whose env has cameras (the base reads them) and the object state (the
hardware node publishes the cube pose). Its latest checkpoint acts, composed with its base policy exactly as the
run's evaluation composes them (chunks executed synchronously), on ``RosArmEnv`` (camera topics at the run's
image size, impedance controller, safety node, separate processes or the composed stack) and on the sim env with
the hardware's object placements replayed into it. The base alone is scored the same way on both sides.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from common import Table, write_result  # noqa: E402
from ros_latency import hardware_placements  # noqa: E402

from tests.ros.conftest import wait_ready  # noqa: E402
from tests.ros.graph import Graph, ros_env  # noqa: E402

ROS_ENV_ID = "robot_rl.envs.ros_env:robot_rl/RosArm-v0"


def actors(cfg, run_dir: str, env):  # noqa: ANN001, ANN201 - (fine-tuned, base alone) acting on ``env``
    import dataclasses

    from robot_rl.policies.evaluate import ExecutorAgent
    from robot_rl.policies.loader import load_policy
    from robot_rl.vla.distill import specialist

    base = ExecutorAgent(load_policy(cfg.base_policy), dataclasses.replace(cfg.execution, mode="sync"), env)
    return specialist(run_dir, env), base


def score(cfg, run_dir: str, env, episodes: int) -> dict[str, np.ndarray]:  # noqa: ANN001
    from robot_rl.training.evaluation import rollout

    tuned, base = actors(cfg, run_dir, env)
    try:
        return {"fine-tuned": rollout(tuned, env, episodes)["successes"],
                "base": rollout(base, env, episodes)["successes"]}
    finally:
        tuned.close()
        base.close()


def sim_env(cfg, placements: list[np.ndarray]):  # noqa: ANN001, ANN201
    """The run's sim env, with the cube placed where the hardware node places it, episode by episode."""
    from robot_rl.envs.make import make_env

    env = make_env(cfg.env)
    task = env.unwrapped
    queue = iter(placements)  # in the hardware's order: the fine-tuned policy's episodes, then the base's
    task._reset_objects = lambda rng: task.data.qpos.__setitem__(task.cube_q, next(queue))
    return env


def ros_arm_env(cfg, instruction: str):  # noqa: ANN001, ANN201
    """RosArmEnv with the run's cameras and image size, and the sim task's instruction as a fixed one (the robot
    reports none)."""
    import dataclasses

    from robot_rl.envs.make import make_env

    kwargs = cfg.env.kwargs
    env_cfg = dataclasses.replace(cfg.env, id=ROS_ENV_ID, instruction=cfg.env.instruction or instruction,
                                  kwargs={"cameras": list(kwargs.get("cameras", [])),
                                          "image_size": int(kwargs.get("image_size", 0)),
                                          "object_state": bool(kwargs.get("object_state", True))})
    return make_env(env_cfg)


def main() -> None:
    from robot_rl.config import load_yaml
    from robot_rl.training.config import TrainConfig

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", required=True, help="a finished PickCube fine-tuning run")
    parser.add_argument("--episodes", type=int, default=50, help="episodes per policy on each side")
    parser.add_argument("--graph", choices=("separate", "stack"), default="separate")
    parser.add_argument("--domain", type=int, default=207)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    cfg = load_yaml(TrainConfig, Path(args.run_dir) / "config.yaml")
    if "PickCube" not in cfg.env.id:
        raise SystemExit(f"{args.run_dir}: a PickCube run is needed (the ROS 2 arm hardware simulates PickCube), "
                         f"got {cfg.env.id}")
    placements = hardware_placements(2 * args.episodes)
    sim = sim_env(cfg, placements)
    try:
        pure = score(cfg, args.run_dir, sim, args.episodes)
        instruction = sim.unwrapped.instruction()
    finally:
        sim.close()
    os.environ.update(ros_env(args.domain))
    graph = Graph(args.domain, Path(tempfile.mkdtemp(prefix="finetune_ros_")))
    image = ("-p", f"image_size:={int(cfg.env.kwargs.get('image_size', 0))}")
    if args.graph == "stack":
        graph.start("arm_stack", *image)
    else:
        graph.start("arm_hardware", *image)
        graph.start("arm_controller")
        graph.start("arm_safety")
    try:
        wait_ready(graph, "arm_hardware", "arm_safety")
        env = ros_arm_env(cfg, instruction)
        try:
            ros = score(cfg, args.run_dir, env, args.episodes)
        finally:
            env.close()
    finally:
        graph.stop()
    figures = {"run": args.run_dir, "episodes": args.episodes, "graph": args.graph,
               "policies": {name: {"pure_sim": float(pure[name].mean()), "ros2": float(ros[name].mean()),
                                   "failed_pure_sim": np.flatnonzero(pure[name] < 1).tolist(),
                                   "failed_ros2": np.flatnonzero(ros[name] < 1).tolist()} for name in pure}}
    table = Table(f"PickCube through ROS 2 ({args.graph}) against pure sim, the same {args.episodes} placements",
                  ["policy", "pure sim", "ROS 2", "difference (points)"])
    for name, row in figures["policies"].items():
        table.add(name, f"{row['pure_sim']:.2f}", f"{row['ros2']:.2f}", f"{100 * (row['ros2'] - row['pure_sim']):+.0f}")
    print(f"results: {write_result('finetune_ros', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
