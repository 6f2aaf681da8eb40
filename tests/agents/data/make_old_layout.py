"""Writes ``old_layout.safetensors``: checkpoints (``state_dict``) and policies (``policy_state``) of small SAC,
residual and ibrl agents as the code of commit 46aecde (before the critic component, issue #47) saved them, with a
batch, the deterministic actions on some observations, and what one more ``update`` on that batch gave. The test
``tests/agents/test_critic.py::test_checkpoints_of_the_previous_layout_load_and_learn_alike`` loads them with the
current code. Regenerate only from that commit::

    git worktree add /tmp/old 46aecde
    PYTHONPATH=/tmp/old python tests/agents/data/make_old_layout.py tests/agents/data/old_layout.safetensors
"""

from __future__ import annotations

import copy
import sys

import numpy as np
import torch

from robot_rl.agents.registry import make_agent
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec
from robot_rl.utils.state_io import save_state

SPEC = ObsSpec(5)
A = 2
SMALL = {"hidden_dims": (16, 16), "num_critics": 3, "batch_size": 8, "utd": 2}
CASES = {  # name -> agent config fields (the test builds the same configs)
    "sac": {"name": "sac", **SMALL, "bc_weight": 1.0},
    "sac_autograd_hl": {"name": "sac", **SMALL, "manual_grad": False, "hl_gauss": True, "hl_gauss_bins": 11,
                        "hl_gauss_range": (-5.0, 5.0)},
    "residual": {"name": "residual", **SMALL, "critic_warmup_updates": 1, "scale_anneal_updates": 2},
    "residual_stochastic": {"name": "residual", **SMALL, "critic_warmup_updates": 1, "stochastic": True},
    "ibrl": {"name": "ibrl", **SMALL, "critic_warmup_updates": 1},
}


def replay_for(rng: np.random.Generator, base: bool) -> ReplayBuffer:
    replay = ReplayBuffer(SPEC, A, ReplayConfig(online_capacity=400, demos_capacity=100, interventions_capacity=10))
    replay.with_base = base
    for i in range(300):
        s, s2 = (rng.uniform(-1, 1, 5).astype(np.float32) for _ in range(2))
        a = rng.uniform(-1, 1, A).astype(np.float32)
        extra = {"base_action": rng.uniform(-1, 1, A).astype(np.float32), "chunk_index": i % 4} if base else {}
        replay.add({"state": s}, a, float(rng.standard_normal()), bool(i % 7 == 0), False, {"state": s2},
                   source="demo" if i < 60 else "online", **extra)
    return replay


def case(fields: dict) -> dict:
    from robot_rl.agents.base import AgentConfig
    from robot_rl.config import from_dict

    cfg = from_dict(AgentConfig.resolve_config_class(fields), dict(fields))
    rng = np.random.default_rng(0)
    base = fields["name"] != "sac"
    replay = replay_for(rng, base)
    agent = make_agent(cfg, SPEC, A, seed=0)
    sampling = type(agent).sampling(cfg)
    replay.set_n_step(sampling.n_step, sampling.discount)
    agent.prepare(replay)
    for _ in range(4):
        agent.update(replay.sample(sampling.batch_size, utd=sampling.utd))
    batch = replay.sample(sampling.batch_size, utd=sampling.utd)
    obs = {"state": rng.uniform(-1, 1, (8, 5)).astype(np.float32)}
    if base:
        obs.update(base_action=rng.uniform(-1, 1, (8, A)).astype(np.float32), chunk_index=np.arange(8) % 4)
    out = {"state": copy.deepcopy(agent.state_dict()), "policy": agent.policy_state(), "obs": obs,
           "action": agent.act(obs, deterministic=True), "batch": copy.deepcopy(batch)}
    metrics = agent.update(batch)
    after = agent.state_dict()
    out["after"] = {k: after[k] for k in ("actor", "critic", "target_critic")}
    out["metrics"] = metrics
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    save_state(sys.argv[1], {name: case(fields) for name, fields in CASES.items()})
