"""Sim throughput: BatchedEnv vs gymnasium AsyncVectorEnv / SyncVectorEnv on the same task, plus render fps.

    python benchmarks/sim_speed.py [--task robot_rl/PickCube-v0] [--n 1 8 16 64] [--seconds 3] [--pixels]
                                   [--out RESULT.json]

Env steps/s (summed over the N envs) with random actions, auto-resets included. ``--pixels`` adds rows with
the task's two cameras at 128x128.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import gymnasium as gym
import numpy as np
from common import Table, write_result

import robot_rl_sim  # noqa: F401
from robot_rl.envs.batched import make_batched


def rate(step, n: int, action_shape: tuple[int, ...], seconds: float) -> float:
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (16, n, *action_shape)).astype(np.float32)
    step(actions[0])
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step(actions[steps % 16])
        steps += 1
    return steps * n / (time.perf_counter() - start)


def make_task(task: str, kwargs: dict) -> gym.Env:
    import robot_rl_sim  # noqa: F401, F811  (registers the tasks in a spawned worker)

    return gym.make(task, **kwargs)


def measure(task: str, n: int, seconds: float, kwargs: dict, kinds: list[str]) -> dict[str, float]:
    out = {}
    if "batched" in kinds:
        env = make_batched(task, n, **kwargs)
        env.reset(seed=0)
        out["batched"] = rate(env.step, n, env.single_action_space.shape, seconds)
        env.close()
    for kind in ("async", "sync"):
        if kind not in kinds:
            continue
        fns = [partial(make_task, task, kwargs) for _ in range(n)]
        # spawn, not fork: a child forked from a process holding EGL contexts (the pixel rows) deadlocks
        venv = gym.vector.AsyncVectorEnv(fns, context="spawn") if kind == "async" else gym.vector.SyncVectorEnv(fns)
        venv.reset(seed=0)
        out[kind] = rate(venv.step, n, venv.single_action_space.shape, seconds)
        venv.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="robot_rl/PickCube-v0")
    parser.add_argument("--n", type=int, nargs="+", default=[1, 8, 16, 64])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--pixels", action="store_true", help="also measure with 2 cameras at 128x128")
    parser.add_argument("--pixel-max-n", type=int, default=16, help="largest N for the pixel rows")
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/sim_speed.json)")
    args = parser.parse_args()
    table = Table(f"{args.task}: env steps/s (all envs together), random actions",
                  ["N", "obs", "BatchedEnv", "AsyncVectorEnv", "SyncVectorEnv", "Batched / Async"])
    figures: dict = {"task": args.task, "seconds": args.seconds, "rates": [], "render_fps": {}}
    configs = [("state", {})] + ([("2 x 128² cams", {"image_size": 128})] if args.pixels else [])
    for label, kwargs in configs:
        for n in args.n:
            if kwargs and n > args.pixel_max_n:
                continue
            r = measure(args.task, n, args.seconds, kwargs, ["batched", "async", "sync"])
            figures["rates"].append({"n": n, "obs": label, **r})
            table.add(n, label, f"{r['batched']:.0f}", f"{r['async']:.0f}", f"{r['sync']:.0f}",
                      f"{r['batched'] / r['async']:.2f}x")
    env = gym.make(args.task, image_size=128)
    env.reset(seed=0)
    render = Table("Render fps per camera at 128x128 (one env)", ["camera", "render fps at 128x128"])
    for cam in env.unwrapped.cameras:
        env.unwrapped.render_camera(cam, 128)
        start, frames = time.perf_counter(), 0
        while time.perf_counter() - start < 2:
            env.unwrapped.render_camera(cam, 128)
            frames += 1
        figures["render_fps"][cam] = frames / (time.perf_counter() - start)
        render.add(cam, f"{figures['render_fps'][cam]:.0f}")
    print(f"results: {write_result('sim_speed', figures, args.out, tables=[table, render])}")


if __name__ == "__main__":
    main()
