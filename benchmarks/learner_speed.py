"""Learner speed, side by side in one run: robot_rl SAC vs stable-baselines3 SAC on the same batch and networks.

    python benchmarks/learner_speed.py [--device cpu|cuda] [--seconds 10] [--rounds 5] [--threads N] [--compile]
                                       [--clock wall|cpu]

Rows: SB3 SAC (2 critics, 256x256, batch 256); ours with the same networks (no LayerNorm, like SB3), with the
default hand-derived gradients (``agent.manual_grad``) and with autograd; ours with LayerNorm critics; the full
RLPD config (10 LayerNorm critics, UTD 20). "updates/s" counts gradient updates of the critic (for SB3 one
gradient step = one critic + one actor update; ours at UTD 1 is the same).

The rows are timed in interleaved rounds (each round gives every row ``seconds / rounds``), so a busy machine
slows all rows alike; the table reports each row's median rate and the median over rounds of its ratio to the SB3
rate of the same round. ``--clock cpu`` divides by this process's CPU time per thread instead of wall time: on a
machine shared with other jobs at ``--threads 1`` it measures the work itself (with 2 threads it also counts
OpenMP spin-waiting, so use wall time there, on a quiet machine).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from common import Table, write_result

from robot_rl.agents import SACAgent, SACConfig
from robot_rl.spaces import ObsSpec

OBS_DIM, ACT_DIM, BATCH = 17, 6, 256  # HalfCheetah-sized


def random_batch(utd: int, rng: np.random.Generator) -> dict:
    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    return {"obs": {"state": f(utd, BATCH, OBS_DIM)}, "next_obs": {"state": f(utd, BATCH, OBS_DIM)},
            "action": rng.uniform(-1, 1, (utd, BATCH, ACT_DIM)).astype(np.float32),
            "reward": f(utd, BATCH), "terminated": np.zeros((utd, BATCH), bool)}


def ours(cfg: SACConfig) -> tuple[Callable[[], None], int]:
    """A callable doing one ``update`` (``cfg.utd`` critic updates) and its critic-update count."""
    agent = SACAgent(ObsSpec(OBS_DIM), ACT_DIM, cfg)
    rng = np.random.default_rng(0)
    batches = [random_batch(cfg.utd, rng) for _ in range(4)]
    count = iter(range(1 << 62))
    for i in range(5):  # warm-up (and compile, if enabled)
        agent.update(batches[i % 4])
    return (lambda: agent.update(batches[next(count) % 4])), cfg.utd


def sb3(device: str) -> tuple[Callable[[], None], int]:
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
    chunk = 5
    return (lambda: model.train(gradient_steps=chunk, batch_size=BATCH)), chunk


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(rows: dict[str, tuple[Callable[[], None], int]], seconds: float, rounds: int,
            device: str, clock: str = "wall") -> dict[str, list[float]]:
    """Interleaved timing: per round, each row runs for ``seconds / rounds``; returns updates/s per round."""
    rates: dict[str, list[float]] = {name: [] for name in rows}
    window = seconds / rounds
    threads = torch.get_num_threads()
    for _ in range(rounds):
        for name, (step, per_call) in rows.items():
            _sync(device)
            n, start, cpu = 0, time.perf_counter(), time.process_time()
            while time.perf_counter() - start < window:
                step()
                n += per_call
            _sync(device)
            elapsed = (time.process_time() - cpu) / threads if clock == "cpu" else time.perf_counter() - start
            rates[name].append(n / elapsed)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=10.0, help="total timing per row (split over rounds)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile variants (autograd path)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="time base of the rates")
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/learner_speed.json)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    same = dict(num_critics=2, num_min_critics=2, critic_layer_norm=False, utd=1, device=args.device)
    ln = {**same, "critic_layer_norm": True}
    variants = [
        ("ours, same networks (2 critics, no LN)", SACConfig(**same)),
        ("ours, same networks, autograd", SACConfig(**same, manual_grad=False)),
        ("ours, 2 critics + LayerNorm", SACConfig(**ln)),
        ("ours, 2 critics + LayerNorm, autograd", SACConfig(**ln, manual_grad=False)),
        ("ours, RLPD (10 LN critics, UTD 20)", SACConfig(utd=20, device=args.device)),
        ("ours, RLPD, autograd", SACConfig(utd=20, device=args.device, manual_grad=False)),
    ]
    if args.compile:
        variants += [(f"{name} + compile", SACConfig(**{**cfg.__dict__, "compile": True}))
                     for name, cfg in variants if "autograd" not in name]
    rows = {"stable-baselines3 SAC, 2 critics 256x256": sb3(args.device)}
    rows.update({name: ours(cfg) for name, cfg in variants})
    rates = measure(rows, args.seconds, args.rounds, args.device, args.clock)
    base = np.array(next(iter(rates.values())))
    table = Table(f"Gradient updates/s on {args.device} ({torch.get_num_threads()} threads), batch {BATCH}, obs "
                  f"{OBS_DIM}, action {ACT_DIM}, 256x256 networks; {args.rounds} interleaved rounds of "
                  f"{args.seconds / args.rounds:.1f} s per row, {args.clock} clock",
                  ["learner", "updates/s", "vs SB3 (range over rounds)"],
                  notes="\"vs SB3\" is the median over rounds of the row's rate divided by SB3's rate in the same "
                        "round.")
    for name, r in rates.items():
        ratio = np.array(r) / base
        table.add(name, f"{np.median(r):.1f}", f"{np.median(ratio):.2f}x ({ratio.min():.2f}-{ratio.max():.2f})")
    print(f"results: {write_result('learner_speed', {'rates': rates}, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
