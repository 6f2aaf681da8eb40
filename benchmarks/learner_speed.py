"""Learner speed, side by side in one run: robot_rl SAC vs stable-baselines3 SAC on the same batch and networks.

    python benchmarks/learner_speed.py [--device cpu|cuda] [--seconds 10]

Rows: SB3 SAC (2 critics, 256x256, batch 256); ours with the same networks (no LayerNorm, like SB3); ours with
LayerNorm critics; the full RLPD config (10 LayerNorm critics, UTD 20). "updates/s" counts gradient updates of
the critic (for SB3 one gradient step = one critic + one actor update; ours at UTD 1 is the same).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from robot_rl.agents import SACAgent, SACConfig
from robot_rl.spaces import ObsSpec

OBS_DIM, ACT_DIM, BATCH = 17, 6, 256  # HalfCheetah-sized


def random_batch(utd: int, rng: np.random.Generator) -> dict:
    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    return {"obs": {"state": f(utd, BATCH, OBS_DIM)}, "next_obs": {"state": f(utd, BATCH, OBS_DIM)},
            "action": rng.uniform(-1, 1, (utd, BATCH, ACT_DIM)).astype(np.float32),
            "reward": f(utd, BATCH), "terminated": np.zeros((utd, BATCH), bool)}


def time_ours(cfg: SACConfig, seconds: float) -> float:
    agent = SACAgent(ObsSpec(OBS_DIM), ACT_DIM, cfg)
    rng = np.random.default_rng(0)
    batches = [random_batch(cfg.utd, rng) for _ in range(4)]
    for i in range(5):  # warm-up (and compile, if enabled)
        agent.update(batches[i % 4])
    _sync(cfg.device)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        agent.update(batches[n % 4])
        n += 1
    _sync(cfg.device)
    return n * cfg.utd / (time.perf_counter() - start)


def time_sb3(device: str, seconds: float) -> float:
    import gymnasium as gym
    from stable_baselines3 import SAC

    env = gym.make("HalfCheetah-v5")
    model = SAC("MlpPolicy", env, batch_size=BATCH, device=device, verbose=0, learning_starts=0,
                policy_kwargs={"net_arch": [256, 256]})
    rng = np.random.default_rng(0)
    for _ in range(10_000):  # fill the replay with random transitions; only the update is timed
        model.replay_buffer.add(rng.standard_normal((1, OBS_DIM)), rng.standard_normal((1, OBS_DIM)),
                                rng.uniform(-1, 1, (1, ACT_DIM)), rng.standard_normal(1), np.zeros(1), [{}])
    model._setup_learn(total_timesteps=1)
    model.train(gradient_steps=5, batch_size=BATCH)
    _sync(device)
    n, start, chunk = 0, time.perf_counter(), 20
    while time.perf_counter() - start < seconds:
        model.train(gradient_steps=chunk, batch_size=BATCH)
        n += chunk
    _sync(device)
    return n / (time.perf_counter() - start)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=10.0, help="timing window per row")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile variants")
    args = parser.parse_args()
    sb3 = time_sb3(args.device, args.seconds)
    rows = [("stable-baselines3 SAC, 2 critics 256x256", sb3)]
    same = dict(num_critics=2, num_min_critics=2, critic_layer_norm=False, utd=1, device=args.device)
    variants = [
        ("ours, same networks (2 critics, no LN)", SACConfig(**same)),
        ("ours, 2 critics + LayerNorm", SACConfig(**{**same, "critic_layer_norm": True})),
        ("ours, RLPD (10 LN critics, UTD 20)", SACConfig(utd=20, device=args.device)),
    ]
    if args.compile:
        variants += [(f"{name} + compile", SACConfig(**{**cfg.__dict__, "compile": True})) for name, cfg in variants]
    for name, cfg in variants:
        rows.append((name, time_ours(cfg, args.seconds)))
    print(f"\nLearner speed on {args.device} ({torch.get_num_threads()} threads), batch {BATCH}, "
          f"obs {OBS_DIM}, action {ACT_DIM}")
    print(f"| {'learner':<48} | {'updates/s':>9} | {'vs SB3':>6} |")
    print(f"|{'-' * 50}|{'-' * 11}|{'-' * 8}|")
    for name, rate in rows:
        print(f"| {name:<48} | {rate:>9.1f} | {rate / sb3:>5.2f}x |")


if __name__ == "__main__":
    main()
