"""The small VLA: parameters, CPU training time and per-task success (from the ``robot-rl train-bc`` run's
``eval.json``) and inference latency p50 / p99 on this CPU (one chunk: two 64^2 frames, state, instruction ->
[H, A] by 10 flow steps), with 1 and 2 torch threads.

    robot-rl train-bc --out policies/vla_bench --eval-episodes 100
    python benchmarks/vla.py --policy policies/vla_bench
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from common import Table, write_result

from robot_rl.policies.vla_policy import load_vla


def latency(policy, threads: int, n: int) -> tuple[float, float]:
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    meta = policy.metadata
    obs = {"state": rng.normal(size=meta.state_dim).astype(np.float32),
           "pixels": {c: rng.integers(0, 256, s, dtype=np.uint8) for c, s in meta.cameras.items()}}
    for _ in range(10):
        policy.infer(obs, "pick up the red cube")
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        policy.infer(obs, "pick up the red cube")
        times.append(time.perf_counter() - t0)
    return float(np.percentile(times, 50) * 1e3), float(np.percentile(times, 99) * 1e3)


def tables(figures: dict) -> list[Table]:
    """The result's tables: the model (size, training, inference latency) and the success per task."""
    steps, seconds = figures["train"]["steps"], figures["train_seconds"]
    model = Table("The small VLA", ["quantity", "figure"], echo=False)
    model.add("parameters", f"{figures['parameters'] / 1e6:.2f} M")
    model.add("demo transitions", f"{figures['transitions']:,}")
    model.add("training time", f"{seconds / 60:.1f} min ({steps} steps of batch {figures['train']['batch_size']}, "
                               f"{seconds / steps:.2f} s per step)")
    model.add("inference, one chunk, p50 / p99",
              ", ".join(f"{p50:.1f} / {p99:.1f} ms ({key.replace('_threads', '')} thread{'s' * (key[0] != '1')})"
                        for key, (p50, p99) in figures["inference_ms_p50_p99"].items()))
    tasks = Table(f"Success over {figures['eval_episodes']} deterministic episodes per task",
                  ["task", "success", "95 % CI", "steps per success"], echo=False)
    for name, r in figures["tasks"].items():
        steps_ok = "-" if r["cycle_time"] != r["cycle_time"] else f"{r['cycle_time']:.1f}"  # NaN: no success
        tasks.add(name, f"{r['success_rate']:.2f}", f"{r['success_ci_low']:.2f}-{r['success_ci_high']:.2f}", steps_ok)
    return [model, tasks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="policies/vla_bench")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/vla.json)")
    args = parser.parse_args()
    summary = json.loads((Path(args.policy) / "eval.json").read_text())
    policy = load_vla(args.policy)
    lat = {f"{t}_threads": latency(policy, t, args.n) for t in (1, 2)}
    cfg = policy.cfg
    print(f"small VLA: {summary['parameters'] / 1e6:.2f} M parameters, {summary['transitions']} demo transitions, "
          f"trained {summary['train_seconds'] / 60:.1f} min on this CPU ({policy.info['train']['steps']} steps of "
          f"{policy.info['train']['batch_size']})")
    print(f"chunk {cfg.chunk_length} x {cfg.action_dim}, {len(cfg.cameras)} x {cfg.image_size}^2 cameras, head "
          f"{cfg.head}, text encoder {cfg.text_encoder}")
    import yaml

    episodes = yaml.safe_load((Path(args.policy) / "config.yaml").read_text())["eval_episodes"]
    print(f"{'task':<14} {'success':>8} {'95 % CI':>13} {'steps (successes)':>18}   ({episodes} episodes per task)")
    for name, r in summary["tasks"].items():
        print(f"{name:<14} {r['success_rate']:>8.2f} {r['success_ci_low']:>6.2f}-{r['success_ci_high']:<6.2f} "
              f"{r['cycle_time']:>18.1f}")
    for key, (p50, p99) in lat.items():
        print(f"inference, {key.replace('_', ' ')}: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    figures = {"parameters": summary["parameters"], "transitions": summary["transitions"],
               "train_seconds": summary["train_seconds"], "train": policy.info["train"], "eval_episodes": episodes,
               "tasks": summary["tasks"], "inference_ms_p50_p99": lat}
    print("result:", write_result("vla", figures, args.out, tables=tables(figures)))


if __name__ == "__main__":
    main()
