"""Transitions/s through the Ray transport with 2 x 128² pixel observations.

    MUJOCO_GL=egl python benchmarks/ray_speed.py [--transitions 4000] [--no-actor-spool]

A local Ray cluster with token authentication. The real learner-side :class:`Gateway` runs as a Ray actor (it
validates every chunk, writes it to the run's spool, then into the learner's ring); a second Ray actor plays the
remote actor's bridge: it builds 64-row chunks of PickCube pixel transitions with the real ``BlockBuilder``,
writes them to its local spool (as the actor does; ``--no-actor-spool`` skips it) and pushes them as safetensors
bytes with 4 in flight, as :class:`~robot_rl.runtime.placement.ray_bridge.Bridge` does. This process is the
learner's intake: it drains the gateway's ring into a replay buffer. The figure is transitions in the replay per
second, from the first chunk taken to the last. Everything shares this machine's cores (on two machines the link
adds its own).
"""

from __future__ import annotations

import argparse
import os
import secrets
import tempfile
import time
from collections import deque
from pathlib import Path

import numpy as np
import synthetic_chunks
import yaml
from common import Table, write_result
from synthetic_chunks import pixel_chunks

from robot_rl.config import replace, to_dict
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.replay.rows import row_specs
from robot_rl.runtime.placement.ray_gateway import Gateway, require_token_auth
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, ring_name
from robot_rl.spaces import ObsSpec
from robot_rl.training.config import TrainConfig

ACTION_DIM, CHUNK, SIZE = 4, 64, 128


def pixel_spec() -> ObsSpec:
    import gymnasium as gym

    import robot_rl_sim  # noqa: F401

    env = gym.make("robot_rl/PickCube-v0", image_size=SIZE)
    spec = ObsSpec.from_space(env.observation_space)
    env.close()
    return spec


class Pusher:
    """The remote actor's side: builds chunks and pushes them to the gateway with a window of 4 in flight."""

    def run(self, gateway, uid: str, state_dim: int, transitions: int, spool_dir: str | None) -> float:
        import ray
        from safetensors.numpy import save as save_np

        from robot_rl.runtime.transport.spool import SpoolWriter

        spec = ObsSpec(state_dim, {"front": (SIZE, SIZE, 3), "wrist": (SIZE, SIZE, 3)})
        spool = SpoolWriter(spool_dir) if spool_dir else None
        ray.get(gateway.join.remote(uid, 0, 1))
        inflight: deque = deque()
        start = time.perf_counter()
        for seq, chunk in pixel_chunks(spec, ACTION_DIM, CHUNK, transitions):
            if spool is not None:
                spool.write(seq, chunk)
            inflight.append(gateway.push.remote(uid, seq, save_np({k: np.ascontiguousarray(v)
                                                                   for k, v in chunk.items()})))
            while len(inflight) >= 4:
                ray.get(inflight.popleft())
        ray.get(list(inflight))
        if spool is not None:
            spool.flush()
            spool.close()
        return time.perf_counter() - start


def measure(transitions: int, actor_spool: bool) -> dict[str, float]:
    import ray

    spec = pixel_spec()
    cfg = replace(TrainConfig(), {"env.id": "robot_rl/PickCube-v0", "env.kwargs": {"image_size": SIZE},
                                  "runtime.ring_slots": 32})
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        run_dir.mkdir()
        gateway = ray.remote(Gateway).options(num_cpus=0).remote(yaml.safe_dump(to_dict(cfg)), str(run_dir))
        ray.get(gateway.status.remote())
        uid = f"bench-{secrets.token_hex(3)}"
        pusher = ray.remote(Pusher).options(num_cpus=0).remote()
        pushed = pusher.run.remote(gateway, uid, spec.state_dim, transitions,
                                   str(Path(tmp) / "actor_spool") if actor_spool else None)
        replay = ReplayBuffer(spec, ACTION_DIM, ReplayConfig(online_capacity=transitions + 1000, demos_capacity=2,
                                                             interventions_capacity=2))
        deadline = time.monotonic() + 120
        while not (actor_dir(run_dir) / f"{uid}.json").is_file():  # registered once its ring is ready, as the
            if time.monotonic() > deadline:  # learner discovers it
                raise TimeoutError("the pusher never joined the gateway")
            time.sleep(0.01)
        ring = shm.ChunkRing(ring_name(run_dir, uid), row_specs(spec, ACTION_DIM))
        taken, start, last = 0, None, time.monotonic()
        while taken < transitions:
            item = ring.peek()
            if item is None:
                if time.monotonic() - last > 30:  # an overflowed chunk is only in the spool: stop, report it
                    break
                time.sleep(0.0002)
                continue
            last = time.monotonic()
            start = start or time.perf_counter()
            taken += replay.extend(item[1])
            ring.release()
        elapsed = time.perf_counter() - start
        push_seconds = ray.get(pushed)
        dropped = ring.dropped
        ring.close()
        ray.kill(gateway)
    return {"rate": taken / elapsed, "push_rate": transitions / push_seconds, "dropped": dropped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transitions", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-actor-spool", dest="actor_spool", action="store_false")
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/ray_speed.json)")
    args = parser.parse_args()
    os.environ["RAY_AUTH_TOKEN"] = os.environ.get("RAY_AUTH_TOKEN") or secrets.token_hex(16)
    require_token_auth()
    import ray

    ray.cloudpickle.register_pickle_by_value(synthetic_chunks)  # the Ray workers do not have benchmarks/ on their path
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             logging_level="WARNING")
    try:
        measure(256, args.actor_spool)  # warm-up: worker processes, imports
        rows = [measure(args.transitions, args.actor_spool) for _ in range(args.repeats)]
    finally:
        ray.shutdown()
    spools = "gateway spool + actor spool" if args.actor_spool else "gateway spool only"
    table = Table(f"Ray transport, 2 x {SIZE}² pixels, {CHUNK}-row chunks, {spools}, {args.transitions} "
                  f"transitions, one machine ({os.cpu_count()} cores)",
                  ["run", "into the learner's replay", "pushed by the actor side", "ring overflows (read from spool)"])
    for i, r in enumerate(rows):
        table.add(i + 1, f"{r['rate']:,.0f} transitions/s", f"{r['push_rate']:,.0f} transitions/s", r["dropped"])
    figures = {"transitions": args.transitions, "actor_spool": args.actor_spool, "chunk_rows": CHUNK, "runs": rows}
    print(f"results: {write_result('ray_speed', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
