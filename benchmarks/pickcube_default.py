"""A bundled PickCube job over seeds (the default one, or another recipe on the same task and data): eval success
every 500 env steps, env steps and learner time to >= 90 %, and the whole job's wall time.

    MUJOCO_GL=egl .venv/bin/python benchmarks/pickcube_default.py [--config pickcube] [--seeds 0 1 2] [--steps 3000]
        [--out RESULT.json] [TRAIN FLAGS, e.g. --runtime.control-hz 10]

Each seed is ``robot-rl train CONFIG --seed S --total-env-steps 3000`` (actor and learner as separate processes,
20 deterministic eval episodes every 500 env steps); figures from its ``metrics.jsonl``. The result is
``pickcube_default`` for the default job, ``<config>`` for another.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import Table, write_result  # noqa: E402

from robot_rl.cli import resolve_config  # noqa: E402
from robot_rl.config import parse  # noqa: E402
from robot_rl.training.config import TrainConfig  # noqa: E402


def run_seed(config: str, seed: int, steps: int, folder: Path, extra: list[str]) -> dict:
    name = f"{config}_s{seed}"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", config, "--seed", str(seed),
                           "--total-env-steps", str(steps), "--name", name, "--runs-dir", str(folder),
                           "--no-progress", *extra], capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr[-1500:]}
    rows = [json.loads(line) for line in (folder / name / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/success_rate" in r]
    windows = [r["utd/window"] for r in rows if not math.isnan(r.get("utd/window", math.nan))]
    first = next((r for r in evals if r["eval/success_rate"] >= 0.9), None)
    return {"success": {r["step"]: r["eval/success_rate"] for r in evals}, "wall_s": wall, "utd_windows": windows,
            "to_90": None if first is None else {"env_steps": first["step"], "updates": first["eval/updates"],
                                                 "learner_s": first["eval/learner_wall_s"],
                                                 "learner_eval_s": first.get("eval/learner_eval_s")}}


def tables(result: dict) -> list[Table]:
    steps = result["setup"]["steps"]
    marks = list(range(500, steps + 1, 500))
    config = result["setup"].get("config", "pickcube")
    kind = "Pixel PickCube (cameras and proprioception)" if "pixels" in config else "State-based PickCube"
    episodes = result["setup"].get("eval_episodes", 20)
    flags = "".join(f" {f}" for f in result["setup"].get("train_flags", []))
    table = Table(f"{kind}, `robot-rl train {config}{flags}`; {episodes} deterministic eval episodes every 500 env "
                  "steps",
                  ["seed", "eval success at " + " / ".join(str(m) for m in marks) + " env steps",
                   "env steps to >= 90 %", "learner time to >= 90 % (of which evaluating)",
                   f"whole job ({steps} steps)", "UTD per 250-step window (min-max)"], echo=False)
    for seed, r in result["seeds"].items():
        if "error" in r:
            table.add(seed, "failed: " + r["error"][-100:], "-", "-", "-", "-")
            continue
        by_mark = {int(float(k)) // 500 * 500: v for k, v in r["success"].items()}
        line = " / ".join(f"{100 * by_mark[m]:.0f}" if m in by_mark else "-" for m in marks) + " %"
        t = r["to_90"]
        table.add(seed, line, "not reached" if t is None else f"{t['env_steps']} ({t['updates']:.0f} updates)",
                  "-" if t is None else f"{t['learner_s']:.0f} s" + (
                      f" ({t['learner_eval_s']:.0f} s)" if t.get("learner_eval_s") is not None else ""),
                  f"{r['wall_s'] // 60:.0f} min {r['wall_s'] % 60:02.0f} s",
                  f"{min(w):.2f}-{max(w):.2f} ({len(w)})" if (w := r.get("utd_windows")) else "-")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="pickcube", help="a bundled config on PickCube (pickcube_wsrl, ...)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--out", default=None)
    args, extra = parser.parse_known_args()  # other flags go to robot-rl train (--runtime.control-hz 10: 10 Hz)
    folder = Path(tempfile.mkdtemp(prefix=f"{args.config}_"))
    result: dict = {"seeds": {}}
    for seed in args.seeds:
        result["seeds"][str(seed)] = run_seed(args.config, seed, args.steps, folder, extra)
        print(seed, json.dumps(result["seeds"][str(seed)]), flush=True)
    run = parse(TrainConfig, resolve_config(args.config), [])
    result["setup"] = {"seeds": args.seeds, "steps": args.steps, "config": args.config,
                       "eval_episodes": run.eval_episodes, "train_flags": extra}
    name = "pickcube_default" if args.config == "pickcube" else args.config
    print(f"results: {write_result(name, result, args.out, tables=tables(result))}")


if __name__ == "__main__":
    main()
