"""Actor loop overhead: control steps per second of the real actor (env pipeline, batching, chunk building, ring
and spool, status words) against the bare env's steps per second, flat out, no learner.

    MUJOCO_GL=egl python benchmarks/actor_speed.py [--env robot_rl/PickCube-v0] [--seconds 5] [--num-envs 1 8]

Modes: ``random`` (warm-up actions: no inference), ``policy`` (the actor's SAC policy acts: inference included).
The "bare env" row steps ``gymnasium.make(env)`` with random actions in a loop (the floor). Runs with whatever
``robot_rl`` is importable, so the same script measures two versions of the code side by side.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import gymnasium as gym
import numpy as np
from common import Table, write_result

from robot_rl.config import from_dict
from robot_rl.runtime.actor import Actor
from robot_rl.training.config import TrainConfig


def bare_env(env_id: str, seconds: float) -> float:
    if env_id.startswith("robot_rl/"):
        import robot_rl_sim  # noqa: F401
    env = gym.make(env_id)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20):  # first-call costs (compiled kernels) out of the timing
        env.step(env.action_space.sample())
    env.reset(seed=0)
    steps, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
        if terminated or truncated:
            env.reset()
        steps += 1
    env.close()
    return steps / seconds


def actor_rate(env_id: str, num_envs: int, seconds: float, policy: bool) -> float:
    cfg = from_dict(TrainConfig, {"env": {"id": env_id}, "random_steps": 0 if policy else 10**9,
                                  "learning_starts": 10**9, "total_env_steps": 10**9,
                                  "agent": {"num_critics": 2, "hidden_dims": [256, 256]},
                                  "runtime": {"num_envs": num_envs, "max_update_lag": 0}})
    with tempfile.TemporaryDirectory() as tmp:
        actor = Actor(cfg, tmp)
        try:
            if policy:
                actor.version = 1  # act with the (initial) policy as if the learner had published it
            for _ in range(20):
                actor.step()
            steps0, t0 = actor.steps, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                actor.step()
                actor.publish_stats()
            return (actor.steps - steps0) / (time.perf_counter() - t0)
        finally:
            actor.close()
            actor.outbox.ring.close(unlink=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="robot_rl/PickCube-v0")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/actor_speed.json)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    floor = bare_env(args.env, args.seconds)
    table = Table(f"Env steps/s of the actor against the bare env, {args.env}, flat out, no learner, "
                  f"{args.seconds:g} s per row", ["row", "env steps/s", "share of the bare env"])
    table.add("bare env (gymnasium.make, random actions)", f"{floor:.0f}", "1.00")
    rates = []
    for n in args.num_envs:
        for mode in ("random", "policy"):
            rate = actor_rate(args.env, n, args.seconds, mode == "policy")
            rates.append({"num_envs": n, "mode": mode, "steps_per_s": rate})
            table.add(f"actor, {n} env(s), {mode} actions", f"{rate:.0f}", f"{rate / floor:.2f}")
    figures = {"env": args.env, "seconds": args.seconds, "bare_env_steps_per_s": floor, "actor": rates}
    print(f"results: {write_result('actor_speed', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
