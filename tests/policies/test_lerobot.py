"""The LeRobot adapter against a stand-in with LeRobot's policy and processor interface, in every environment (the
main suite has no lerobot); LeRobot's own classes are in test_lerobot_classes.py (the lowest-versions leg)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from robot_rl.policies.lerobot import LeRobotPolicy


class StandInACT(nn.Module):
    """ACT-shaped: chunk_size 20, n_action_steps 10, two cameras (3 x 48 x 64), state 6, action 6 (joint units)."""

    def __init__(self):
        super().__init__()
        feat = lambda *shape: SimpleNamespace(shape=shape)  # noqa: E731
        self.config = SimpleNamespace(
            image_features={"observation.images.top": feat(3, 48, 64), "observation.images.wrist": feat(3, 48, 64)},
            robot_state_feature=feat(6), action_feature=feat(6), chunk_size=20, n_action_steps=10)
        self.bias = nn.Parameter(torch.zeros(6))
        self.batches = []
        self.resets = 0

    def predict_action_chunk(self, batch):
        self.batches.append(batch)
        img = batch["observation.images.top"].mean() + batch["observation.images.wrist"].mean()
        state = batch["observation.state"]  # normalised by the preprocessor
        return (state[:, None, :] + img + self.bias).expand(1, 20, 6) * torch.linspace(0, 1, 20)[None, :, None]

    def reset(self):
        self.resets += 1


def test_frames_processors_and_chunk_follow_lerobot_conventions():
    policy = StandInACT()
    mean, std = torch.arange(6.0), torch.full((6,), 2.0)
    seen = {}

    def pre(frame):
        seen.update(frame)
        return {**frame, "observation.state": (frame["observation.state"] - mean) / std}

    def post(actions):
        return actions * 10.0  # un-normalise to joint units in [-10, 10]

    adapter = LeRobotPolicy(policy, pre, post, camera_map={"front": "observation.images.top",
                                                           "wrist": "observation.images.wrist"},
                            metadata={"action_low": [-10.0] * 6, "action_high": [10.0] * 6, "control_hz": 30})
    meta = adapter.metadata
    assert (meta.action_dim, meta.chunk_length, meta.state_dim) == (6, 10, 6)
    assert meta.cameras == {"front": (48, 64, 3), "wrist": (48, 64, 3)} and meta.control_hz == 30
    rng = np.random.default_rng(0)
    obs = {"state": np.arange(6, dtype=np.float32) + 1.0,
           "pixels": {"front": rng.integers(0, 256, (48, 64, 3), dtype=np.uint8),
                      "wrist": np.full((48, 64, 3), 255, np.uint8)}}
    chunk = adapter.infer(obs, "fold the towel")
    top = seen["observation.images.top"]
    assert top.shape == (1, 3, 48, 64) and top.dtype == torch.float32
    assert torch.allclose(top[0].permute(1, 2, 0) * 255, torch.as_tensor(obs["pixels"]["front"]).float())
    assert seen["task"] == ["fold the towel"] and seen["observation.state"].shape == (1, 6)
    img = top.mean() + 1.0
    raw = ((torch.full((6,), 0.5) + img) * torch.linspace(0, 1, 20)[:10, None] * 10.0).numpy()
    assert chunk.shape == (10, 6)
    assert np.allclose(chunk, np.clip(raw / 10.0, -1, 1), atol=1e-6)  # joint units -> [-1, 1]
    adapter.reset()
    assert policy.resets == 1


def test_default_camera_names_and_a_select_action_only_policy():
    class SelectOnly(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = SimpleNamespace(image_features={"observation.images.front": SimpleNamespace(shape=(3, 8, 8))},
                                          robot_state_feature=None, action_feature=SimpleNamespace(shape=(2,)),
                                          n_action_steps=1)
            self.w = nn.Parameter(torch.ones(1))

        def select_action(self, batch):
            return batch["observation.images.front"].mean().expand(1, 2) * self.w

    adapter = LeRobotPolicy(SelectOnly())
    assert adapter.metadata.cameras == {"front": (8, 8, 3)} and adapter.metadata.chunk_length == 1
    out = adapter.infer({"state": np.zeros(0, np.float32), "pixels": {"front": np.full((8, 8, 3), 51, np.uint8)}})
    assert out.shape == (1, 2) and np.allclose(out, 0.2)


def test_unknown_camera_is_refused():
    with pytest.raises(ValueError, match="no image feature"):
        LeRobotPolicy(StandInACT(), camera_map={"front": "observation.images.side"})
