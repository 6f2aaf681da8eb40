"""The same IBRL policy weights evaluated under different choices between the base's proposal and the actor's
action, on the same episodes: how much of a run's success is the choice's and how much the actor's.

    python benchmarks/ibrl_choice.py runs/ft_pick_ibrl_chunk/ibrl-{0,1,2}@{3000,4000} --episodes 30

Each policy is ``RUN_DIR`` (its latest checkpoint), ``RUN_DIR@STEPS`` (the first policy the run kept at or after
that many env steps: ``finetune.py --checkpoint-every``) or ``RUN_DIR@FILE`` (a ``policy.safetensors``). Modes:
``chunk`` (the choice made at each chunk's first step and held), ``step`` (a choice every step), ``actor`` (the
actor's action on every step), ``base`` (the base alone). Every mode runs the run's own evaluation
(deterministic, chunks executed synchronously) on episodes seeded ``--seed + i``; ``--margin`` sets the
choices' ``agent.choice_margin``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
from common import Table, write_result

MODES = ("chunk", "step", "actor", "base")


def evaluate(policy: str, modes: list[str], episodes: int, seed: int, margin: float) -> dict[str, float]:
    """Success rate per mode of one saved policy."""
    from safetensors.torch import load_file

    from robot_rl.training.evaluation import load_run, rollout

    run, file = policy_file(policy)
    _, env, agent, composed = load_run(run)
    if file:
        agent.load_policy_state(load_file(file))
    out = {}
    try:
        for mode in modes:
            agent.cfg = dataclasses.replace(agent.cfg, choice_per_chunk=mode == "chunk", choice_margin=margin)
            agent.acting_state.clear()
            agent._actor_alone.fill_(mode == "actor")  # the handover's switch, whatever the weights say
            acting = composed.base if mode == "base" else composed
            t0 = time.perf_counter()
            out[mode] = float(np.mean(rollout(acting, env, episodes, seed)["successes"]))
            print(f"{policy} {mode}: {out[mode]:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    finally:
        composed.close()
        env.close()
    return out


def policy_file(policy: str) -> tuple[str, str]:
    """``(run folder, policy file or "")``; ``RUN_DIR@STEPS`` names the first kept policy at or after STEPS."""
    run, _, file = policy.partition("@")
    if file.isdigit():
        kept = sorted((Path(run) / "checkpoints" / "policies").glob("*.safetensors"))
        after = [p for p in kept if int(p.stem) >= int(file)]
        if not after:
            raise SystemExit(f"{run}: no kept policy at or after {file} env steps (finetune.py --checkpoint-every)")
        file = str(after[0])
    return run, file


def label(policy: str) -> str:
    """``<run folder>`` or ``<run folder> at <env steps>`` for a kept policy named by its checkpoint."""
    run, file = policy_file(policy)
    name = Path(run).name
    stem = Path(file).stem
    return f"{name} at {int(stem)}" if stem.isdigit() else f"{name} {file}".strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("policies", nargs="+", help="RUN_DIR or RUN_DIR@POLICY_FILE of ibrl runs")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=["chunk", "step", "actor"])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=10_000, help="episode i resets with seed + i")
    parser.add_argument("--margin", type=float, default=0.0,
                        help="agent.choice_margin for the chunk and step choices (the critics' units)")
    parser.add_argument("--out", default=None, help="write the figures to this result file")
    args = parser.parse_args()
    margin = f", choice margin {args.margin:g}" if args.margin else ""
    table = Table(f"Success on {args.episodes} evaluation episodes by how the action is chosen (same weights{margin})",
                  ["policy", *args.modes])
    rows = []
    for policy in args.policies:
        rows.append({"policy": policy, **evaluate(policy, args.modes, args.episodes, args.seed, args.margin)})
        table.add(label(policy), *(f"{rows[-1][m]:.2f}" for m in args.modes))
    if args.out:
        figures = {"episodes": args.episodes, "modes": args.modes, "margin": args.margin, "rows": rows}
        print(f"results: {write_result('ibrl_choice', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
