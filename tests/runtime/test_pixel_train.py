"""The bundled pixel PickCube configs run end to end with actor and learner processes (small images and budget):
pixel demos recorded, frames through the shared-memory ring into the replay, conv encoder updates (or the encoder
pre-trained on the demos, then frozen), evaluation."""

from __future__ import annotations

import json

import pytest

from robot_rl.cli import resolve_config
from robot_rl.config import parse
from robot_rl.runtime.supervisor import train
from robot_rl.training.config import TrainConfig


@pytest.mark.timeout(300)
@pytest.mark.parametrize("config, flags", [("pickcube_pixels_end_to_end", []),
                                           ("pickcube_pixels", ["--agent.encoder.pretrain-steps", "60"])])
def test_pixel_pickcube_config_trains_with_processes(tmp_path, monkeypatch, capfd, config, flags) -> None:
    monkeypatch.chdir(tmp_path)  # demos/ is recorded here
    cfg = parse(TrainConfig, resolve_config(config), [
        "--name", "px", "--runs-dir", str(tmp_path), "--no-progress", "--total-env-steps", "300",
        "--random-steps", "100", "--learning-starts", "100", "--eval-every", "0", "--eval-episodes", "2",
        "--checkpoint-every", "0", "--demos", "scripted:2", "--agent.batch-size", "32",
        "--agent.encoder.conv-channels", "8", "8", "--agent.encoder.conv-strides", "2", "2",
        "--env.kwargs", '{"image_size": 32, "object_state": false}', *flags])
    assert cfg.runtime.processes and cfg.env.kwargs == {"image_size": 32, "object_state": False}
    run, result = train(cfg)
    counters = json.loads((run / "status.json").read_text())
    assert counters["env_steps"] >= 300 and counters["updates"] >= 200, counters
    assert set(result) >= {"return_mean", "success_rate"}
    assert list((tmp_path / "demos").glob("PickCube-v0-2-seed0-*.zarr")), "pixel demos were not recorded"
    if flags:  # the encoder pre-trained on the demos in the learner process, before the RL updates
        err = capfd.readouterr().err
        assert "encoder pre-trained on the demos: 60 steps" in err, err[-3000:]
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert any("train/critic_loss" in r for r in rows), rows[:3]


def test_pixel_config_replay_fits_a_workstation() -> None:
    """The bundled config at its own image size: replay frame storage stays under 4 GiB (the RAM check in
    RingStorage refuses to start otherwise, which the small-image run above cannot notice)."""
    from robot_rl.envs.make import make_env
    from robot_rl.replay.storage import RingStorage
    from robot_rl.spaces import ObsSpec, action_dim_of

    cfg = parse(TrainConfig, resolve_config("pickcube_pixels"), [])
    env = make_env(cfg.env)
    spec, action_dim = ObsSpec.from_space(env.observation_space), action_dim_of(env.action_space)
    env.close()
    assert set(spec.cameras) == {"front", "wrist"}
    need = sum(RingStorage.bytes_needed(spec, action_dim, getattr(cfg.replay, f"{name}_capacity"))
               for name in ("online", "demos", "interventions"))
    assert need < 4 * 2**30, f"{need / 2**30:.1f} GiB"
