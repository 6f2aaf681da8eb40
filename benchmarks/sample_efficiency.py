"""Sample efficiency at a fixed small step budget: robot_rl vs stable-baselines3 SAC, several seeds.

    python benchmarks/sample_efficiency.py --env HalfCheetah-v5 --steps 20000 --seeds 0 1 2 \
        --agents sb3 ours rlpd [--device cpu|cuda] [--jobs N] [--out RESULT.json]

Agents: ``sb3`` = SB3 SAC defaults (2 critics 256x256, UTD 1); ``ours`` = robot_rl SAC with the same networks
and UTD 1; ``rlpd`` = robot_rl with the RLPD recipe (10 LayerNorm critics, subset-min of 2) at ``--rlpd-utd``.
Every run starts learning after the same number of random steps and is scored by the mean return of 10
deterministic evaluation episodes at the end. Runs go in parallel subprocesses (``--jobs``), each with one torch
thread. Prints a table with the mean, the standard deviation across seeds, and each seed's score.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from common import Table, write_result


def run_ours(env_id: str, steps: int, seed: int, device: str, learning_starts: int, rlpd: bool,
             rlpd_utd: int) -> dict:
    from robot_rl.agents.config import SACConfig
    from robot_rl.envs import EnvConfig
    from robot_rl.replay.buffer import ReplayConfig
    from robot_rl.runtime.supervisor import train
    from robot_rl.training.config import RuntimeConfig, TrainConfig

    agent = (SACConfig(utd=rlpd_utd, device=device) if rlpd else
             SACConfig(num_critics=2, num_min_critics=2, critic_layer_norm=False, utd=1, device=device))
    cfg = TrainConfig(name=f"{env_id}-{seed}", runs_dir=tempfile.mkdtemp(prefix="sample_eff_"), seed=seed,
                      total_env_steps=steps, random_steps=learning_starts, learning_starts=learning_starts,
                      eval_every=0, eval_episodes=10, checkpoint_every=0, log_every=1000, progress=False,
                      env=EnvConfig(id=env_id), agent=agent,
                      replay=ReplayConfig(mix={"online": 1.0}),
                      runtime=RuntimeConfig(processes=False))  # lock-step: the figure measures learning, not timing
    _, result = train(cfg)
    return {"return": result["return_mean"]}


def run_sb3(env_id: str, steps: int, seed: int, device: str, learning_starts: int) -> dict:
    import gymnasium as gym
    from stable_baselines3 import SAC

    env = gym.make(env_id)
    model = SAC("MlpPolicy", env, seed=seed, device=device, learning_starts=learning_starts, verbose=0)
    model.learn(total_timesteps=steps)
    eval_env = gym.make(env_id)
    returns = []
    for i in range(10):
        obs, _ = eval_env.reset(seed=10_000 + seed + i)
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = eval_env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return {"return": float(np.mean(returns))}


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    if args.child_agent == "sb3":
        out = run_sb3(args.env, args.steps, args.child_seed, args.sb3_device or args.device, args.learning_starts)
    else:
        out = run_ours(args.env, args.steps, args.child_seed, args.device, args.learning_starts,
                       args.child_agent == "rlpd", args.rlpd_utd)
    out["wall_s"] = time.perf_counter() - start
    print("RESULT " + json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--learning-starts", type=int, default=2_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--agents", nargs="+", default=["sb3", "ours", "rlpd"], choices=["sb3", "ours", "rlpd"])
    parser.add_argument("--rlpd-utd", type=int, default=4)
    parser.add_argument("--device", default="cpu", help="device of robot_rl's learner (SB3 uses the same)")
    parser.add_argument("--sb3-device", default=None, help="device of SB3 (default: --device)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/sample_efficiency.json)")
    parser.add_argument("--child-agent", help=argparse.SUPPRESS)
    parser.add_argument("--child-seed", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_agent:
        return child(args)

    def launch(agent: str, seed: int) -> tuple[str, int, dict]:
        cmd = [sys.executable, __file__, "--env", args.env, "--steps", str(args.steps), "--learning-starts",
               str(args.learning_starts), "--rlpd-utd", str(args.rlpd_utd), "--device", args.device,
               "--sb3-device", args.sb3_device or args.device,
               "--child-agent", agent, "--child-seed", str(seed)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode or not lines:
            raise RuntimeError(f"{agent} seed {seed} failed:\n{proc.stderr[-2000:]}")
        result = json.loads(lines[-1][7:])
        print(f"  {agent:<5} seed {seed}: return {result['return']:8.1f}  ({result['wall_s']:.0f} s)", flush=True)
        return agent, seed, result

    jobs = [(a, s) for a in args.agents for s in args.seeds]
    print(f"{len(jobs)} runs of {args.steps} env steps on {args.env}, {args.jobs} at a time")
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda job: launch(*job), jobs))
    table = Table(f"{args.env}, {args.steps} env steps ({args.learning_starts} random), final deterministic return "
                  f"(10 episodes), {len(args.seeds)} seeds", ["agent", "mean", "std", "per seed", "wall s (mean)"])
    names = {"sb3": "SB3 SAC (2 critics, UTD 1)", "ours": "robot_rl SAC (2 critics, UTD 1)",
             "rlpd": f"robot_rl RLPD (10 LN critics, UTD {args.rlpd_utd})"}
    for agent in args.agents:
        scores = [r["return"] for a, _, r in results if a == agent]
        walls = [r["wall_s"] for a, _, r in results if a == agent]
        table.add(names[agent], f"{np.mean(scores):.1f}", f"{np.std(scores):.1f}",
                  ", ".join(f"{s:.0f}" for s in scores), f"{np.mean(walls):.0f}")
    figures = {"env": args.env, "steps": args.steps, "learning_starts": args.learning_starts,
               "rlpd_utd": args.rlpd_utd, "device": args.device, "sb3_device": args.sb3_device or args.device,
               "runs": [{"agent": a, "seed": s, **r} for a, s, r in results]}
    print(f"results: {write_result('sample_efficiency', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
