"""State standardisation of the agent's encoder: fitted once, frozen, shipped with the policy."""

import numpy as np
import pytest
import torch

from robot_rl.agents.config import SACConfig
from robot_rl.agents.sac import SACAgent
from robot_rl.spaces import ObsSpec


def test_state_normaliser_is_identity_until_fitted_then_standardises_and_travels_with_the_policy():
    agent = SACAgent(ObsSpec(3), 2, SACConfig(num_critics=2))
    x = torch.tensor([[0.5, 0.01, 3.0]])
    assert torch.equal(agent.encoder.normalize(x), x) and not agent.encoder.normalizer_fitted
    rng = np.random.default_rng(0)
    states = np.stack([rng.normal(0.5, 0.1, 1000), np.full(1000, 0.01), rng.normal(3.0, 2.0, 1000)], 1)
    agent.encoder.fit_state_normalizer(states)
    z = agent.encoder.normalize(torch.as_tensor(states, dtype=torch.float32))
    assert torch.allclose(z.mean(0), torch.zeros(3), atol=1e-4)
    assert torch.allclose(z.std(0), torch.tensor([1.0, 0.0, 1.0]), atol=1e-3)  # constant dim: floored, not blown up
    other = SACAgent(ObsSpec(3), 2, SACConfig(num_critics=2))
    other.load_policy_state(agent.policy_state())  # the actor gets the same standardisation with the weights
    assert other.encoder.normalizer_fitted
    np.testing.assert_allclose(other.act({"state": states[0]}, deterministic=True),
                               agent.act({"state": states[0]}, deterministic=True))
    with pytest.raises(ValueError, match="NaN"):
        agent.encoder.fit_state_normalizer(np.full((4, 3), np.nan))
