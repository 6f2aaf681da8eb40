"""Every arm task of ``robot_rl_sim`` in one table: its scripted expert's success (action noise 0 and 0.1), a random
policy's success, and single-env steps/s with state only and with two 128² cameras.

    MUJOCO_GL=egl .venv/bin/python benchmarks/arm_tasks.py [--episodes 100] [--seconds 4] [--out FILE]

Success: ``--episodes`` episodes per row, seeds 0..N-1, the episode's ``is_success`` at its end. Speed: random
actions for ``--seconds`` seconds, resets included.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym  # noqa: E402
from common import Table, write_result  # noqa: E402

import robot_rl_sim  # noqa: E402, F401  (registers the gym ids)

TASKS = ("Reach", "PickCube", "PegInsert", "PickColor")


def success_rate(env: gym.Env, episodes: int, act) -> float:
    wins = 0
    for seed in range(episodes):
        env.reset(seed=seed)
        info: dict = {}
        for _ in range(env.unwrapped.cfg.max_episode_steps):
            _, _, terminated, truncated, info = env.step(act(env))
            if terminated or truncated:
                break
        wins += bool(info.get("is_success"))
    return wins / episodes


def steps_per_s(task: str, image_size: int, seconds: float) -> float:
    env = gym.make(f"robot_rl/{task}-v0", image_size=image_size)
    env.reset(seed=0)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        n += 1
        if terminated or truncated:
            env.reset()
    env.close()
    return n / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--out", default=None, help="result file (default: benchmarks/results/arm_tasks.json)")
    args = p.parse_args()
    table = Table(f"Arm tasks, single env: success over {args.episodes} seeds; steps/s with random actions",
                  ["task", f"expert success ({args.episodes} seeds, noise 0 / 0.1)",
                   f"random policy success ({args.episodes} episodes)", "env steps/s state",
                   "env steps/s 2 × 128² cameras"])
    figures: dict = {}
    for task in TASKS:
        env = gym.make(f"robot_rl/{task}-v0")
        env.action_space.seed(0)
        clean = success_rate(env, args.episodes, lambda e: e.unwrapped.expert_action())
        noisy = success_rate(env, args.episodes, lambda e: e.unwrapped.expert_action(noise=0.1))
        random = success_rate(env, args.episodes, lambda e: e.action_space.sample())
        env.close()
        state, pixels = steps_per_s(task, 0, args.seconds), steps_per_s(task, 128, args.seconds)
        figures[task] = {"expert": clean, "expert_noise_0.1": noisy, "random": random, "steps_per_s_state": state,
                         "steps_per_s_pixels": pixels}
        table.add(task, f"{100 * clean:.0f} % / {100 * noisy:.0f} %", f"{100 * random:.0f} %", f"{state:.0f}",
                  f"{pixels:.0f}")
    print(f"results: {write_result('arm_tasks', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
