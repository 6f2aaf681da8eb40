"""Replay: memory per transition and sample(256) latency, state-only and with 2 x 128x128 cameras.

    python benchmarks/replay_speed.py [--transitions 20000] [--calls 200] [--out RESULT.json]

Episodes of 100 steps; 10 % of the data in the demos partition so the mixed (online 0.5 / prior 0.5) path is
measured. "reuse" rows sample into reused output buffers (what the learner does).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import Table, write_result

from robot_rl.replay import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec


def build(spec: ObsSpec, action_dim: int, transitions: int, episode_len: int = 100) -> ReplayBuffer:
    cfg = ReplayConfig(online_capacity=transitions + transitions // episode_len + 10,
                       demos_capacity=transitions // 10 + transitions // episode_len + 10)
    buf = ReplayBuffer(spec, action_dim, cfg)
    rng = np.random.default_rng(0)
    frames = {c: rng.integers(0, 256, (episode_len + 1, *s), dtype=np.uint8) for c, s in spec.cameras.items()}
    states = rng.standard_normal((episode_len + 1, spec.state_dim)).astype(np.float32)
    action = np.zeros(action_dim, np.float32)

    def obs(t: int) -> dict:
        o = {"state": states[t]}
        if spec.cameras:
            o["pixels"] = {c: f[t] for c, f in frames.items()}
        return o
    for ep in range(transitions // episode_len):
        source = "demo" if ep % 10 == 0 else "online"
        for t in range(episode_len):
            buf.add(obs(t), action, 0.0, False, t == episode_len - 1, obs(t + 1), source=source, episode_id=ep)
    return buf


def time_sample(buf: ReplayBuffer, calls: int, utd: int | None, reuse: bool) -> tuple[float, float]:
    for _ in range(5):
        buf.sample(256, utd=utd, reuse_output=reuse)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        buf.sample(256, utd=utd, reuse_output=reuse)
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3), float(np.percentile(times, 90) * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transitions", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/replay_speed.json)")
    args = parser.parse_args()
    state_spec = ObsSpec(17)
    pixel_spec = ObsSpec(20, {"front": (128, 128, 3), "wrist": (128, 128, 3)})
    state_buf, pixel_buf = build(state_spec, 6, args.transitions), build(pixel_spec, 4, args.transitions)

    part = pixel_buf.partitions["online"]
    frame = sum(int(np.prod(s)) for s in pixel_spec.cameras.values())
    used = sum(a[: part.size].nbytes for a in part.arrays.values())
    pixels = sum(part.arrays[f"pixels/{c}"][: part.size].nbytes for c in pixel_spec.cameras)
    memory = Table(f"Replay memory ({part.num_transitions} online transitions, episodes of 100 steps)",
                   ["quantity", "bytes / transition", "vs one frame per camera"])
    memory.add("camera frames (2 x 128x128x3)", f"{pixels / part.num_transitions:,.0f}",
               f"{pixels / part.num_transitions / frame:.3f}x")
    memory.add("everything (frames + state + action + metadata)", f"{used / part.num_transitions:,.0f}",
               f"{used / part.num_transitions / frame:.3f}x")
    figures: dict = {"transitions": args.transitions, "calls": args.calls,
                     "online_transitions": int(part.num_transitions), "frame_bytes": frame,
                     "pixel_bytes_per_transition": pixels / part.num_transitions,
                     "bytes_per_transition": used / part.num_transitions, "sample_ms": []}

    sample = Table(f"sample(256), mix online 0.5 / prior 0.5, {args.calls} calls",
                   ["batch", "output buffers", "median ms", "p90 ms"])
    rows = [("state (17-d)", state_buf, None), ("state, utd=20 -> [20, 256]", state_buf, 20),
            ("2 x 128x128 pixels + state", pixel_buf, None)]
    for name, buf, utd in rows:
        for reuse in (False, True):
            med, p90 = time_sample(buf, args.calls, utd, reuse)
            figures["sample_ms"].append({"batch": name, "reuse_output": reuse, "median": med, "p90": p90})
            sample.add(name, "reused" if reuse else "new", f"{med:.2f}", f"{p90:.2f}")
    print(f"results: {write_result('replay_speed', figures, args.out, tables=[memory, sample])}")


if __name__ == "__main__":
    main()
