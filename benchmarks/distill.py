"""RL -> generalist distillation (RLDG): the generalist's success on every task of its data before and after
re-training on a fine-tuned specialist's successful episodes.

    MUJOCO_GL=egl python benchmarks/distill.py --run RUN --datasets scripted:PickCube:5:0.5 scripted:Reach:30:0.2 \
        --demo-env-kwargs '{"object_state": true, "instruction": true}' --episodes 50 --steps 1000 --eval-episodes 50

RUN: a finished fine-tuning run (e.g. ``agent.name: residual``) on a local small VLA, the generalist. ``--datasets``
and ``--demo-env-kwargs``: the generalist's original data, as it was trained (its policy.json lists them). The
re-trained generalist goes to a temporary folder (``--out`` for the result file only). ``--control`` also re-trains
the generalist from the same weights, for the same steps, on its original data alone: the difference between the
two re-trainings is what the specialist's episodes did, with the extra training itself taken out.
"""

from __future__ import annotations

import argparse
import dataclasses
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
    parser.add_argument("--control", action="store_true", help="also re-train on the original data alone")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    from robot_rl.vla.distill import DistillConfig, distill
    from robot_rl.vla.train import TrainBCConfig, train_bc

    folder = tempfile.mkdtemp(prefix="distill_")
    train = TrainBCConfig(datasets=tuple(args.datasets), demo_env_kwargs=json.loads(args.demo_env_kwargs),
                          steps=args.steps, lr=args.lr, warmup_steps=50, eval_episodes=args.eval_episodes,
                          threads=args.threads, progress=False)
    start = time.perf_counter()
    summary = distill(DistillConfig(run=args.run, episodes=args.episodes, out=folder, train=train, progress=False))
    summary["steps"], summary["lr"] = args.steps, args.lr
    columns = ["task", "before", "after", "change (points)"]
    if args.control:  # the same re-training without the specialist's episodes
        control = dataclasses.replace(train, init=summary["init"], out=os.path.join(folder, "control"))
        summary["control"] = {k: v["success_rate"] for k, v in train_bc(control)["tasks"].items()}
        columns += ["control: original data only", "after vs control (points)"]
    summary["minutes"] = round((time.perf_counter() - start) / 60, 1)
    table = Table(f"The generalist per task before and after distilling {args.episodes} specialist episodes "
                  f"({args.eval_episodes} evaluation episodes per task, the same on every side)", columns)
    for task, before in summary["before"].items():
        after = summary["after"].get(task, float("nan"))
        row = [task, f"{before:.2f}", f"{after:.2f}", f"{100 * (after - before):+.0f}"]
        if args.control:
            ctrl = summary["control"].get(task, float("nan"))
            row += [f"{ctrl:.2f}", f"{100 * (after - ctrl):+.0f}"]
        table.add(*row)
    print(json.dumps(summary, indent=1))
    print(f"results: {write_result('distill', summary, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
