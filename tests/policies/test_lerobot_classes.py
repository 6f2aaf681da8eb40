"""LeRobot's own policy classes as base policies: ACT (chunked) and Diffusion (an observation history kept in
queues), built from their configs with random weights and saved with ``save_pretrained`` and their processors,
then run by ``robot-rl eval lerobot:<type>:<folder>`` and as the base of a residual fine-tuning run. Runs where
lerobot is installed: the lowest-versions CI leg (scripts/test_lowest.sh) installs it beside robot_rl."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("lerobot")

from robot_rl.cli import main as cli_main  # noqa: E402
from robot_rl.policies.lerobot import load_lerobot_policy  # noqa: E402
from tests.policies.lerobot_only import isolated_python  # noqa: E402

STATE, ACTION, SIDE = 14, 4, 64  # PickCube's state and action; the policies see 64-px frames of camera "front"
ENV_KWARGS = {"image_size": 32}  # the env renders 32 px: the adapter resizes


def save_policy(kind: str, folder: Path) -> str:
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (STATE,)),
              "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, SIDE, SIDE))}
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (ACTION,))}
    if kind == "act":
        from lerobot.policies.act.configuration_act import ACTConfig

        cfg = ACTConfig(input_features=inputs, output_features=outputs, chunk_size=10, n_action_steps=10,
                        dim_model=64, dim_feedforward=128, n_encoder_layers=1, n_decoder_layers=1, use_vae=False,
                        pretrained_backbone_weights=None, device="cpu")
    else:
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

        cfg = DiffusionConfig(input_features=inputs, output_features=outputs, n_obs_steps=2, horizon=16,
                              n_action_steps=8, down_dims=(32, 64), crop_shape=None, num_inference_steps=4,
                              pretrained_backbone_weights=None, device="cpu")
    ones = lambda n: torch.ones(n)  # noqa: E731
    stats = {"observation.state": {"mean": torch.zeros(STATE), "std": ones(STATE), "min": -ones(STATE),
                                   "max": ones(STATE)},
             "observation.images.front": {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25),
                                          "min": torch.zeros(3, 1, 1), "max": torch.ones(3, 1, 1)},
             "action": {"mean": torch.zeros(ACTION), "std": ones(ACTION) * 0.3, "min": -ones(ACTION),
                        "max": ones(ACTION)}}
    torch.manual_seed(0)
    policy = get_policy_class(kind)(cfg)
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    for part in (policy, pre, post):
        part.save_pretrained(folder)
    return f"lerobot:{kind}:{folder}"


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("lerobot_policies")
    return {kind: save_policy(kind, root / kind) for kind in ("act", "diffusion")}


def obs(state: float) -> dict:
    return {"state": np.full(STATE, state, np.float32),
            "pixels": {"front": np.full((32, 32, 3), 128, np.uint8), "wrist": np.zeros((32, 32, 3), np.uint8)}}


def test_diffusion_sees_every_observation_resized_and_forgets_them_at_reset(saved):
    _, kind, folder = saved["diffusion"].split(":", 2)
    adapter = load_lerobot_policy(folder, kind)
    assert adapter.metadata.chunk_length == 1 and adapter.metadata.cameras == {"front": (SIDE, SIDE, 3)}
    for step in range(3):
        assert adapter.infer(obs(0.1 * step)).shape == (1, ACTION)
    queues = adapter.policy._queues
    # the last two observations, as LeRobot's own loop queues them (normalised with mean 0, std 1: unchanged)
    assert [float(q[0, 0]) for q in queues["observation.state"]] == pytest.approx([0.1, 0.2])
    assert tuple(queues["observation.images"][-1].shape[-2:]) == (SIDE, SIDE)  # resized from 32 px
    adapter.reset()
    assert len(adapter.policy._queues["observation.state"]) == 0


def test_act_predicts_its_chunk_of_ten(saved):
    _, kind, folder = saved["act"].split(":", 2)
    adapter = load_lerobot_policy(folder, kind)
    chunk = adapter.infer(obs(0.0))
    assert chunk.shape == (10, ACTION) and np.all(np.abs(chunk) <= 1.0)


@pytest.mark.parametrize("kind", ["act", "diffusion"])
def test_eval_runs_a_lerobot_policy_and_names_missing_cameras(saved, kind, capsys):
    args = ["eval", saved[kind], "--tasks", "pickcube", "--episodes", "1"]
    assert cli_main([*args, "--env-kwargs", json.dumps(ENV_KWARGS)]) == 0
    result = json.loads(capsys.readouterr().out)["PickCube-v0"]
    assert result["episode_length"] > 0 and result["executor/failures"] == 0, result
    assert result["executor/inferences"] >= result["episode_length"] / (10 if kind == "act" else 1), result
    assert cli_main(args) == 2  # PickCube without cameras
    assert "needs camera(s) ['front']" in capsys.readouterr().err


@pytest.mark.timeout(900)
def test_residual_fine_tuning_on_a_lerobot_act_base(saved, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "robot_rl.cli", "train", "--env.id", "robot_rl/PickCube-v0",
         "--env.kwargs", json.dumps(ENV_KWARGS), "--agent.name", "residual", "--base-policy.path", saved["act"],
         "--agent.critic-warmup-updates", "10", "--agent.utd", "1", "--agent.batch-size", "16",
         "--agent.hidden-dims", "32", "32", "--agent.num-critics", "2", "--demos", "scripted:1",
         "--total-env-steps", "200", "--random-steps", "50", "--learning-starts", "50", "--eval-every", "0",
         "--eval-episodes", "1", "--name", "res", "--runs-dir", str(tmp_path), "--no-progress"],
        capture_output=True, text=True, timeout=850, cwd=tmp_path, env={**os.environ, "MUJOCO_GL": "egl"})
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoints = tmp_path / "res" / "checkpoints"
    counters = json.loads((checkpoints / (checkpoints / "latest").read_text().strip() / "counters.json").read_text())
    assert counters["env_steps"] >= 200 and counters["updates"] > 0, counters


@pytest.mark.timeout(300)
def test_served_from_an_environment_that_has_only_lerobot(saved, tmp_path):
    """``python -m robot_rl.policies.serve`` where only LeRobot's dependencies and the wire's are installed: robot_rl's
    own (mujoco, zarr, tyro, rich, ...) are absent there, and a client in robot_rl's environment drives it."""
    from robot_rl.policies.client import RemotePolicy, wait_for_server

    extras = ("diffusion",)  # lerobot >= 0.5: Diffusion's dependencies are an extra
    for absent in ("mujoco", "zarr", "tyro", "rich"):  # robot_rl's dependencies, not LeRobot's
        probe = subprocess.run([*isolated_python(tmp_path, absent, extras)], capture_output=True, text=True,
                               timeout=60)
        assert probe.returncode != 0 and f"No module named {absent}" in probe.stderr, (absent, probe.stderr[-500:])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([*isolated_python(tmp_path, "robot_rl.policies.serve", extras), saved["diffusion"],
                               "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        try:
            wait_for_server(f"ws://127.0.0.1:{port}", 120)
        except Exception:
            server.kill()
            raise AssertionError(server.communicate(timeout=30)[0][-3000:]) from None
        remote = RemotePolicy(f"ws://127.0.0.1:{port}")
        assert remote.metadata.name == "DiffusionPolicy" and remote.metadata.cameras == {"front": (SIDE, SIDE, 3)}
        assert remote.infer(obs(0.3), "pick up the cube").shape == (1, ACTION)
        remote.close()
    finally:
        server.terminate()
        out = server.communicate(timeout=30)[0]
    assert "serving DiffusionPolicy" in out, out[-2000:]
