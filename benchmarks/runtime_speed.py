"""Runtime benchmarks: transitions/s through the local transport, weight-sync latency, actor period jitter.

    python benchmarks/runtime_speed.py [--transitions 20000] [--jitter-seconds 60] [--rt-priority 50] [--out FILE]

1. Transport: an actor-side process builds chunks of pixel transitions (2 x 128x128x3 cameras, 17-d state) and
   puts them into its shared-memory ring (with and without the spool write-ahead log); the learner side (this
   process) takes them in and adds them to a ReplayBuffer — the learner's real intake path. Transitions/s are
   counted on the learner side.
2. Weight sync: a learner-side process publishes a ~1M-parameter policy (actor 1024x1024) every 50 ms; this
   process, as the actor does, polls the board, copies the weights and loads them into a standby agent.
   Latency = from the start of ``publish`` to the policy being loaded.
3. Actor jitter: ``robot-rl train pickcube`` with ``runtime.control_hz 20``; the actor's p99 |start - schedule|.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common import Table, write_result
from synthetic_chunks import pixel_chunks

from robot_rl.agents.config import SACConfig
from robot_rl.agents.sac import SACAgent
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.replay.rows import row_specs
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.spool import SpoolWriter
from robot_rl.spaces import ObsSpec
from robot_rl.utils.process import set_realtime

SPEC = ObsSpec(17, {"front": (128, 128, 3), "wrist": (128, 128, 3)})
ACTION_DIM, CHUNK = 4, 64


def produce(ring_name: str, spool_dir: str | None, transitions: int) -> None:
    ring = shm.ChunkRing(ring_name, row_specs(SPEC, ACTION_DIM))
    spool = SpoolWriter(spool_dir) if spool_dir else None
    for seq, chunk in pixel_chunks(SPEC, ACTION_DIM, CHUNK, transitions):
        if spool is not None:
            spool.write(seq, chunk)
        while ring.pending() >= ring.slots:  # benchmark: wait for room instead of relying on the spool
            time.sleep(0.0002)
        ring.put(chunk, seq)
    if spool is not None:
        spool.flush()
        spool.close()
    ring.close()


def transport(transitions: int, spool: bool) -> float:
    name = f"rrl_bench_{int(time.time() * 1e3) % 10**8}"
    ring = shm.ChunkRing(name, row_specs(SPEC, ACTION_DIM), slots=16, rows=2 * CHUNK, create=True)
    replay = ReplayBuffer(SPEC, ACTION_DIM, ReplayConfig(online_capacity=transitions + 1000, demos_capacity=2,
                                                         interventions_capacity=2))
    with tempfile.TemporaryDirectory() as tmp:
        proc = mp.get_context("spawn").Process(target=produce, args=(name, tmp if spool else None, transitions))
        proc.start()
        taken, start = 0, None
        while taken < transitions:
            item = ring.peek()
            if item is None:
                time.sleep(0.0001)
                continue
            start = start or time.perf_counter()
            taken += replay.extend(item[1])
            ring.release()
        elapsed = time.perf_counter() - start
        proc.join()
    ring.close(unlink=True)
    return taken / elapsed


def publish_loop(name: str, seconds: float, starts: Any) -> None:
    agent = SACAgent(ObsSpec(17), 6, SACConfig(hidden_dims=(1024, 1024), num_critics=2))
    board = shm.WeightBoard(name, agent.policy_state())
    version, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        version += 1
        starts.put((version, time.time_ns()))  # when this publish began
        board.publish(agent.policy_state(), version)
        time.sleep(0.05)
    board.close()


def weight_sync(seconds: float, rt_priority: int = 0) -> dict[str, float]:
    cfg = SACConfig(hidden_dims=(1024, 1024), num_critics=2)
    agent = SACAgent(ObsSpec(17), 6, cfg)
    params = sum(v.numel() for v in agent.policy_state().values())
    name = f"rrl_bench_w{int(time.time() * 1e3) % 10**8}"
    board = shm.WeightBoard(name, agent.policy_state(), create=True)
    ctx = mp.get_context("spawn")
    starts, started = ctx.Queue(), {}
    proc = ctx.Process(target=publish_loop, args=(name, seconds, starts))
    proc.start()
    if rt_priority:  # as the actor's weight thread with runtime.actor_rt_priority
        set_realtime(max(1, rt_priority - 1))
    latencies, loads, seen = [], [], 0
    while proc.is_alive() or board.version > seen:
        if board.version > seen:
            t0 = time.perf_counter()
            version, state = board.read()
            agent.load_policy_state(state)
            done = time.time_ns()
            loads.append(time.perf_counter() - t0)
            while version not in started:
                started.update([starts.get(timeout=10)])
            if seen:  # skip the first (start-up) one
                latencies.append((done - started[version]) / 1e6)
            seen = version
        time.sleep(0.001)  # the actor's weight thread polls every 5 ms; 1 ms here isolates the copy cost
    proc.join()
    board.close(unlink=True)
    if rt_priority:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return {"params": params, "p50": float(np.median(latencies)), "p99": float(np.percentile(latencies, 99)),
            "load_p50": float(np.median(loads)) * 1e3, "n": len(latencies)}


def jitter(seconds: float, rt_priority: int = 0) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        steps = int(seconds * 20)
        cmd = [sys.executable, "-m", "robot_rl.cli", "train", "pickcube", "--runs-dir", tmp, "--name", "j",
               "--runtime.control-hz", "20", "--total-env-steps", str(steps), "--eval-every", "0",
               "--eval-episodes", "1", "--random-steps", "100", "--learning-starts", "100", "--no-progress",
               "--runtime.max-update-lag", "0",  # as on a robot: the actor never pauses for the learner
               "--runtime.actor-rt-priority", str(rt_priority),
               # a light learner: this row is about the actor's timing, not learning
               "--agent.num-critics", "2", "--agent.utd", "1", "--agent.hidden-dims", "64", "64"]
        subprocess.run(cmd, check=True, capture_output=True, timeout=seconds * 4 + 300)
        rows = [json.loads(line) for line in (Path(tmp) / "j" / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in rows if any(k.endswith("jitter_p99_ms") for k in r)][-1]
    key = next(k for k in last if k.endswith("jitter_p99_ms"))
    return {"jitter_p99_ms": last[key], "infer_ms": last[key.replace("jitter_p99", "inference")], "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transitions", type=int, default=20_000)
    parser.add_argument("--sync-seconds", type=float, default=10.0)
    parser.add_argument("--jitter-seconds", type=float, default=60.0)
    parser.add_argument("--rt-priority", type=int, default=0,
                        help="also measure the jitter with runtime.actor_rt_priority N (SCHED_FIFO)")
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/runtime_speed.json)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = Table("Local transport, weight sync and actor jitter", ["quantity", "figure"])
    figures: dict = {"transport": [], "weight_sync": [], "jitter": []}
    for spool in (False, True) if args.transitions > 0 else ():
        rate = transport(args.transitions, spool)
        figures["transport"].append({"spool": spool, "transitions": args.transitions, "rate": rate})
        table.add(f"local transport, 2 x 128² pixels, {'ring + spool' if spool else 'ring only'}",
                  f"{rate:,.0f} transitions/s")
    for prio in ((0, args.rt_priority) if args.rt_priority else (0,)) if args.sync_seconds > 0 else ():
        ws = weight_sync(args.sync_seconds, prio)
        figures["weight_sync"].append({"rt_priority": prio, "seconds": args.sync_seconds, **ws})
        sched = f"SCHED_FIFO {max(1, prio - 1)}" if prio else "normal scheduling"
        table.add(f"weight sync, {ws['params'] / 1e6:.2f}M-parameter policy, publish -> loaded in the actor ({sched})",
                  f"p50 {ws['p50']:.2f} ms, p99 {ws['p99']:.2f} ms (copy + load {ws['load_p50']:.2f} ms; n={ws['n']})")
    for prio in ((0, args.rt_priority) if args.rt_priority else (0,)) if args.jitter_seconds > 0 else ():
        j = jitter(args.jitter_seconds, prio)
        figures["jitter"].append({"rt_priority": prio, **j})
        sched = f"SCHED_FIFO {prio}" if prio else "normal scheduling"
        table.add(f"actor period jitter p99 at 20 Hz (PickCube state, {j['steps']} steps, {sched})",
                  f"{j['jitter_p99_ms']:.3f} ms (policy inference {j['infer_ms']:.2f} ms)")
    print(f"results: {write_result('runtime_speed', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
