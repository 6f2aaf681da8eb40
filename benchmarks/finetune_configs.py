"""The bundled fine-tuning configs run as a user runs them, beside the results page's figure for each recipe.

    MUJOCO_GL=egl python benchmarks/finetune_configs.py [--configs NAME ...] [--seed 0] [--runs-dir runs] [--out FILE]

For each config: its base is trained by the command in the config's ``base_policy.made_by`` (skipped when the base
folder holds a trained policy), then ``robot-rl train <config> --name <config>_s<seed>`` runs (skipped when the run
folder holds its final evaluation), both from the repository root, one after the other. The table gives the base's
own evaluation (train-bc's, 50 episodes), the run's evaluations (30 episodes each) and its final one, beside the
page's IQM over seeds with its 95 % interval: a config reproduces its recipe when its final success lies in that
interval.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml
from common import Table, write_result
from finetune import metric_rows
from finetune_tables import summarise

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "robot_rl" / "configs"
PAGE_RESULTS = {  # config -> the results file of its recipe on docs/benchmarks/generalist-policies.md
    "finetune_pickcolor_ibrl": "finetune_pickcolor_offset150_ibrl_margin_eval",
    "finetune_peginsert_residual": "finetune_peginsert_offset_residual",
    "finetune_pickcube_residual": "finetune_pickcube",
}


def _run(command: list[str]) -> None:
    print("+", shlex.join(command), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def _robot_rl() -> str:
    """The ``robot-rl`` command of this interpreter's environment."""
    return str(Path(sys.executable).with_name("robot-rl"))


def run_config(name: str, seed: int, runs_dir: Path) -> Path:
    """Trains the config's base if it is missing, then the config; returns the run folder."""
    config = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    base = ROOT / config["base_policy"]["path"]
    if not (base / "eval.json").is_file():
        made_by = shlex.split(config["base_policy"]["made_by"])
        _run([_robot_rl(), *made_by[1:]])
    run = runs_dir / f"{name}_s{seed}"
    if not (run / "final_eval.json").is_file():
        _run([_robot_rl(), "train", name, "--seed", str(seed), "--runs-dir", str(runs_dir), "--name", run.name])
    return run


def run_figures(name: str, run: Path, seed: int) -> dict:
    """The run's figures as the page's recipes have them (``finetune_tables.summarise`` of this one run, its base
    train-bc's evaluation of the task), beside the page's figures of the recipe."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    task = config["env"]["id"].split("/")[-1]
    base_eval = json.loads((ROOT / config["base_policy"]["path"] / "eval.json").read_text())["tasks"][task]
    curve = [(r["step"], r["eval/success_rate"]) for r in metric_rows(run) if "eval/success_rate" in r]
    final = json.loads((run / "final_eval.json").read_text())["success_rate"]
    wall_s = (run / "final_eval.json").stat().st_mtime - (run / "config.yaml").stat().st_mtime
    ours = summarise(name, [{"final": final, "base": base_eval["success_rate"], "curve": curve, "wall_s": wall_s}],
                     [seed], int(config["eval_every"]))
    page = json.loads((Path(__file__).parent / "results" / f"{PAGE_RESULTS[name]}.json").read_text())
    method = page["figures"]["methods"][0]
    lo, hi = method["final_ci"]
    return {**ours, "config": name, "run": str(run), "task": task,
            "base_ci": [base_eval["success_ci_low"], base_eval["success_ci_high"]], "page_iqm": method["final_iqm"],
            "page_ci": [lo, hi], "page_base": method["base_mean"], "reproduced": lo - 1e-9 <= final <= hi + 1e-9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=list(PAGE_RESULTS), choices=list(PAGE_RESULTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs-dir", default="runs", help="parent of the run folders (relative to the repository)")
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/finetune_configs.json)")
    args = parser.parse_args()
    runs_dir = ROOT / args.runs_dir
    start = time.monotonic()
    results = [run_figures(name, run_config(name, args.seed, runs_dir), args.seed) for name in args.configs]
    table = Table(f"The bundled fine-tuning configs, seed {args.seed}, beside their recipes' page figures",
                  ["config", "base (50 episodes)", "evaluations every 1k env steps (30 episodes)", "final",
                   "page: base, final IQM (95 % CI)", "within the page's CI", "env steps to 90 %",
                   "worst evaluation after 2k steps vs base", "minutes"])
    for r in results:
        lo, hi = r["page_ci"]
        to90 = r["steps_to_90"][0]
        table.add(f"`{r['config']}`", f"{r['bases'][0]:.2f}", " ".join(f"{v:.2f}" for _, v in r["curves"][0]),
                  f"{r['finals'][0]:.2f}", f"{r['page_base']:.2f}, {r['page_iqm']:.2f} ({lo:.2f}-{hi:.2f})",
                  "yes" if r["reproduced"] else "no", "-" if to90 is None else to90, f"{r['worst_drop'][0]:+.2f}",
                  r["wall_min"][0])
    path = write_result("finetune_configs", {"seed": args.seed, "runs": results,
                                             "wall_s": round(time.monotonic() - start, 1)}, args.out, [table])
    print(f"results: {path}")


if __name__ == "__main__":
    main()
