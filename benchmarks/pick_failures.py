"""Why a pick policy fails: the failed evaluation episodes of fine-tuning runs on PickCube or PickColor, sorted
into what the arm was doing when the episode ended, for the run's policy and for its base alone on the same
episodes (the run's evaluation seeds, as its learner scored it).

    MUJOCO_GL=egl python benchmarks/pick_failures.py --runs runs/X/residual-0 runs/X/residual-1 --episodes 30

Classes of a failed episode: ``wrong cube`` (another cube lifted, PickColor's failure), ``grasp lost`` (the target
was held at some step, not at the end), ``holding, not lifted`` (held at the end), ``closed off the target``
(never held, gripper closed at the end), ``open off the target`` (never held, gripper open at the end: hovering).
For each class: the episodes, and the mean end distance (xy) of the gripper to the target and to the nearest other
cube.
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from typing import Any

import numpy as np
from common import Table, write_result

CLASSES = ("wrong cube", "grasp lost", "holding, not lifted", "closed off the target", "open off the target")


def classify(env: Any, held_ever: bool, terminated: bool) -> str:
    """The class of a failed episode from the env's end state."""
    task = env.unwrapped
    if terminated and hasattr(task, "wrong_cube_lifted") and task.wrong_cube_lifted():
        return "wrong cube"
    if task.grasped():
        return "holding, not lifted"
    if held_ever:
        return "grasp lost"
    return "closed off the target" if task.gripper_opening() < 0.01 else "open off the target"


def distances(env: Any) -> tuple[float, float]:
    """xy distance (cm) of the gripper to the target cube and to the nearest other cube (nan without others)."""
    task = env.unwrapped
    ee = task.data.site_xpos[task.ee_site][:2]
    target = float(np.linalg.norm(task.data.qpos[task.cube_q][:2] - ee)) * 100
    others = [float(np.linalg.norm(task.data.qpos[q][:2] - ee)) * 100
              for i, q in enumerate(getattr(task, "cubes_q", [])) if i != getattr(task, "target", -1)]
    return target, min(others) if others else float("nan")


def failures(actor: Any, env: Any, episodes: int, seed: int) -> tuple[int, dict[str, list[tuple[float, float]]]]:
    """Successes and, per class, the end distances of each failed episode (episode i resets with seed + i)."""
    found: dict[str, list[tuple[float, float]]] = defaultdict(list)
    successes = 0
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        if hasattr(actor, "begin_episode"):
            actor.begin_episode(info)
        done, held, terminated = False, False, False
        while not done:
            obs, _, terminated, truncated, info = env.step(actor.act(obs, deterministic=True))
            held = held or env.unwrapped.grasped()
            done = terminated or truncated
        if info.get("is_success"):
            successes += 1
        else:
            found[classify(env, held, terminated)].append(distances(env))
    return successes, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", required=True, help="fine-tuning run folders (with a checkpoint)")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--no-base", action="store_true", help="skip the base alone")
    parser.add_argument("--out", default=None, help="result file (default: print only)")
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    from robot_rl.policies.config import ExecutionConfig
    from robot_rl.policies.evaluate import ExecutorAgent
    from robot_rl.policies.loader import load_policy
    from robot_rl.training.evaluation import load_run
    from robot_rl.training.seeds import Seeds

    table = Table("Failed evaluation episodes by what the arm was doing at the end",
                  ["run", "policy", "success", *CLASSES])
    figures: dict[str, Any] = {"episodes": args.episodes, "runs": {}}
    for run in args.runs:
        cfg, env, agent, actor = load_run(run)
        actors = {"fine-tuned": actor}
        if cfg.base_policy.path and not args.no_base:
            actors["base"] = ExecutorAgent(load_policy(cfg.base_policy), ExecutionConfig(mode="sync"), env)
        figures["runs"][run] = {}
        for name, actor in actors.items():
            ok, found = failures(actor, env, args.episodes, Seeds(cfg.seed).evaluation())
            if actor is not agent:
                actor.close()
            figures["runs"][run][name] = {"successes": ok, "failures": dict(found)}
            cells = [f"{len(found[c])} ({np.nanmean([d[0] for d in found[c]]):.0f} / "
                     f"{np.nanmean([d[1] for d in found[c]]):.0f} cm)" if found[c] else "0" for c in CLASSES]
            table.add(run, name, f"{ok}/{args.episodes}", *cells)
        env.close()
    table.notes = ("Each class: failed episodes (mean end xy distance of the gripper to the target / to the nearest "
                   "other cube).")
    if args.out:
        write_result("pick_failures", figures, args.out, [table])


if __name__ == "__main__":
    main()
