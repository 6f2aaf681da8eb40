"""encoder.pretrain_steps (robot_rl/agents/encoder_pretraining.py): the encoder learns the demos' actions from their
frames in slices of learner steps (no RL update meanwhile), then its conv layers stay fixed while the RL updates
train each camera's projection; a resumed agent keeps them frozen without pre-training again."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robot_rl.agents import SACAgent
from robot_rl.agents.config import EncoderConfig, SACConfig
from robot_rl.agents.encoder_pretraining import STEPS_PER_CALL
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec

SPEC = ObsSpec(3, cameras={"front": (16, 16, 3)})


def replay(demos: int = 200) -> ReplayBuffer:
    """Demos whose first action dimension is the frame's brightness: learnable from the pixels only."""
    rng = np.random.default_rng(0)
    out = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=100, demos_capacity=500, interventions_capacity=4))
    for _ in range(demos):
        img = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
        obs = {"state": rng.standard_normal(3).astype(np.float32), "pixels": {"front": img}}
        out.add(obs, np.array([img.mean() / 128 - 1, 0.3], np.float32), 1.0, True, False, obs, source="demo")
    return out


def agent(steps: int = 50, seed: int = 0) -> SACAgent:
    enc = EncoderConfig(conv_channels=(8, 8), conv_strides=(2, 2), latent_dim=16, pretrain_steps=steps)
    return SACAgent(SPEC, 2, SACConfig(num_critics=2, hidden_dims=(32, 32), batch_size=32, encoder=enc), seed=seed)


def test_pretraining_learns_the_demos_then_freezes_the_convs_and_survives_a_checkpoint():
    data, a = replay(), agent(steps=2 * STEPS_PER_CALL + 5)
    calls = []
    for _ in range(3):
        a.prepare(data)
        calls.append(a.update(data.sample(32, mix={"demos": 1.0})))
    # sliced: no RL update while pre-training; the third call finishes it and updates
    assert [m.get("encoder_pretrain_steps") for m in calls] == [STEPS_PER_CALL, 2 * STEPS_PER_CALL, None]
    assert "critic_loss" in calls[2] and a.update_step == 1
    losses = a.encoder_pretraining.losses
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses
    conv, proj = (a.encoder.convs["front"].convs[0].weight.clone(),
                  a.encoder.convs["front"].project[0].weight.clone())
    a.prepare(data)
    a.update(data.sample(32, mix={"demos": 1.0}))
    assert torch.equal(conv, a.encoder.convs["front"].convs[0].weight)  # frozen
    assert not torch.equal(proj, a.encoder.convs["front"].project[0].weight)  # still trained

    resumed = agent(steps=2 * STEPS_PER_CALL + 5, seed=1)
    resumed.load_state_dict(a.state_dict())
    resumed.prepare(data)
    assert resumed.encoder_pretraining.finished and len(resumed.encoder_pretraining.losses) == 0
    assert not any(p.requires_grad for p in resumed.encoder.convs["front"].convs.parameters())
    assert torch.equal(conv, resumed.encoder.convs["front"].convs[0].weight)


def test_pretraining_without_demos_says_so():
    empty = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=100, demos_capacity=4, interventions_capacity=4))
    obs = {"state": np.zeros(3, np.float32), "pixels": {"front": np.zeros((16, 16, 3), np.uint8)}}
    for _ in range(4):  # online rows only
        empty.add(obs, np.zeros(2, np.float32), 0.0, True, False, obs)
    with pytest.raises(ValueError, match="encoder.pretrain_steps: the replay holds no demos"):
        agent().prepare(empty)
