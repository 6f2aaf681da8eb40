"""The update-to-data ratio holds from the first update with default settings: the bundled pendulum config, actor
and learner as separate processes, shortened. Every logged window of 250 env steps past learning_starts + 250 is
within 25 % of the target, and the policy lag stays under two chunks plus publish intervals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from robot_rl.training.config import RuntimeConfig


@pytest.mark.timeout(600)
def test_the_ratio_holds_in_every_window_with_the_default_lag_bound(tmp_path) -> None:
    steps = 2000
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", "pendulum", "--name", "utd",
                           "--runs-dir", str(tmp_path), "--total-env-steps", str(steps), "--eval-every", "0",
                           "--checkpoint-every", "0", "--no-progress"], capture_output=True, text=True, timeout=550)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cannot hold the update-to-data ratio" not in proc.stderr  # the sim actor waits for the learner
    rows = [json.loads(line) for line in (tmp_path / "utd" / "metrics.jsonl").read_text().splitlines()]
    rt = RuntimeConfig()
    assert rt.max_update_lag == -1 and rt.update_lag_bound() == min(rt.chunk_steps, rt.publish_every_updates)
    target = rows[0]["utd/target"]
    windows = [(r["step"], r["utd/window"]) for r in rows
               if "utd/window" in r and r["step"] >= 500 + 250 and r["utd/window"] == r["utd/window"]]
    assert len(windows) >= 4, rows
    assert all(abs(v - target) <= 0.25 * target for _, v in windows), windows
    lags = [r["actor/policy_lag_steps_max"] for r in rows if "actor/policy_lag_steps_max" in r and r["step"] > 500]
    assert lags and max(lags) < 2 * (rt.chunk_steps + rt.publish_every_updates), lags
    # the progress line shows the windowed ratio and the lag
    from robot_rl.runtime.status_line import status_line

    line = status_line(tmp_path / "utd")
    assert line.startswith("updates ") and "| utd 2." in line and " steps" in line, line


@pytest.mark.timeout(400)
def test_a_never_blocked_actor_is_told_once_when_the_learner_cannot_hold_the_ratio(tmp_path) -> None:
    """max_update_lag 0 (a robot's setting) with a flat-out sim actor: the learner falls behind and says so once,
    with the rate it holds; the run still ends with every update it owes."""
    from tests.runtime.test_processes import tiny, train_cli

    cfg = tiny(tmp_path, "never_blocked", control_hz=0.0, max_update_lag=0)
    proc = train_cli(cfg, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "cannot hold the update-to-data ratio" in line]
    assert len(said) == 1 and "gradient steps/s" in said[0] and "holds about" in said[0], proc.stderr[-3000:]


@pytest.mark.timeout(400)
def test_a_robot_actor_that_catches_up_between_episodes_keeps_the_owed_updates_within_one_episode(tmp_path) -> None:
    """max_update_lag 0 with runtime.catch_up_between_episodes: a flat-out actor runs each 200-step Pendulum episode
    through, then waits at the reset until the learner caught up; so the updates owed never exceed one episode's
    worth (plus a chunk in flight), where a never-blocked actor leaves the learner a whole run behind."""
    from tests.runtime.test_processes import logged, tiny, train_cli

    cfg = tiny(tmp_path, "catch_up", control_hz=0.0, max_update_lag=0, catch_up_between_episodes=True)
    proc = train_cli(cfg, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cannot hold the update-to-data ratio" not in proc.stderr
    episode, utd, chunk = 200, cfg.agent.utd, cfg.runtime.chunk_steps
    owed = [v for _, v in logged(tmp_path / cfg.name, "utd/owed_updates")]
    assert owed and max(owed) <= utd * (episode + 2 * chunk), owed
    rows = [json.loads(line) for line in (tmp_path / cfg.name / "metrics.jsonl").read_text().splitlines()]
    paused = [v for r in rows for k, v in r.items() if k.startswith("actor/") and k.endswith("/paused_s")]
    assert paused and max(paused) > 0, paused  # it did wait at the resets
