"""Seeds resolve in one place: each actor explores with noise of its own seed (``--seed`` reaches every actor
process), the same seed reproduces it, and building an agent leaves the global torch RNG alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_rl.agents import BCAgent, SACAgent, SACConfig
from robot_rl.config import replace
from robot_rl.runtime.actor import Actor
from robot_rl.spaces import ObsSpec
from robot_rl.training.config import TrainConfig
from robot_rl.training.seeds import Seeds


def explore(tmp_path: Path, seed: int, index: int = 0) -> np.ndarray:
    """Actions actor ``index`` of a run seeded ``seed`` samples for one fixed observation with fixed weights."""
    cfg = replace(TrainConfig(seed=seed), {"agent.num_critics": 2, "agent.hidden_dims": (32, 32),
                                           "runtime.spool": False})
    weights = SACAgent(ObsSpec(3), 1, cfg.agent, seed=123).policy_state()
    actor = Actor(cfg, tmp_path / f"run{seed}-{index}", index=index)
    try:
        actor.policy.load_policy_state(weights)
        obs = {"state": np.array([0.1, -0.2, 0.3], np.float32)}
        return np.stack([actor.policy.act(obs) for _ in range(8)])
    finally:
        actor.close()
        actor.outbox.ring.close(unlink=True)


def test_two_seeds_explore_differently_and_one_seed_reproduces(tmp_path) -> None:
    a, b, again = explore(tmp_path, 0), explore(tmp_path, 1), explore(tmp_path / "again", 0)
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(a, again)
    other_actor = explore(tmp_path, 0, index=1)
    assert not np.allclose(a, other_actor)  # two actors of one run do not share exploration noise


def test_streams_differ_by_purpose_and_consumer() -> None:
    s = Seeds(0)
    values = [s.agent(), s.replay(), s.actor_policy(0, 0), s.actor_policy(0, 1), s.actor_policy(1, 0),
              s.actor_warmup(0, 0), Seeds(1).agent()]
    assert len(set(values)) == len(values)
    assert s.agent() == Seeds(0).agent() and 0 <= s.actor_env(3, 2) < 2 ** 31


@pytest.mark.parametrize("make", [lambda: SACAgent(ObsSpec(3), 1, SACConfig(num_critics=2), seed=5),
                                  lambda: BCAgent(ObsSpec(3), 1, seed=5)])
def test_building_an_agent_leaves_the_global_rng_alone_and_its_seed_decides(make) -> None:
    before = torch.get_rng_state().clone()
    first = make()
    assert torch.equal(before, torch.get_rng_state())
    torch.manual_seed(999)  # whatever the global RNG holds, the same seed builds the same agent
    second = make()
    for k, v in first.policy_state().items():
        assert torch.equal(v, second.policy_state()[k]), k


def test_configs_are_frozen_values() -> None:
    cfg = TrainConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.agent.utd = 3  # type: ignore[misc]
    changed = replace(cfg, {"agent.utd": 3, "env.kwargs": {"a": 1}})
    assert changed.agent.utd == 3 and cfg.agent.utd == 20 and cfg.env.kwargs == {}
