"""RL -> generalist distillation (RLDG): the generalist's success on every task of its data before and after
re-training on a fine-tuned specialist's successful episodes.

    MUJOCO_GL=egl python benchmarks/distill.py --run RUN --datasets scripted:PickCube:5:0.5 scripted:Reach:30:0.2 \
        --demo-env-kwargs '{"object_state": true, "instruction": true}' --episodes 50 --steps 1000 --eval-episodes 50

RUN: a finished fine-tuning run (e.g. ``agent.name: residual``) on a local small VLA, the generalist. ``--datasets``
and ``--demo-env-kwargs``: the generalist's original data, as it was trained (its policy.json lists them). The
re-trained generalist goes to a temporary folder (``--out`` for the result file only).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from common import Table, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="the fine-tuning run")
    parser.add_argument("--datasets", nargs="+", required=True, help="the generalist's original data")
    parser.add_argument("--demo-env-kwargs", default='{"object_state": false, "instruction": true}')
    parser.add_argument("--episodes", type=int, default=50, help="successful specialist episodes to collect")
    parser.add_argument("--steps", type=int, default=1000, help="behaviour-cloning steps of the re-training")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--eval-episodes", type=int, default=50, help="per task, before and after")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    from robot_rl.vla.distill import DistillConfig, distill
    from robot_rl.vla.train import TrainBCConfig

    folder = tempfile.mkdtemp(prefix="distill_")
    train = TrainBCConfig(datasets=tuple(args.datasets), demo_env_kwargs=json.loads(args.demo_env_kwargs),
                          steps=args.steps, lr=args.lr, warmup_steps=50, eval_episodes=args.eval_episodes,
                          threads=args.threads, progress=False)
    start = time.perf_counter()
    summary = distill(DistillConfig(run=args.run, episodes=args.episodes, out=folder, train=train, progress=False))
    summary["minutes"] = round((time.perf_counter() - start) / 60, 1)
    summary["steps"], summary["lr"] = args.steps, args.lr
    table = Table(f"The generalist per task before and after distilling {args.episodes} specialist episodes "
                  f"({args.eval_episodes} evaluation episodes per task, the same on both sides)",
                  ["task", "before", "after", "change (points)"])
    for task, before in summary["before"].items():
        after = summary["after"].get(task, float("nan"))
        table.add(task, f"{before:.2f}", f"{after:.2f}", f"{100 * (after - before):+.0f}")
    print(json.dumps(summary, indent=1))
    print(f"results: {write_result('distill', summary, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
