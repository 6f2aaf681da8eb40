"""Latent-noise steering (DSRL) as an env wrapper: the noise-space env, a zero noise executing the base's
deterministic decode exactly, and SAC steering a base behind a policy server through the real runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from robot_rl.envs.config import EnvConfig, WrapperConfig
from robot_rl.envs.make import make_env
from robot_rl.policies.config import BasePolicyConfig
from robot_rl.policies.loader import load_policy
from robot_rl.replay.store import load_buffer
from robot_rl.runtime.checkpoint import latest_checkpoint
from tests.policies.toy import TINY_ENV_KWARGS, served

ENV_ID = "robot_rl/PickColor-v0"
CLI = [sys.executable, "-m", "robot_rl.cli"]


def steering(path: str, **kwargs) -> tuple[WrapperConfig, ...]:
    return (WrapperConfig("robot_rl.policies.steering:LatentSteering", {"path": path, **kwargs}),)


def test_zero_noise_executes_the_bases_deterministic_decode(tiny_vla):
    steered = make_env(EnvConfig(id=ENV_ID, kwargs=TINY_ENV_KWARGS, wrappers=steering(str(tiny_vla))))
    plain = make_env(EnvConfig(id=ENV_ID, kwargs=TINY_ENV_KWARGS))
    base = load_policy(BasePolicyConfig(path=str(tiny_vla)))
    try:
        meta = base.metadata
        assert steered.action_space.shape == (meta.chunk_length * meta.action_dim,)
        obs_s, _ = steered.reset(seed=4)
        obs_p, info = plain.reset(seed=4)
        for _ in range(3):  # three chunks
            chunk = base.infer(obs_p, info["instruction"], np.zeros(meta.noise_shape, np.float32))
            for action in chunk:
                obs_p, _, _, _, info = plain.step(action)
            obs_s, _, _, _, info_s = steered.step(np.zeros(steered.action_space.shape, np.float32))
            assert info_s["steering_steps"] == meta.chunk_length
            assert np.array_equal(obs_s["state"], obs_p["state"])
        # another noise steers the base elsewhere
        obs_n, _, _, _, _ = steered.step(np.ones(steered.action_space.shape, np.float32))
        chunk = base.infer(obs_p, info["instruction"], np.zeros(meta.noise_shape, np.float32))
        for action in chunk:
            obs_p, *_ = plain.step(action)
        assert not np.array_equal(obs_n["state"], obs_p["state"])
    finally:
        steered.close()
        plain.close()
        base.close()


def test_bad_steering_settings_are_refused(tiny_vla):
    with pytest.raises(ValueError, match="noise_scale must be > 0"):
        make_env(EnvConfig(id=ENV_ID, kwargs=TINY_ENV_KWARGS, wrappers=steering(str(tiny_vla), noise_scale=0)))


@pytest.mark.timeout(600)
def test_sac_steers_a_served_base_through_processes(tiny_vla, tmp_path):
    with served(tiny_vla) as url:
        wrappers = [{"target": "robot_rl.policies.steering:LatentSteering", "kwargs": {"path": url}}]
        proc = subprocess.run(
            [*CLI, "train", "--env.id", ENV_ID, "--env.kwargs", json.dumps(TINY_ENV_KWARGS), "--env.wrappers",
             json.dumps(wrappers), "--agent.utd", "2", "--agent.batch-size", "32", "--agent.num-critics", "2",
             "--total-env-steps", "60", "--random-steps", "30", "--learning-starts", "30", "--eval-every", "0",
             "--eval-episodes", "2", "--name", "s", "--runs-dir", str(tmp_path / "runs"), "--no-progress"],
            cwd=tmp_path, capture_output=True, text=True, timeout=500, env={**os.environ, "MUJOCO_GL": "egl"})
        assert proc.returncode == 0, proc.stderr[-3000:]
    replay = load_buffer(latest_checkpoint(tmp_path / "runs" / "s") / "replay.zarr")
    online = replay.partitions["online"]
    actions = online.arrays["action"][: online.size][online.arrays["valid"][: online.size]]
    assert len(actions) >= 60 and actions.shape[1] == 5 * 4  # one transition per chunk, in noise space
    assert np.abs(actions).max() <= 1.0 and actions.std() > 0.1
