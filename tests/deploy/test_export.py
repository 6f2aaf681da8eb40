"""Policy export: a trained state policy and a pixel + instruction policy exported to ONNX and TorchScript match
the torch policy to 1e-5 on recorded observations; the ONNX runner works with numpy and onnxruntime alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from robot_rl.agents.registry import make_agent
from robot_rl.config import from_dict
from robot_rl.deploy import runner
from robot_rl.deploy.export import export_run
from robot_rl.deploy.runner import OnnxPolicy
from robot_rl.envs.make import make_env
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.runtime.supervisor import train
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.config import TrainConfig
from tests.policies.toy import TINY_ENV_KWARGS

RUNS = {
    "state": {"env": {"id": "Pendulum-v1"}},
    "pixels": {"env": {"id": "robot_rl/PickColor-v0", "kwargs": TINY_ENV_KWARGS, "max_episode_steps": 40},
               "agent": {"encoder": {"conv_channels": [8, 8], "conv_strides": [2, 2], "latent_dim": 16}}},
    "bc": {"env": {"id": "robot_rl/Reach-v0"}, "agent": {"name": "bc", "hidden_dims": [32]}, "demos": ["scripted:2"]},
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request, tmp_path_factory):
    kind = request.param
    agent = {"name": "sac", "num_critics": 2, "utd": 1, "batch_size": 32, "hidden_dims": [32, 32]}
    spec = RUNS[kind]
    data = {"name": kind, "runs_dir": str(tmp_path_factory.mktemp("runs")), "total_env_steps": 150,
            "random_steps": 60, "learning_starts": 60, "eval_every": 0, "eval_episodes": 1, "checkpoint_every": 150,
            "progress": False, "runtime": {"processes": False}, **spec,
            "agent": {**({} if spec.get("agent", {}).get("name") == "bc" else agent), **spec.get("agent", {})}}
    run_dir, _ = train(from_dict(TrainConfig, data))
    return run_dir


def cfg_instruction_dim(meta: dict) -> int:
    return next(i["shape"][0] for i in meta["inputs"] if i["name"] == "instruction")


def env_observations(cfg: TrainConfig, n: int) -> tuple[object, list[dict]]:
    env = make_env(cfg.env)
    obs = [env.reset(seed=100 + i)[0] for i in range(n)]
    return env, obs


@pytest.mark.timeout(300)
def test_exports_match_the_torch_policy_and_the_runner_needs_no_torch(run, tmp_path):
    from robot_rl.config import load_yaml

    cfg = load_yaml(TrainConfig, run / "config.yaml")
    onnx = export_run(run, "onnx", tmp_path / "onnx")
    script = export_run(run, "torchscript", tmp_path / "ts")
    for meta in (onnx, script):
        assert meta["check_max_abs_diff"] <= 1e-5 and meta["check_observations"] >= 32
        assert meta["control_hz"] == pytest.approx(20.0)  # the rate it was trained at (a flat-out sim's own)
        assert meta["inputs"][0]["name"] == "state" and meta["output"]["range"] == [-1.0, 1.0]
    env, observations = env_observations(cfg, 8)
    agent = make_agent(cfg.agent, ObsSpec.from_space(env.observation_space), action_dim_of(env.action_space))
    agent.load_policy_state(load_file(str(latest_checkpoint(run) / "policy.safetensors")))
    policy, scripted = OnnxPolicy(tmp_path / "onnx"), torch.jit.load(str(tmp_path / "ts" / "policy.pt"))
    for obs in observations:  # fresh observations, one at a time
        expected = agent.act(obs, deterministic=True)
        np.testing.assert_allclose(policy.act(obs), expected, atol=1e-5)
        inputs = [torch.as_tensor(np.asarray(obs["state"], np.float32))[None]]
        inputs += [torch.as_tensor(obs["pixels"][c])[None] for c in sorted(obs.get("pixels", {}))]
        if "instruction" in obs:
            inputs.append(torch.as_tensor(obs["instruction"])[None])
        with torch.no_grad():
            np.testing.assert_allclose(scripted(*inputs)[0].numpy(), expected, atol=1e-5)
    if "instruction" in observations[0]:  # a language policy: the runner takes the text (the export's table)
        assert set(onnx["instructions"]) and all(len(v) == cfg_instruction_dim(onnx) for v in
                                                 onnx["instructions"].values())
        for obs in observations:
            text = next(t for t, v in onnx["instructions"].items() if np.allclose(v, obs["instruction"]))
            np.testing.assert_allclose(policy.act({**obs, "instruction": text}), policy.act(obs), atol=1e-6)
        with pytest.raises(ValueError, match="not one this policy was trained on"):
            policy.act({**observations[0], "instruction": "dance"})
    low, high = np.asarray(onnx["action_low"]), np.asarray(onnx["action_high"])
    np.testing.assert_allclose(policy.to_env_units(np.ones(len(low))), high, rtol=1e-6)
    env.close()
    # the runner alone, copied next to the export as on a robot PC: numpy + onnxruntime, no torch, no robot_rl
    pc = tmp_path / "robot_pc"
    pc.mkdir()
    shutil.copy(runner.__file__, pc / "runner.py")
    probe = (f"import sys, json, numpy as np; sys.path.insert(0, {str(pc)!r});"
             "from runner import OnnxPolicy, latency; "
             f"p = OnnxPolicy({str(tmp_path / 'onnx')!r}); "
             "obs = {s['name']: np.zeros(s['shape'], s['dtype']) for s in p.inputs}; "
             "obs['pixels'] = {k.split('.', 1)[1]: v for k, v in obs.items() if k.startswith('pixels.')}; "
             "a = p.act(obs); print(json.dumps({'torch': 'torch' in sys.modules, 'robot_rl': any("
             "m.startswith('robot_rl') for m in sys.modules), 'shape': list(a.shape), **latency(p, obs, 50)}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=pc)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert not got["torch"] and not got["robot_rl"] and got["shape"] == [len(low)]


def test_agents_that_act_on_a_base_are_refused(tiny_vla, tmp_path):
    from robot_rl.agents.residual import ResidualAgent
    from robot_rl.deploy.export import export_policy

    agent = ResidualAgent(ObsSpec(3), 2)
    with pytest.raises(ValueError, match="cannot be exported"):
        export_policy(agent, "onnx", tmp_path, {"state": np.zeros((2, 3), np.float32)})
    with pytest.raises(ValueError, match="unknown export format"):
        export_policy(agent, "tflite", tmp_path, {"state": np.zeros((2, 3), np.float32)})
