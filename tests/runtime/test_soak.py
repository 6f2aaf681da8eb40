"""The soak harness's 6-minute variant (benchmarks/soak.py; the 2-hour run is on the runtime benchmark page):
``robot-rl train pickcube`` with a fault drawn at random every 1-1.8 minutes, nobody watching. Every fault is
survived, no transition is delivered twice or goes missing, and the final policy is evaluated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1800)
def test_six_minutes_of_random_faults_lose_nothing(tmp_path):
    out = tmp_path / "soak.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--minutes", "6", "--config", "pickcube",
           "--fault-every", "1", "1.8", "--disk", "fsize", "--eval-episodes", "5", "--seed", "1",
           "--out", str(out), "--plot", str(tmp_path / "memory.png")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1700, cwd=ROOT,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())["figures"]
    faults = [f for f in result["faults"] if "skipped" not in f]
    assert len(faults) >= 3, result["faults"]
    assert all(f["survived"] for f in faults), faults
    assert result["unplanned_exits"] == 0
    d = result["delivery"]
    assert d["transitions"] > 1000 and d["duplicated"] == 0 and d["missing"] == 0, d
    assert d["counted_env_steps"] == d["transitions"], d
    assert "success_rate" in json.dumps(result["eval"]), result["eval"]
    assert (tmp_path / "memory.png").stat().st_size > 0
