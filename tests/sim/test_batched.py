"""Batched sims: equal to N single envs, same-step auto-reset, torch output, gymnasium VectorEnv view."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import robot_rl_sim  # noqa: F401
from robot_rl.envs.batched import BatchedEnv, BatchedVectorEnv, make_batched

TASK, N = "robot_rl/Reach-v0", 3


def singles_rollout(actions: np.ndarray, seed: int):
    envs = [gym.make(TASK, max_episode_steps=30) for _ in range(N)]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    trace = []
    for a in actions:
        step = []
        for i, env in enumerate(envs):
            o, r, term, trunc, _ = env.step(a[i])
            final = o if (term or trunc) else None
            if term or trunc:
                o, _ = env.reset()
            obs[i] = o
            step.append((o["state"].copy(), r, term, trunc, None if final is None else final["state"].copy()))
        trace.append(step)
    return trace


def test_batched_equals_single_envs_across_auto_resets():
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (70, N, 4)).astype(np.float32)
    expected = singles_rollout(actions, seed=5)
    env = make_batched(TASK, N, max_episode_steps=30)
    obs = env.reset(seed=5)
    assert obs["state"].shape == (N, 14)
    resets = 0
    for t, a in enumerate(actions):
        obs, reward, terminated, truncated, info = env.step(a)
        for i in range(N):
            state, r, term, trunc, final = expected[t][i]
            np.testing.assert_array_equal(obs["state"][i], state)
            assert (reward[i], terminated[i], truncated[i]) == (np.float32(r), term, trunc)
            assert info["done"][i] == (term or trunc)
            if final is not None:
                resets += 1
                np.testing.assert_array_equal(info["final_obs"]["state"][i], final)
                assert isinstance(info["final_info"][i], dict)
    assert resets >= N * 2  # every env went through at least two auto-resets
    env.close()


def test_auto_reset_returns_the_new_episode_first_obs_and_keeps_previous_obs_valid():
    env = make_batched(TASK, 2, max_episode_steps=3)
    first = env.reset(seed=0)
    kept = first["state"].copy()
    out = env.step(np.zeros((2, 4), np.float32))[0]
    np.testing.assert_array_equal(first["state"], kept)  # the previous step's arrays are not overwritten
    for _ in range(2):
        out, _, terminated, truncated, info = env.step(np.full((2, 4), 0.5, np.float32))
    assert truncated.all() and info["done"].all()
    single = gym.make(TASK)
    single.reset(seed=0)
    # the returned obs is a fresh reset (EE back at home), the final obs is where the arm moved to
    home = single.reset(seed=0)[0]["state"][:3]
    assert np.abs(out["state"][:, :3] - home).max() < 1e-6
    assert np.abs(info["final_obs"]["state"][:, :3] - home).max() > 0.005  # moved ~1 cm in 3 steps


def test_torch_output_and_pixels():
    env = make_batched(TASK, 2, as_torch=True, image_size=16)
    obs = env.reset(seed=0)
    assert isinstance(obs["state"], torch.Tensor) and obs["pixels"]["front"].shape == (2, 16, 16, 3)
    assert obs["pixels"]["wrist"].dtype == torch.uint8
    obs, reward, terminated, truncated, info = env.step(torch.zeros(2, 4))
    assert reward.shape == (2,) and terminated.dtype == torch.bool
    assert env.render("front", 24).shape == (2, 24, 24, 3)
    with pytest.raises(ValueError, match="actions must be"):
        env.step(torch.zeros(3, 4))
    env.close()


def test_vector_env_view():
    venv = BatchedVectorEnv(make_batched(TASK, N))
    assert isinstance(venv, gym.vector.VectorEnv)
    obs, _ = venv.reset(seed=1)
    assert venv.observation_space["state"].shape == (N, 14) and venv.action_space.shape == (N, 4)
    assert venv.observation_space.contains(obs)
    obs, reward, terminated, truncated, infos = venv.step(venv.action_space.sample())
    assert reward.shape == (N,) and "final_obs" in infos
    venv.close()


def test_batched_env_requires_envs():
    with pytest.raises(ValueError):
        BatchedEnv([])
