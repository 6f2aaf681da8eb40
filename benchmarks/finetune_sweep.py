"""A sweep of a fine-tuning method's recipe: one ``benchmarks/finetune.py`` run per (config, seed), many at once,
each config's agent fields set with ``--agent-set``; prints and saves every config's final success per seed.

    python benchmarks/finetune_sweep.py --sweep benchmarks/sweeps/residual_pickcolor.txt --parallel 15 \
        --time-limit 470 --runs-dir runs/sweep -- --base policies/pickcolor_os150 --task PickColor --demos 150 \
        --env-steps 10000 --eval-every 2000 --eval-episodes 30 --residual-scales 0.3 0.3 0.3 2.0 --device cuda

The sweep file has one config per line, ``NAME METHOD SEEDS [key=value ...]`` (SEEDS comma-separated; ``#`` starts
a comment). Everything after ``--`` goes to every run. Each run has one torch thread and starts in a fresh folder; a
run still going at ``--time-limit`` seconds is stopped (with every process it started) and reported with the
evaluations it reached (marked unfinished). On a GPU box (``--device cuda``: the learner on the GPU, env and base on
the CPU cores) 15 runs of 10k env steps with an evaluation every 2k steps end in about 7 minutes; on 2 CPU cores one
run takes about 35 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import Table, write_result
from finetune import METHODS, metric_rows

HERE = Path(__file__).resolve().parent


def read_sweep(path: str) -> list[dict]:
    """The configs of a sweep file: name, method, seeds and agent fields (``key=value`` as given)."""
    configs = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) < 3 or not all(s.isdigit() for s in parts[2].split(",")):
            raise SystemExit(f"{path}:{number}: expected NAME METHOD SEEDS [key=value ...], got {line!r}")
        fields = parts[3:]
        if parts[1] not in METHODS:
            raise SystemExit(f"{path}:{number}: unknown method {parts[1]!r} (methods: {', '.join(METHODS)})")
        if bad := [f for f in fields if "=" not in f]:
            raise SystemExit(f"{path}:{number}: agent fields are key=value, got {bad}")
        configs.append({"name": parts[0], "method": parts[1], "seeds": [int(s) for s in parts[2].split(",")],
                        "fields": fields})
    if len({c["name"] for c in configs}) != len(configs):
        raise SystemExit(f"{path}: config names must be unique")
    return configs


def run_record(folder: Path, log: Path) -> dict:
    """A run's evaluations (env step, success), its final success, the base's success on the same episodes and
    whether it finished: from its result line, else (a stopped run) from its metrics so far (in the run's own
    steps: a steering run's are chunks)."""
    text = log.read_text() if log.exists() else ""
    result = [json.loads(line[7:]) for line in text.splitlines() if line.startswith("RESULT ")]
    if result:
        curve = [(int(s), round(float(v), 4)) for s, v in result[-1]["curve"]]
    else:
        rows = [r for run in folder.iterdir() if run.is_dir() for r in metric_rows(run)]
        curve = [(int(r["step"]), round(float(r["eval/success_rate"]), 4)) for r in rows if "eval/success_rate" in r]
    exits = [line[5:] for line in text.splitlines() if line.startswith("EXIT ")]
    return {"curve": curve, "final": curve[-1][1] if curve else None, "finished": bool(result),
            "base": result[-1]["base"] if result else None, "exit": exits[-1] if exits else None}


def stop(proc: subprocess.Popen) -> None:
    """Ends a run and every process it started (a served run's policy server, actor and learner)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def launch(configs: list[dict], args: argparse.Namespace, common: list[str]) -> None:
    """Every (config, seed) as a ``finetune.py --child`` process in a fresh folder, ``--parallel`` at a time, each
    stopped at ``--time-limit`` seconds; an interrupted sweep stops its runs. A run's exit is the last line of its
    log (``EXIT <code>``, or ``EXIT stopped at the time limit``)."""
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "OMP_NUM_THREADS": "1"}
    jobs = [(c, s) for c in configs for s in c["seeds"]]
    running: list[tuple[subprocess.Popen, float, Path]] = []
    try:
        while jobs or running:
            while jobs and len(running) < args.parallel:
                config, seed = jobs.pop(0)
                folder = Path(args.runs_dir) / f"{config['name']}-{seed}"
                shutil.rmtree(folder, ignore_errors=True)  # a rerun starts over (a run refuses a used folder)
                folder.mkdir(parents=True)
                cmd = [sys.executable, str(HERE / "finetune.py"), *common, "--runs-dir", str(folder),
                       *(["--agent-set", *config["fields"]] if config["fields"] else []),
                       "--child", config["method"], str(seed)]
                with open(f"{folder}.log", "w") as log:
                    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
                running.append((proc, time.monotonic(), folder))
                print(f"started {folder.name}", flush=True)
            for item in list(running):
                proc, began, folder = item
                late = proc.poll() is None and time.monotonic() - began > args.time_limit
                if late:
                    stop(proc)
                if proc.poll() is not None:
                    running.remove(item)
                    end = "stopped at the time limit" if late else proc.returncode
                    with open(f"{folder}.log", "a") as log:
                        log.write(f"\nEXIT {end}\n")
                    print(f"ended {folder.name} (exit {end})", flush=True)
            time.sleep(1.0)
    finally:
        for proc, _, _ in running:
            stop(proc)


def final_cell(run: dict) -> str:
    """A run's final success (``*``: stopped before its last step), or how it ended without an evaluation."""
    if run["final"] is not None:
        return f"{run['final']:.2f}" + ("" if run["finished"] else "*")
    return "-" if run["exit"] in (None, "0", "stopped at the time limit") else f"failed (exit {run['exit']})"


def summary(configs: list[dict], runs_dir: str) -> tuple[dict, Table]:
    """Every config's runs (curves, finals) and the table of final success per seed ("-": no evaluation)."""
    table = Table("Final success per config (each seed's last evaluation; * = stopped before the last step)",
                  ["config", "method", "agent fields", "seeds", "final per seed", "mean", "first evaluation"])
    figures: dict = {"configs": []}
    for c in configs:
        runs = [run_record(Path(runs_dir) / f"{c['name']}-{s}", Path(runs_dir) / f"{c['name']}-{s}.log")
                for s in c["seeds"]]
        finals = [r["final"] for r in runs if r["final"] is not None]
        figures["configs"].append({**c, "runs": runs})
        table.add(c["name"], c["method"], " ".join(c["fields"]) or "(defaults)", ",".join(map(str, c["seeds"])),
                  " / ".join(final_cell(r) for r in runs),
                  f"{np.mean(finals):.2f}" if finals else "-",
                  " / ".join(f"{r['curve'][0][1]:.2f}" if r["curve"] else "-" for r in runs))
    return figures, table


def main() -> None:
    argv = sys.argv[1:]
    common = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", required=True, help="the sweep file (NAME METHOD SEEDS [key=value ...] per line)")
    parser.add_argument("--parallel", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--time-limit", type=float, default=3600.0, help="seconds a run may take before it is stopped")
    parser.add_argument("--runs-dir", default="runs/sweep")
    parser.add_argument("--collect-only", action="store_true", help="launch nothing: report the runs in --runs-dir")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(own)
    configs = read_sweep(args.sweep)
    if not args.collect_only:
        launch(configs, args, common)
    figures, table = summary(configs, args.runs_dir)  # the table prints as it fills
    name = "finetune_sweep_" + Path(args.sweep).stem
    print(f"results: {write_result(name, {**figures, 'common': common}, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
