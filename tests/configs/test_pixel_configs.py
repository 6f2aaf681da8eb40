"""The bundled pixel recipes parse into the agents their pages describe, and one of their updates runs on frames."""

from __future__ import annotations

import dataclasses

import numpy as np

from robot_rl.agents import SACAgent
from robot_rl.cli import resolve_config
from robot_rl.config import parse
from robot_rl.spaces import ObsSpec
from robot_rl.training.config import TrainConfig


def test_the_fast_pixel_recipe_is_the_pixel_recipe_with_a_pretrained_small_stem_bf16_and_utd_2() -> None:
    base = parse(TrainConfig, resolve_config("pickcube_pixels_end_to_end"), [])
    fast = parse(TrainConfig, resolve_config("pickcube_pixels"), [])
    assert fast.env == base.env and fast.demos == base.demos and fast.replay == base.replay
    assert fast.agent.encoder.conv_channels == (16, 16, 16) and fast.agent.encoder.conv_strides == (2, 2, 2)
    assert fast.agent.bf16 and fast.agent.utd == 2 and not base.agent.bf16
    assert fast.agent.encoder.pretrain_steps == 1000 and base.agent.encoder.pretrain_steps == 0
    changed = {f.name for f in dataclasses.fields(base.agent)
               if getattr(base.agent, f.name) != getattr(fast.agent, f.name)}
    assert changed == {"bf16", "utd", "encoder"}

    spec = ObsSpec(12, {"front": (32, 32, 3), "wrist": (32, 32, 3)})  # smaller frames than the recipe's, same path
    agent = SACAgent(spec, 4, dataclasses.replace(fast.agent, batch_size=8))
    agent.encoder_pretraining.skip()  # an RL update after the pre-training
    rng = np.random.default_rng(0)

    def obs() -> dict:
        return {"state": rng.normal(size=(2, 8, 12)).astype(np.float32),
                "pixels": {c: rng.integers(0, 256, (2, 8, 32, 32, 3), dtype=np.uint8) for c in spec.cameras}}

    metrics = agent.update({"obs": obs(), "next_obs": obs(), "action": rng.uniform(-1, 1, (2, 8, 4)).astype(np.float32),
                            "reward": np.ones((2, 8), np.float32), "terminated": np.zeros((2, 8), np.float32),
                            "source": np.zeros((2, 8), np.int64), "intervened": np.zeros((2, 8), bool)})
    assert np.isfinite(metrics["critic_loss"]) and agent.act({k: v[0, 0] if k == "state" else
                                                            {c: f[0, 0] for c, f in v.items()}
                                                            for k, v in obs().items()}).shape == (4,)
