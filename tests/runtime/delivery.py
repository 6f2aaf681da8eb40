"""Exactly-once checks on a run folder, shared by the fault tests and the soak benchmark.

Each transition an actor sends carries its actor life's unique episode id and its step in that episode. So in a
replay: a key (episode id, step) seen twice is a duplicate, and an episode whose steps are not 0..n-1 lost a
transition in its middle. A run that was stopped cleanly has nothing left in its spools: the checkpoint holds
everything the actors flushed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from robot_rl.replay.store import load_buffer
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.runtime.transport.names import run_key

CLI = [sys.executable, "-m", "robot_rl.cli"]


def replay_keys(run: Path) -> tuple[Counter, dict]:
    """(episode id, step) of every online transition in the latest checkpoint's replay, counted; and its counters."""
    from robot_rl.config import load_yaml
    from robot_rl.training.config import TrainConfig

    ckpt = latest_checkpoint(run)
    cfg = load_yaml(TrainConfig, run / "config.yaml")  # its capacities: the defaults would not fit pixel rows in RAM
    online = load_buffer(ckpt / "replay.zarr", cfg.replay).partitions["online"]
    a = {k: v[: online.size] for k, v in online.arrays.items()}
    valid = a["valid"]
    keys = Counter(zip(a["episode_id"][valid].tolist(), a["step"][valid].tolist()))
    return keys, json.loads((ckpt / "counters.json").read_text())


def delivery(run: Path) -> dict[str, int]:
    """What the latest checkpoint holds of the actors' transitions: how many, how many twice, how many episodes
    (actor-life episode ids) and how many of them miss transitions inside (``gaps``: the missing count)."""
    keys, counters = replay_keys(run)
    steps: dict[int, list[int]] = {}
    for ep, step in keys:
        steps.setdefault(ep, []).append(step)
    gap_eps = [ep for ep, s in steps.items() if sorted(s) != list(range(len(s)))]
    return {"transitions": sum(keys.values()), "unique": len(keys),
            "duplicated": sum(n - 1 for n in keys.values() if n > 1), "episodes": len(steps),
            "episodes_with_gaps": len(gap_eps), "missing": sum(max(steps[ep]) + 1 - len(steps[ep]) for ep in gap_eps),
            "counted_env_steps": int(counters["env_steps"])}


def assert_exactly_once(run: Path) -> int:
    """No transition twice, no gap inside any episode, the counters agree with the replay; returns the count."""
    d = delivery(run)
    assert d["duplicated"] == 0, d
    assert d["episodes_with_gaps"] == 0, d
    assert d["counted_env_steps"] == d["transitions"], d
    return d["transitions"]


def spooled_chunks(run: Path) -> int:
    return sum(1 for _ in (run / "spool").glob("*/*.safetensors")) if (run / "spool").is_dir() else 0


def shm_left(run: Path) -> list[str]:
    """This run's shared-memory segments still in /dev/shm."""
    return [p.name for p in Path("/dev/shm").glob(f"rrl_{run_key(run)}_*")]


def status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def start_train(*args: str | Path, log: Path) -> subprocess.Popen:
    """``robot-rl train ARGS`` in a session of its own (a kill of its process group is a power cut of that run
    only), stdout and stderr appended to ``log`` (not a terminal)."""
    with open(log, "ab") as out:
        return subprocess.Popen([*CLI, "train", *map(str, args)], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while not (got := predicate()):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"train exited ({proc.returncode}) before {what}: "
                                 f"{log.read_text()[-3000:] if log else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {log.read_text()[-3000:] if log else ''}")
        time.sleep(0.1)
    return got


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def episodes_of(run: Path) -> np.ndarray:
    keys, _ = replay_keys(run)
    return np.unique([ep for ep, _ in keys])


def random_actions(run: Path) -> int:
    """Online transitions of the latest checkpoint acted before any weights (policy version 0): the warm-up's
    random actions, over every actor life of the run."""
    from robot_rl.config import load_yaml
    from robot_rl.training.config import TrainConfig

    cfg = load_yaml(TrainConfig, run / "config.yaml")
    online = load_buffer(latest_checkpoint(run) / "replay.zarr", cfg.replay).partitions["online"]
    valid = online.arrays["valid"][: online.size]
    return int(np.count_nonzero(online.arrays["policy_version"][: online.size][valid] == 0))


def windows_after(run: Path, step: int, window: int = 250) -> list[tuple[int, float]]:
    """The logged windowed update-to-data ratios whose whole window lies after env step ``step`` (a resume)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["utd/window"]) for r in rows
            if "utd/window" in r and r["step"] >= step + window and r["utd/window"] == r["utd/window"]]


def assert_resumed_without_warmup(run: Path, random_steps: int, resumed_at: int, utd: float) -> None:
    """After a resume past the warm-up: the run's random actions are its first ``random_steps`` only, and every
    windowed update-to-data ratio after the resume is within 25 % of the target."""
    assert random_actions(run) == random_steps, (random_actions(run), random_steps)
    windows = windows_after(run, resumed_at)
    assert windows, "no full window after the resume"
    assert all(abs(v - utd) <= 0.25 * utd for _, v in windows), windows


def clear_shm(run: Path) -> None:
    """What a reboot does to the run's shared memory: every segment gone."""
    for path in Path("/dev/shm").glob(f"rrl_{run_key(run)}_*"):
        path.unlink(missing_ok=True)
