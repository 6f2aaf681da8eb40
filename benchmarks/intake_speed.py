"""Replay intake: transitions/s from an actor's chunks into the learner's replay, this checkout beside another commit.

    python benchmarks/intake_speed.py [--before REV] [--rounds 3] [--out FILE]

The learner's intake writes each chunk (a block of rows: :mod:`robot_rl.replay.rows`) into the replay. Both sides
build the same chunks with their own builder (4 envs interleaved, 64 transitions a chunk, an episode ends every
100 steps) and time only the writes into a ``ReplayBuffer``: PickCube's pixels (2 x 128x128x3 cameras, 17-d state)
and state only. ``--before``: the commit to compare with, checked out into a temporary git worktree and imported
from there (default: the one before the vectorised write). The two sides alternate, ``--rounds`` times each, in
fresh processes; the table gives each side's median, and the floor: every byte of the chunks copied once into
memory already mapped (what no writer can beat), measured in the same processes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Table, write_result

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "6eed1b6"
CASES = {"pixels (2 x 128x128 cameras)": (True, 6_000), "state only (17-d)": (False, 60_000)}


def worker(pixels: bool, transitions: int) -> dict:
    """Runs inside the side's process: builds the chunks, then times their writes into a fresh replay."""
    import numpy as np

    import robot_rl
    from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
    from robot_rl.spaces import ObsSpec

    try:  # this checkout: blocks written in one vectorised copy
        from robot_rl.replay.rows import BlockBuilder as Builder

        def write(replay, chunk):
            return replay.extend(chunk)
    except ImportError:  # before: chunks added one transition at a time
        from robot_rl.runtime.transport.chunks import ChunkBuilder as Builder
        from robot_rl.runtime.transport.chunks import ingest_chunk as write

    spec = ObsSpec(17, {"front": (128, 128, 3), "wrist": (128, 128, 3)} if pixels else {})
    frames = np.random.default_rng(0).integers(0, 255, (8, 128, 128, 3), np.uint8)

    def obs(env: int, k: int) -> dict:
        return {"state": np.full(17, k + 1000 * env, np.float32),
                "pixels": {name: frames[(k + 3 * i) % 8] for i, name in enumerate(spec.cameras)}}

    builder, chunks, step = Builder(spec, 4, 64), [], [0, 0, 0, 0]
    for t in range(transitions):
        env = t % 4
        k = step[env]
        end = (k + 1) % 100 == 0
        builder.add(env, obs(env, k), np.zeros(4, np.float32), 0.0, False, end, obs(env, k + 1),
                    policy_version=1, episode_id=env, step=k)
        step[env] = 0 if end else k + 1
        if builder.full:
            chunks.append({name: a.copy() for name, a in builder.take().items()})
    replay = ReplayBuffer(spec, 4, ReplayConfig(online_capacity=transitions + 1000, demos_capacity=2,
                                                interventions_capacity=2))
    start = time.perf_counter()
    taken = sum(write(replay, chunk) for chunk in chunks)
    elapsed = time.perf_counter() - start
    # The floor: every byte of every chunk copied once into preallocated memory (one slice copy per array).
    rows = sum(len(c["valid"]) for c in chunks)
    dst = {name: np.empty((rows, *a.shape[1:]), a.dtype) for name, a in chunks[0].items()}
    for a in dst.values():
        a.fill(0)  # touch the pages first: the replay's are mapped up front too
    start, at = time.perf_counter(), 0
    for c in chunks:
        n = len(c["valid"])
        for name, a in c.items():
            dst[name][at:at + n] = a
        at += n
    floor_s = time.perf_counter() - start
    return {"per_s": taken / elapsed, "floor_per_s": taken / floor_s, "taken": taken,
            "rows": replay.partitions["online"].size, "robot_rl": str(Path(robot_rl.__file__).resolve().parent)}


def run_side(path: Path, pixels: bool, transitions: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(path), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    code = (f"import sys, json; sys.path.insert(0, {str(Path(__file__).parent)!r}); import intake_speed; "
            f"print(json.dumps(intake_speed.worker({pixels}, {transitions})))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=path, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(result["robot_rl"]) != path / "robot_rl":
        raise RuntimeError(f"the side at {path} imported robot_rl from {result['robot_rl']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rev = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    table = Table("Replay intake: transitions/s written into the replay from actor chunks (median of "
                  f"{args.rounds}, sides alternating)",
                  ["observation", "transitions", f"before ({rev}): one at a time", "now: one block write",
                   "now / before", "floor: every byte copied once", "now / floor"])
    figures = {"before": rev, "cases": {}}
    with tempfile.TemporaryDirectory(prefix="intake_before_") as tmp:
        worktree = Path(tmp) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), rev], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            for case, (pixels, transitions) in CASES.items():
                runs: dict[str, list[float]] = {"before": [], "now": [], "floor": []}
                for _ in range(args.rounds):
                    for side, path in (("before", worktree), ("now", ROOT)):
                        result = run_side(path, pixels, transitions)
                        runs[side].append(result["per_s"])
                        runs["floor"].append(result["floor_per_s"])
                before, now, floor = (statistics.median(runs[k]) for k in ("before", "now", "floor"))
                figures["cases"][case] = {"transitions": transitions, **{f"{k}_per_s": v for k, v in runs.items()},
                                          "ratio": now / before, "share_of_floor": now / floor}
                table.add(case, f"{transitions:,}", f"{before:,.0f}", f"{now:,.0f}", f"{now / before:.1f}x",
                          f"{floor:,.0f}", f"{now / floor:.0%}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, capture_output=True)
    print(f"wrote {write_result('intake_speed', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
