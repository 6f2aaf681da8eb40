"""Learner speed of two checkouts side by side, in one run: the same learners built from checkout A and from
checkout B (e.g. before and after a refactor), timed in interleaved rounds.

    python benchmarks/learner_speed_checkouts.py A_DIR B_DIR [--labels before after] [--seconds 24] [--rounds 8]
                                                 [--threads 1] [--clock cpu] [--out FILE] [--note TEXT]

Rows: SAC with 2 LayerNorm critics at UTD 1 (the default hand-derived gradients, and autograd), the full RLPD
config (10 LayerNorm critics, UTD 20) and the residual agent's defaults (10 critics, UTD 20, n-step samples with the
base's proposals, the actor and its BC term trained from the first update); batch 256, obs 17, action 6, 256x256
networks, as benchmarks/learner_speed.py. "updates/s" counts critic updates.

Each checkout's learners live in a worker process of their own with that checkout's ``robot_rl`` first on the path;
the parent has the workers time one row at a time, alternating A and B, each for ``seconds / rounds`` per row and
round, so a busy machine slows both alike. The table reports each row's median rate per checkout and the median over
rounds of the B/A ratio within a round (and its range). ``--clock cpu`` divides by the worker's CPU time per thread
(at ``--threads 1`` on a shared machine: the work itself). Checkout paths are recorded by label and commit only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OBS_DIM, ACT_DIM, BATCH = 17, 6, 256
ROWS = ("SAC, 2 LayerNorm critics, UTD 1", "SAC, 2 LayerNorm critics, UTD 1, autograd",
        "RLPD: SAC, 10 LayerNorm critics, UTD 20", "residual: 10 critics, UTD 20, n-step 3")


# ------------------------------------------------------------------- worker side (a checkout's robot_rl)
def batch(utd: int, rng: np.random.Generator, base: bool) -> dict:
    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)
    out = {"obs": {"state": f(utd, BATCH, OBS_DIM)}, "next_obs": {"state": f(utd, BATCH, OBS_DIM)},
           "action": rng.uniform(-1, 1, (utd, BATCH, ACT_DIM)).astype(np.float32), "reward": f(utd, BATCH),
           "terminated": np.zeros((utd, BATCH), bool)}
    if base:  # what an n-step sample of a run on a base policy carries; a quarter of its rows demos
        out.update(base_action=rng.uniform(-1, 1, (utd, BATCH, ACT_DIM)).astype(np.float32),
                   next_base_action=rng.uniform(-1, 1, (utd, BATCH, ACT_DIM)).astype(np.float32),
                   chunk_index=rng.integers(0, 16, (utd, BATCH)), next_chunk_index=rng.integers(0, 16, (utd, BATCH)),
                   discount=np.full((utd, BATCH), 0.99 ** 3, np.float32),
                   source=(rng.random((utd, BATCH)) < 0.25).astype(np.uint8), intervened=np.zeros((utd, BATCH), bool))
    return out


def learners() -> dict:
    """Row -> (a callable making one ``update``, critic updates per call)."""
    from robot_rl.agents import SACAgent, SACConfig
    from robot_rl.agents.residual import ResidualAgent
    from robot_rl.agents.residual_config import ResidualConfig
    from robot_rl.spaces import ObsSpec

    sac = dict(num_critics=2, utd=1)
    configs = {ROWS[0]: (SACAgent, SACConfig(**sac)), ROWS[1]: (SACAgent, SACConfig(**sac, manual_grad=False)),
               ROWS[2]: (SACAgent, SACConfig(utd=20)),
               ROWS[3]: (ResidualAgent, ResidualConfig(critic_warmup_updates=0))}
    out = {}
    for name, (cls, cfg) in configs.items():
        agent = cls(ObsSpec(OBS_DIM), ACT_DIM, cfg)
        rng = np.random.default_rng(0)
        batches = [batch(cfg.utd, rng, cls is ResidualAgent) for _ in range(4)]
        for i in range(3):  # warm-up: first-call allocations, the optimizer's state
            agent.update(batches[i % 4])
        count = iter(range(1 << 62))
        out[name] = ((lambda agent=agent, batches=batches, count=count: agent.update(batches[next(count) % 4])),
                     cfg.utd)
    return out


def worker(threads: int, clock: str) -> None:
    """Answers ``{"row", "seconds"}`` lines on stdin with ``{"rate"}`` lines: critic updates per second of that row."""
    import torch

    torch.set_num_threads(threads)
    rows = learners()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        step, per_call = rows[ask["row"]]
        n, start, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - start < ask["seconds"]:
            step()
            n += per_call
        elapsed = (time.process_time() - cpu) / threads if clock == "cpu" else time.perf_counter() - start
        print(json.dumps({"rate": n / elapsed}), flush=True)


# ------------------------------------------------------------------- parent side
class Worker:
    def __init__(self, checkout: Path, threads: int, clock: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", "--threads", str(threads),
                                      "--clock", clock], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env, cwd=checkout)
        self.ask(None)

    def ask(self, message: dict | None) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if message is not None:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"worker exited with {self.proc.wait()}")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def git_commit(path: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=path, capture_output=True, text=True)
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="*", type=Path, help="A_DIR B_DIR: the two checkouts' roots")
    parser.add_argument("--labels", nargs=2, default=("A", "B"), help="names of the two checkouts in the table")
    parser.add_argument("--seconds", type=float, default=24.0, help="total timing per row and checkout")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved timing rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in each worker")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="cpu", help="time base of the rates")
    parser.add_argument("--out", default=None,
                        help="result file (default: benchmarks/results/learner_speed_checkouts.json)")
    parser.add_argument("--note", default="", help="a note on the machine for the record (e.g. what lscpu says)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.threads, args.clock)
        return
    if len(args.checkouts) != 2:
        parser.error("give two checkouts: A_DIR B_DIR")
    from common import Table, write_result

    a, b = (p.resolve() for p in args.checkouts)
    commits = [git_commit(a), git_commit(b)]
    workers = [Worker(a, args.threads, args.clock), Worker(b, args.threads, args.clock)]
    rates: dict[str, list[list[float]]] = {row: [[], []] for row in ROWS}
    window = args.seconds / args.rounds
    try:
        for r in range(args.rounds):
            for row in ROWS:
                order = (0, 1) if r % 2 == 0 else (1, 0)  # who goes first alternates too
                for i in order:
                    rates[row][i].append(workers[i].ask({"row": row, "seconds": window})["rate"])
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        for w in workers:
            w.close()
    la, lb = args.labels
    table = Table(f"Critic updates/s, {la} ({commits[0]}) vs {lb} ({commits[1]}): batch {BATCH}, obs {OBS_DIM}, action "
                  f"{ACT_DIM}, 256x256 networks, {args.threads} thread(s), {args.clock} clock; {args.rounds} "
                  f"interleaved rounds of {window:.1f} s per row and checkout",
                  ["learner", f"{la} updates/s", f"{lb} updates/s", f"{lb} / {la} (range over rounds)"],
                  notes=f"The ratio is the median over rounds of {lb}'s rate divided by {la}'s in the same round.")
    for row in ROWS:
        ra, rb = (np.array(x) for x in rates[row])
        ratio = rb / ra
        table.add(row, f"{np.median(ra):.1f}", f"{np.median(rb):.1f}",
                  f"{np.median(ratio):.3f} ({ratio.min():.3f}-{ratio.max():.3f})")
    sys.argv = [sys.argv[0], *[{str(p): f"<{label}>" for p, label in zip(args.checkouts, args.labels)}.get(x, x)
                               for x in sys.argv[1:]]]  # the record names the checkouts, not this machine's paths
    figures = {"checkouts": {la: commits[0], lb: commits[1]}, "rates": {row: dict(zip(args.labels, rates[row]))
                                                                          for row in ROWS}}
    path = write_result("learner_speed_checkouts", figures, args.out, tables=[table])
    if args.note:
        record = json.loads(path.read_text())
        record["machine"]["note"] = args.note
        path.write_text(json.dumps(record, indent=1))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
