"""Chunked execution of a base policy at a real control rate: sync vs naive async vs future-state-aware async, with
injected inference latency, side by side in one run.

The sim is stepped by a 20 Hz loop (sleep-then-spin, as the actor's); the policy's inference runs on the
executor's worker thread (async modes) or inline (sync: the loop, and the sim, wait for it). Per cell: success,
episode wall time (successful episodes), control-period jitter p99 (|period - 50 ms|: a sync inference stretches
one period by its latency; the first period of an episode, whose inference every mode waits for, is left out),
steps the robot held because a chunk was late, and inference latency.

    MUJOCO_GL=egl python benchmarks/chunk_execution.py --policy policies/vla_bench --episodes 20
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np
from common import Table, write_result

from robot_rl.envs.config import EnvConfig
from robot_rl.envs.contract import INSTRUCTION
from robot_rl.envs.make import make_env
from robot_rl.policies.config import BasePolicyConfig, ExecutionConfig
from robot_rl.policies.evaluate import state_predictor
from robot_rl.policies.executor import ChunkExecutor
from robot_rl.policies.loader import load_policy
from robot_rl.runtime.actor import sleep_until


def run_cell(policy, env, mode: str, episodes: int, hz: float, seed: int) -> dict:
    period = 1.0 / hz
    ex = ChunkExecutor(policy, ExecutionConfig(mode=mode), period, state_predictor(env) if mode == "future" else None)
    successes, walls, lengths, jitter = [], [], [], []
    try:
        for i in range(episodes):
            obs, info = env.reset(seed=seed + i)
            ex.reset()
            instruction = info.get(INSTRUCTION, "")
            start = scheduled = last = time.perf_counter()
            done, steps = False, 0
            while not done:
                now = time.perf_counter()
                # How far this control period was from the nominal one (a sync stall shows here); the episode's first
                # period holds its first inference, synchronous in every mode (the robot is at rest after a reset).
                if steps > 1:
                    jitter.append(abs((now - last) - period))
                last = now
                step = ex.step(obs, instruction)
                obs, _, terminated, truncated, info = env.step(step.action)
                done = terminated or truncated
                steps += 1
                scheduled += period
                if scheduled < time.perf_counter():
                    scheduled = time.perf_counter()  # overran (sync inference): re-anchor, as the actor does
                sleep_until(scheduled)
            walls.append(time.perf_counter() - start)
            lengths.append(steps)
            successes.append(bool(info.get("is_success", False)))
        stats = ex.stats()
    finally:
        ex.close()
    ok = np.asarray(successes)
    return {"success": float(ok.mean()), "episodes": episodes,
            "wall_s_success": float(np.mean(np.asarray(walls)[ok])) if ok.any() else float("nan"),
            "steps_success": float(np.mean(np.asarray(lengths)[ok])) if ok.any() else float("nan"),
            "jitter_p99_ms": float(np.percentile(jitter, 99) * 1e3), "missed_steps": stats["missed_steps"],
            "late_chunks": stats["late_chunks"], "latency_ms_p50": stats["latency_ms_p50"],
            "latency_ms_p99": stats["latency_ms_p99"]}


def tables(figures: dict) -> list[Table]:
    """The result's table: one row per (latency, mode) cell."""
    rows = figures["rows"]
    table = Table(f"{figures['task']}, {figures['hz']:g} Hz control loop, {rows[0]['episodes'] if rows else 0} "
                  "episodes per cell, the same placements in every cell",
                  ["latency", "mode", "success", "seconds per successful episode", "steps", "period jitter p99",
                   "held steps", "late chunks", "inference p50 / p99"], echo=False)
    for r in rows:
        table.add(f"{r['latency_s'] * 1e3:.0f} ms", r["mode"], f"{r['success']:.2f}", f"{r['wall_s_success']:.2f}",
                  f"{r['steps_success']:.1f}", f"{r['jitter_p99_ms']:.1f} ms", r["missed_steps"], r["late_chunks"],
                  f"{r['latency_ms_p50']:.0f} / {r['latency_ms_p99']:.0f} ms")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="policies/vla_bench", help="saved policy folder or ws:// server")
    parser.add_argument("--task", default="robot_rl/PickColor-v0")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.1, 0.3], help="injected, seconds")
    parser.add_argument("--modes", nargs="+", default=["sync", "async", "future"])
    parser.add_argument("--hz", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=20_000)
    parser.add_argument("--out", default=None, help="result JSON (default benchmarks/results/chunk_execution.json)")
    args = parser.parse_args()
    base = load_policy(BasePolicyConfig(path=args.policy))
    meta = json.loads((__import__("pathlib").Path(args.policy) / "policy.json").read_text())
    kwargs = next((t["env_kwargs"] for t in meta.get("tasks", []) if t["env_id"] == args.task), {})
    env = make_env(EnvConfig(id=args.task, kwargs=kwargs))
    rows = []
    print(f"{args.task}, {args.hz:g} Hz, chunk {base.metadata.chunk_length}, {args.episodes} episodes per cell")
    print(f"{'latency':>8} {'mode':>7} {'success':>8} {'wall s':>7} {'steps':>6} {'jitter p99 ms':>14} "
          f"{'held':>5} {'late':>5} {'infer p50/p99 ms':>17}")
    for latency in args.latencies:
        policy = load_policy(dataclasses.replace(BasePolicyConfig(path=args.policy), latency_s=latency))
        for mode in args.modes:
            r = run_cell(policy, env, mode, args.episodes, args.hz, args.seed)
            rows.append({"latency_s": latency, "mode": mode, **r})
            print(f"{latency * 1e3:>6.0f}ms {mode:>7} {r['success']:>8.2f} {r['wall_s_success']:>7.2f} "
                  f"{r['steps_success']:>6.1f} {r['jitter_p99_ms']:>14.1f} {r['missed_steps']:>5} "
                  f"{r['late_chunks']:>5} "
                  f"{r['latency_ms_p50']:>8.0f}/{r['latency_ms_p99']:<8.0f}", flush=True)
    env.close()
    figures = {"task": args.task, "hz": args.hz, "rows": rows}
    print("result:", write_result("chunk_execution", figures, args.out, tables=tables(figures)))


if __name__ == "__main__":
    main()
