"""The update-to-data ratio in every window of 250 env steps, and the policy lag, with the default runtime settings:
every bundled sim config and the bring-your-own-env guide's config, actor and learner as separate processes
(``robot-rl train``), each run cut to ``learning_starts`` + ``--steps`` env steps and otherwise as configured.

    MUJOCO_GL=egl .venv/bin/python benchmarks/utd_windows.py [--steps 1500] [--configs pendulum pickcube ...]
        [--out RESULT.json]

Per run, from ``metrics.jsonl``: ``utd/window`` at every log point (every 250 env steps) from ``learning_starts`` +
one window on (every whole window past ``learning_starts``), as a share of the target; ``actor/policy_lag_steps``
(env steps between a transition and the data the weights that acted on it were trained on), mean and max, against
2 x (chunk + publish interval) env steps.
"""

from __future__ import annotations

import argparse
import json
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

from robot_rl.training.config import RuntimeConfig  # noqa: E402

CONFIGS = ("pendulum", "halfcheetah", "pickcube", "pickcube_pixels_end_to_end", "drive", "byo_env")


def config_path(name: str, folder: Path) -> str:
    """A bundled config's name, or the guide's point_reach.yaml written into ``folder`` (``byo_env``)."""
    if name != "byo_env":
        return name
    from tests.envs.test_byo_guide import guide_files

    return str(guide_files(folder / "byo"))


def measure(name: str, steps: int, folder: Path) -> dict:
    import yaml

    from robot_rl.cli import resolve_config
    from robot_rl.training.config import TrainConfig

    path = config_path(name, folder)
    data = yaml.safe_load(resolve_config(path).read_text()) or {}
    learning_starts = int(data.get("learning_starts", TrainConfig.learning_starts))
    rt = RuntimeConfig(**data.get("runtime", {}))
    total = learning_starts + steps
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", path, "--name", name, "--runs-dir",
                           str(folder / "runs"), "--total-env-steps", str(total), "--no-progress"],
                          capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr[-1500:]}
    rows = [json.loads(line) for line in (folder / "runs" / name / "metrics.jsonl").read_text().splitlines()]
    target = next(r["utd/target"] for r in rows if "utd/target" in r)
    windows = [r["utd/window"] / target for r in rows
               if "utd/window" in r and r["step"] >= learning_starts + rt.utd_window
               and r["utd/window"] == r["utd/window"]]  # not NaN: a whole window past learning_starts
    lags = [(r["actor/policy_lag_steps"], r["actor/policy_lag_steps_max"]) for r in rows
            if "actor/policy_lag_steps_max" in r and r["step"] > learning_starts]
    return {"target": target, "bound": rt.update_lag_bound(), "windows": len(windows),
            "window_min": min(windows), "window_max": max(windows),
            "lag_mean": sum(m for m, _ in lags) / len(lags), "lag_max": max(x for _, x in lags),
            "lag_limit": 2 * (rt.chunk_steps + rt.publish_every_updates), "env_steps": total, "wall_s": wall}


def tables(result: dict) -> list[Table]:
    rt = RuntimeConfig()
    table = Table(f"Default runtime settings (lag bound min(chunk {rt.chunk_steps}, publish interval "
                  f"{rt.publish_every_updates}) = {rt.update_lag_bound()} env steps), actor and learner as separate "
                  f"processes, each run to learning_starts + {result['setup']['steps']} env steps",
                  ["config", "UTD", "windows of 250", "window ratio min / max (of the target)",
                   "policy lag mean / max (env steps)", "limit 2 x (chunk + publish)", "wall s"], echo=False)
    for name, r in result["runs"].items():
        if "error" in r:
            table.add(name, "-", "-", "failed: " + r["error"][-100:], "-", "-", "-")
            continue
        table.add(name, f"{r['target']:g}", str(r["windows"]), f"{r['window_min']:.2f} / {r['window_max']:.2f}",
                  f"{r['lag_mean']:.0f} / {r['lag_max']:.0f}", str(r["lag_limit"]), f"{r['wall_s']:.0f}")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1500, help="env steps past learning_starts per run")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="utd_windows_"))
    result: dict = {"runs": {}}
    for name in args.configs:
        result["runs"][name] = measure(name, args.steps, folder)
        print(name, json.dumps(result["runs"][name]), flush=True)
    result["setup"] = {"steps": args.steps, "configs": args.configs}
    print(f"results: {write_result('utd_windows', result, args.out, tables=tables(result))}")


if __name__ == "__main__":
    main()
