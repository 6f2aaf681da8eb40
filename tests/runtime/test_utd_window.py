"""The update-to-data ratio holds from the first update with default settings: the bundled pendulum config, actor
and learner as separate processes, shortened. Every logged window of 250 env steps past learning_starts + 250 is
within 25 % of the target, and the policy lag stays under two chunks plus publish intervals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from robot_rl.runtime.config import RuntimeConfig


@pytest.mark.timeout(600)
def test_the_ratio_holds_in_every_window_with_the_default_lag_bound(tmp_path) -> None:
    steps = 2000
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", "pendulum", "--name", "utd",
                           "--runs-dir", str(tmp_path), "--total-env-steps", str(steps), "--eval-every", "0",
                           "--checkpoint-every", "0", "--no-progress"], capture_output=True, text=True, timeout=550)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "utd" / "metrics.jsonl").read_text().splitlines()]
    rt = RuntimeConfig()
    assert rt.max_update_lag == -1 and rt.update_lag_bound() == min(rt.chunk_steps, rt.publish_every_updates)
    target = rows[0]["utd/target"]
    windows = [(r["step"], r["utd/window"]) for r in rows if "utd/window" in r and r["step"] >= 500 + 2 * 250]
    assert len(windows) >= 4, rows
    assert all(abs(v - target) <= 0.25 * target for _, v in windows), windows
    lags = [r["actor/policy_lag_steps_max"] for r in rows if "actor/policy_lag_steps_max" in r and r["step"] > 500]
    assert lags and max(lags) < 2 * (rt.chunk_steps + rt.publish_every_updates), lags
