"""The soak harness's 1-minute variant (benchmarks/soak.py; the 2-hour run is on the runtime benchmark page):
``robot-rl train pickcube`` with a fault drawn at random every 0.3-0.5 minute (at least 3 faults, however slowly the
machine recovers), nobody watching. Every fault is
survived, no transition is delivered twice or goes missing, no resume repeats the warm-up's random actions, the
update-to-data ratio holds after each fault, the final policy is evaluated; the harness writes only to its folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=ROOT).stdout


# serial: a one-minute run yields what the cores allow; beside a test on the other worker it made 980 transitions
@pytest.mark.serial
@pytest.mark.timeout(1500)
def test_a_minute_of_random_faults_lose_nothing_and_change_no_behaviour(tmp_path):
    folder, temp = tmp_path / "soak", set(Path(tempfile.gettempdir()).glob("soak*"))
    before = _git_status()
    cmd = [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--minutes", "1", "--config", "pickcube",
           "--fault-every", "0.3", "0.5", "--min-faults", "3", "--disk", "fsize", "--eval-episodes", "5", "--seed", "1",
           "--folder", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1400, cwd=ROOT,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((folder / "soak.json").read_text())["figures"]
    faults = [f for f in result["faults"] if "skipped" not in f]
    assert len(faults) >= 3, result["faults"]
    assert all(f["survived"] for f in faults), faults
    assert result["unplanned_exits"] == 0
    d = result["delivery"]
    assert d["transitions"] > 1000 and d["duplicated"] == 0 and d["missing"] == 0, d
    assert d["counted_env_steps"] == d["transitions"], d
    b = result["behaviour"]
    assert b["random_actions_after_warmup"] == 0, b
    assert all(f["utd_ok"] for f in b["after_faults"] if f["utd_windows"]), b["after_faults"]
    assert "success_rate" in json.dumps(result["eval"]), result["eval"]
    assert (folder / "soak_memory.png").stat().st_size > 0 and (folder / "train.log").is_file()
    assert _git_status() == before  # the checkout's results and pictures untouched
    assert set(Path(tempfile.gettempdir()).glob("soak*")) == temp  # and no temporary folder left
