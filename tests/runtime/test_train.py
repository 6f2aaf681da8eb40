"""The training loop end to end on a real gymnasium env: learning, run folder, checkpoints, resume, CLI.

These run actor and learner in one process (``runtime.processes: false``) where the test is about learning or
bookkeeping; tests/runtime/test_processes.py covers the separate processes.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from robot_rl.config import ConfigError, load_yaml, parse, replace
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.supervisor import train
from robot_rl.training.config import TrainConfig
from robot_rl.utils.state_io import load_state


def small_config(tmp_path, **overrides) -> TrainConfig:
    cfg = TrainConfig(name="t", runs_dir=str(tmp_path), total_env_steps=400, random_steps=100, learning_starts=100,
                      eval_every=0, eval_episodes=1, checkpoint_every=200, log_every=50, progress=False)
    return replace(cfg, {"agent.num_critics": 3, "agent.utd": 2, "agent.batch_size": 32, "agent.hidden_dims": (32, 32),
                         "runtime.processes": False, **overrides})


@pytest.mark.benchmark
def test_pendulum_learns_beyond_random(tmp_path):
    """Pendulum-v1: random policy scores about -1200; SAC gets above -400 within 3000 steps. A learning run (about
    2 min on one core), so out of the default suite: ``pytest -m benchmark``."""
    cfg = TrainConfig(name="learn", runs_dir=str(tmp_path), total_env_steps=3000, random_steps=300,
                      learning_starts=300, eval_every=0, eval_episodes=5, checkpoint_every=0, progress=False)
    cfg = replace(cfg, {"agent.num_critics": 3, "agent.utd": 2, "runtime.processes": False})
    _, result = train(cfg)
    assert result["return_mean"] > -400, result
    run = tmp_path / "learn"
    for name in ("config.yaml", "metrics.jsonl", "learning_curve.png", "final_eval.json"):
        assert (run / name).is_file(), name
    assert list((run / "tb").iterdir()), "no TensorBoard events"
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    utd = [m["utd/actual"] for m in logged if "utd/actual" in m and m["step"] > 1000]
    assert utd and all(abs(u - 2) < 0.2 for u in utd), utd


def test_run_folder_checkpoint_and_resume_restore_everything(tmp_path):
    run, _ = train(small_config(tmp_path))
    ckpt = latest_checkpoint(run)
    assert ckpt.name == f"{400:010d}"
    counters = json.loads((ckpt / "counters.json").read_text())
    assert counters["env_steps"] == 400 and counters["updates"] == 300
    assert sum(counters["ingested"].values()) > 0
    state = load_state(ckpt / "agent.safetensors")
    assert state["update_step"] == 300

    resumed = Learner(small_config(tmp_path), run, resume=True)
    try:
        assert resumed.counters.env_steps == 400 and resumed.counters.updates == 300
        assert len(resumed.replay) == 400
        for k, v in resumed.agent.actor.state_dict().items():
            assert torch.equal(v, state["actor"][k]), k
    finally:
        resumed.close(unlink=True)
    # Continue training: counters move on from the checkpoint, not from zero.
    train(small_config(tmp_path, total_env_steps=500), resume_dir=run)
    assert json.loads((latest_checkpoint(run) / "counters.json").read_text())["env_steps"] == 500


def test_kept_policies_outlive_the_pruned_checkpoints(tmp_path):
    run, _ = train(small_config(tmp_path, checkpoint_every=100, keep_policies=True))
    root = run / "checkpoints"
    checkpoints = sorted(p.name for p in root.iterdir() if p.name.isdigit())  # the last three (checkpoint_keep)
    kept = sorted(p.stem for p in (root / "policies").iterdir())  # one per checkpoint (near every 100 steps)
    assert len(checkpoints) == 3 and len(kept) == 4 and kept[-3:] == checkpoints
    last = (root / "policies" / f"{kept[-1]}.safetensors").read_bytes()
    assert last == (latest_checkpoint(run) / "policy.safetensors").read_bytes()


def test_new_run_refuses_to_overwrite_existing_run(tmp_path):
    train(small_config(tmp_path, total_env_steps=150, checkpoint_every=0))
    with pytest.raises(FileExistsError, match="--resume"):
        train(small_config(tmp_path))


def test_yaml_then_cli_precedence_and_field_errors(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("total_env_steps: 123\nagent:\n  utd: 7\n  hidden_dims: [64, 64]\n")
    cfg = parse(TrainConfig, path, ["--agent.utd", "3"])
    assert cfg.total_env_steps == 123 and cfg.agent.utd == 3 and cfg.agent.hidden_dims == (64, 64)
    path.write_text("agent:\n  num_critics: ten\n")
    with pytest.raises(ConfigError, match="agent.num_critics: expected int"):
        load_yaml(TrainConfig, path)
    path.write_text("agent:\n  num_critic: 10\n")
    with pytest.raises(ConfigError, match="agent.num_critic"):
        load_yaml(TrainConfig, path)


@pytest.mark.parametrize("flag, value, field", [
    ("--agent.num-min-critics", "20", "num_min_critics"),
    ("--runtime.num-actors", "0", "runtime.num_actors"),
    ("--runtime.flush-seconds", "0", "runtime.flush_seconds"),
    ("--runtime.warmup", "expert", "warmup"),
    ("--runtime.actor-rt-priority", "120", "runtime.actor_rt_priority"),
])
def test_cli_reports_bad_values_naming_the_field(tmp_path, flag, value, field):
    exe = [sys.executable, "-m", "robot_rl.cli", "train", "pendulum", "--runs-dir", str(tmp_path)]
    proc = subprocess.run([*exe, flag, value], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and field in proc.stderr, proc.stderr[-1000:]


def test_cli_reports_bad_yaml_naming_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("replay:\n  mix: {online: 0.5, prior2: 0.5}\n")
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", str(bad)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "prior2" in proc.stderr


def test_cli_train_and_eval_end_to_end(tmp_path):
    """`robot-rl train` with actor and learner as separate processes, then `robot-rl eval`."""
    run = [sys.executable, "-m", "robot_rl.cli", "train", "pendulum", "--runs-dir", str(tmp_path), "--name", "cli",
           "--total-env-steps", "300", "--random-steps", "100", "--learning-starts", "100", "--agent.utd", "1",
           "--agent.num-critics", "2", "--eval-episodes", "1", "--no-progress"]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "final evaluation" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "eval", str(tmp_path / "cli"), "--episodes", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert np.isfinite(json.loads(proc.stdout)["return_mean"])
