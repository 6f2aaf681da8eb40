"""Human-in-the-loop benchmark: the same training job with and without the scripted human intervening.

    python benchmarks/interventions.py [--config pickcube] [--seeds 0 1 2] [--modes none scripted] \
        [--set total_env_steps=3000 ...]

Each run is a full ``robot-rl train CONFIG`` (actor and learner processes), one after the other (a 2-core
machine cannot run two fairly). Prints, per mode and seed: env steps at the first evaluation with >= 90 % success,
the final success rate, and the intervention rate of the episodes at the start, middle and end of training
(the scripted human takes over less as the policy learns). Run folders stay in --runs-dir for inspection.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import Table, write_result

ROOT = Path(__file__).resolve().parents[1]


def run(config: str, mode: str, seed: int, runs_dir: Path, sets: list[str]) -> dict:
    name = f"{Path(config).stem}-{mode}-s{seed}"
    cmd = [str(ROOT / ".venv/bin/robot-rl"), "train", config, "--seed", str(seed), "--name", name,
           "--runs-dir", str(runs_dir), "--no-progress", "--teleop.device", mode]
    for item in sets:
        key, _, value = item.partition("=")
        cmd += [f"--{key.replace('_', '-')}", value]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (runs_dir / name / "metrics.jsonl").read_text().splitlines()]
    evals = [(r["step"], r["eval/success_rate"]) for r in rows if "eval/success_rate" in r]
    rates = [(r["step"], r["train/episode_intervention_rate"]) for r in rows
             if "train/episode_intervention_rate" in r]
    to90 = next((s for s, v in evals if v >= 0.9), None)
    thirds = np.array_split(np.array([v for _, v in rates]), 3) if len(rates) >= 3 else []
    return {"mode": mode, "seed": seed, "to90": to90, "final": evals[-1][1] if evals else float("nan"),
            "rate": [float(t.mean()) for t in thirds], "wall": wall}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="pickcube")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--modes", nargs="+", default=["none", "scripted"])
    p.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "bench_interventions")
    p.add_argument("--set", dest="sets", nargs="*", default=[], help="config overrides field=value")
    p.add_argument("--out", default=None, help="result file (default: benchmarks/results/interventions.json)")
    args = p.parse_args()
    results = []
    for seed in args.seeds:
        for mode in args.modes:
            r = run(args.config, mode, seed, args.runs_dir, args.sets)
            results.append(r)
            rate = "/".join(f"{v:.2f}" for v in r["rate"]) or "-"
            print(f"{mode:>9} seed {seed}: 90 % at {r['to90']} env steps, final {r['final']:.2f}, "
                  f"intervention rate start/mid/end {rate}, {r['wall']:.0f} s", flush=True)
    overrides = f", {' '.join(args.sets)}" if args.sets else ""
    table = Table(f"{args.config}{overrides}: with and without the scripted human, {len(args.seeds)} seeds",
                  ["mode", "seeds", "env steps to 90 % (each seed)", "final success",
                   "intervention rate start/mid/end"])
    for mode in args.modes:
        rs = [r for r in results if r["mode"] == mode]
        steps = ", ".join(str(r["to90"]) if r["to90"] is not None else "not reached" for r in rs)
        final = np.mean([r["final"] for r in rs])
        rates = [r["rate"] for r in rs if r["rate"]]
        rate = "/".join(f"{v:.2f}" for v in np.mean(rates, axis=0)) if rates else "-"
        table.add(mode, len(rs), steps, f"{final:.2f}", rate)
    figures = {"config": args.config, "sets": args.sets, "runs": results}
    print(f"results: {write_result('interventions', figures, args.out, tables=[table])}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
