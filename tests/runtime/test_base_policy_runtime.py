"""A base (generalist) policy through the real runtime: the small VLA executed by the actor process (agent
``base``), locally and behind `robot-rl serve-policy` with asynchronous, future-state-aware execution at 20 Hz;
the replay holds each step's instruction embedding, the base's proposal and its chunk index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from robot_rl.replay.store import load_buffer
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.text import make_text_encoder
from tests.policies.toy import TINY_ENV_KWARGS, served

CLI = [sys.executable, "-m", "robot_rl.cli"]
ENV_KWARGS = TINY_ENV_KWARGS


@pytest.fixture(scope="module")
def vla(tiny_vla):
    return tiny_vla


def train(tmp_path, base_path: str, *flags: str) -> tuple[subprocess.CompletedProcess, object]:
    proc = subprocess.run([*CLI, "train", "--env.id", "robot_rl/PickColor-v0", "--env.kwargs", json.dumps(ENV_KWARGS),
                           "--agent.name", "base", "--base-policy.path", base_path, "--total-env-steps", "240",
                           "--random-steps", "0", "--learning-starts", "0", "--eval-every", "0", "--eval-episodes", "2",
                           "--name", "b", "--runs-dir", str(tmp_path / "runs"), "--no-progress", *flags],
                          cwd=tmp_path, capture_output=True, text=True, timeout=400,
                          env={**os.environ, "MUJOCO_GL": "egl"})
    return proc, tmp_path / "runs" / "b"


def check_rows(run, chunk_length: int) -> np.ndarray:
    replay = load_buffer(latest_checkpoint(run) / "replay.zarr")
    online = replay.partitions["online"]
    a = {k: v[: online.size] for k, v in online.arrays.items()}
    valid = a["valid"]
    assert valid.sum() >= 200
    index = a["chunk_index"][valid]
    assert index.min() >= -1 and index.max() == chunk_length - 1
    held = index == -1
    # What ran is what the base proposed (a held step runs the hold action, which is also recorded).
    assert np.allclose(a["action"][valid], a["base_action"][valid])
    colours = {c: make_text_encoder("hash").encode(f"pick up the {c} cube") for c in ("red", "green", "blue")}
    instr = a["instruction"][valid]
    assert all(any(np.array_equal(row, e) for e in colours.values()) for row in instr)
    assert len({tuple(r) for r in instr}) >= 2  # episodes with different instructions
    return held


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_base_policy_runs_in_the_actor_and_its_proposals_reach_the_replay(vla, tmp_path):
    proc, run = train(tmp_path, str(vla))
    assert proc.returncode == 0, proc.stderr[-3000:]
    held = check_rows(run, 5)
    assert not held.any()  # sync execution in a flat-out sim never holds
    final = json.loads((run / "final_eval.json").read_text())
    assert 0.0 <= final["success_rate"] <= 1.0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_base_policy_behind_a_server_with_future_aware_async_execution_at_20hz(vla, tmp_path):
    with served(vla) as url:
        proc, run = train(tmp_path, url, "--runtime.control-hz", "20", "--execution.mode", "future",
                          "--base-policy.latency-s", "0.1", "--runtime.max-update-lag", "0")
        assert proc.returncode == 0, proc.stderr[-3000:]
    check_rows(run, 5)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    latency = [v for r in rows for k, v in r.items() if k.endswith("/base_inference_ms")]
    assert latency and min(latency) >= 100.0, latency  # the injected 100 ms, measured by the actor's executor


@pytest.mark.timeout(600)
def test_a_base_policy_that_keeps_failing_ends_train_with_one_line(vla, tmp_path):
    """The policy server goes away mid-run: the actor's executor gives up after its failures in a row, and train
    ends with exit code 1 and one line naming the base policy, no traceback and no restart spent on it."""
    with served(vla) as url:
        proc = subprocess.Popen([*CLI, "train", "--env.id", "robot_rl/PickColor-v0", "--env.kwargs",
                                 json.dumps(ENV_KWARGS), "--agent.name", "base", "--base-policy.path", url,
                                 "--total-env-steps", "100000", "--random-steps", "0", "--learning-starts", "0",
                                 "--eval-every", "0", "--name", "f", "--runs-dir", str(tmp_path / "runs"),
                                 "--no-progress"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "MUJOCO_GL": "egl"})
        status = tmp_path / "runs" / "f" / "status.json"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if status.is_file() and json.loads(status.read_text()).get("env_steps", 0) >= 50:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
    out, err = proc.communicate(timeout=300)  # the server is gone
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert "base policy kept failing" in last and "--resume" in last, err[-3000:]
    assert "restarting" not in err and "replacement" not in err, err[-3000:]
