"""The small VLA: train-bc end to end on tiny scripted datasets (multi-task, instructions from the datasets),
save/load exactness, the noise input, and the saved policy behind `robot-rl serve-policy` evaluated by
`robot-rl eval ws://...` in other processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from robot_rl.policies.client import RemotePolicy, wait_for_server
from robot_rl.policies.vla_model import VLAConfig
from robot_rl.policies.vla_policy import load_vla
from robot_rl.vla.train import TrainBCConfig, train_bc

CLI = [sys.executable, "-m", "robot_rl.cli"]
TINY = VLAConfig(image_size=32, channels=(8, 16, 32), width=32, depth=1, head_depth=1, heads=2, chunk_length=4,
                 flow_steps=3)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("vla")
    cfg = TrainBCConfig(datasets=("scripted:PickColor:2", "scripted:Reach:2"), out=str(root / "policy"),
                        demo_dir=str(root / "demos"), steps=30, batch_size=8, warmup_steps=5, eval_episodes=1,
                        progress=False, model=TINY)
    summary = train_bc(cfg)
    return root, summary


def obs_for(policy, seed=0):
    rng = np.random.default_rng(seed)
    meta = policy.metadata
    return {"state": rng.normal(size=meta.state_dim).astype(np.float32),
            "pixels": {c: rng.integers(0, 256, s, dtype=np.uint8) for c, s in meta.cameras.items()}}


def test_train_bc_writes_policy_logs_and_per_task_evaluation(trained):
    root, summary = trained
    out = root / "policy"
    for name in ("policy.json", "model.safetensors", "config.yaml", "metrics.jsonl", "learning_curve.png",
                 "eval.json"):
        assert (out / name).is_file(), name
    assert sorted(summary["tasks"]) == ["PickColor-v0", "Reach-v0"]
    meta = json.loads((out / "policy.json").read_text())
    tasks = {t["env_id"]: t for t in meta["tasks"]}
    assert sorted(tasks["robot_rl/PickColor-v0"]["instructions"])[0].startswith("pick up the")
    assert tasks["robot_rl/Reach-v0"]["instructions"] == ["move the gripper to the green ball"]
    assert tasks["robot_rl/Reach-v0"]["env_kwargs"]["object_state"] is False
    assert meta["metadata"]["state_dim"] == 11 and meta["metadata"]["accepts_noise"]
    losses = [json.loads(line)["train/loss"] for line in (out / "metrics.jsonl").read_text().splitlines()
              if "train/loss" in line]
    assert len(losses) >= 2 and all(np.isfinite(losses))


def test_saved_policy_loads_exactly_and_zero_noise_is_the_deterministic_decode(trained):
    root, _ = trained
    policy = load_vla(root / "policy")
    again = load_vla(root / "policy")
    obs = obs_for(policy)
    chunk = policy.infer(obs, "pick up the red cube")
    assert chunk.shape == (4, 4) and np.array_equal(chunk, again.infer(obs, "pick up the red cube"))
    assert np.array_equal(chunk, policy.infer(obs, "pick up the red cube", np.zeros((4, 4), np.float32)))
    noisy = policy.infer(obs, "pick up the red cube", np.ones((4, 4), np.float32))
    assert not np.allclose(noisy, chunk)
    assert not np.allclose(policy.infer(obs, "pick up the blue cube"), chunk)  # the instruction is an input


def test_datasets_without_instructions_are_refused(tmp_path):
    from robot_rl.datasets.record import record_demos

    record_demos("Reach", 1, tmp_path / "plain.zarr", env_kwargs={"image_size": 32}, progress=False)
    proc = subprocess.run([*CLI, "train-bc", "--datasets", str(tmp_path / "plain.zarr"), "--out",
                           str(tmp_path / "p"), "--steps", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "without an instruction" in proc.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_policy_answers_like_the_local_policy_and_eval_runs_through_it(trained, tmp_path):
    root, _ = trained
    port = free_port()
    env = {**os.environ, "ROBOT_RL_POLICY_TOKEN": "t0ken", "MUJOCO_GL": "egl"}
    server = subprocess.Popen([*CLI, "serve-policy", str(root / "policy"), "--port", str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"ws://127.0.0.1:{port}"
    try:
        wait_for_server(url, 60)
        local = load_vla(root / "policy")
        remote = RemotePolicy(url, token="t0ken")
        assert remote.metadata == local.metadata
        obs = obs_for(local, 3)
        noise = np.random.default_rng(1).normal(size=(4, 4)).astype(np.float32)
        # equal up to float rounding: the server's torch may sum in another order than this process's, whose
        # thread count earlier tests set
        np.testing.assert_allclose(remote.infer(obs, "pick up the green cube", noise),
                                   local.infer(obs, "pick up the green cube", noise), rtol=0, atol=1e-5)
        t0 = time.perf_counter()
        proc = subprocess.run([*CLI, "eval", url, "--tasks", "PickColor", "--episodes", "1", "--env-kwargs",
                               json.dumps({"image_size": 32, "object_state": False})],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        result = json.loads(proc.stdout)
        assert result["PickColor-v0"]["executor/inferences"] >= 25 and time.perf_counter() - t0 < 300
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
    assert "Traceback" not in out, out
