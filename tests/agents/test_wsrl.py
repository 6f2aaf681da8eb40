"""WSRL (robot_rl/agents/wsrl.py): conservative pre-training on the demos in slices, a warm-up that trains nothing,
then SAC updates on online data only; the phases survive a checkpoint; ``agent.name: wsrl`` selects it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from robot_rl.agents.registry import make_agent
from robot_rl.agents.wsrl import WSRLAgent, WSRLConfig
from robot_rl.config import load_yaml
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec
from robot_rl.training.config import TrainConfig

SPEC = ObsSpec(3)
ROOT = Path(__file__).resolve().parents[2]


def replay_with_demos(n: int = 400, online: int = 0) -> ReplayBuffer:
    """Demos of one-step episodes whose action is ``tanh(s @ W)``, rewarded 1; ``online`` random rows, reward 0."""
    rng = np.random.default_rng(0)
    w = np.array([[0.6, -0.4], [0.3, 0.5], [-0.2, 0.2]], np.float32)
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=1000, demos_capacity=2 * n + 2,
                                                interventions_capacity=4))
    for _ in range(n):
        s = rng.uniform(-1, 1, 3).astype(np.float32)
        replay.add({"state": s}, np.tanh(s @ w), 1.0, True, False, {"state": s}, source="demo")
    for _ in range(online):
        s = rng.uniform(-1, 1, 3).astype(np.float32)
        replay.add({"state": s}, rng.uniform(-1, 1, 2).astype(np.float32), 0.0, True, False, {"state": s})
    return replay


def small(**kw) -> WSRLConfig:
    return WSRLConfig(num_critics=2, hidden_dims=(64, 64), batch_size=64, utd=2, **kw)


def q_gap(agent: WSRLAgent, replay: ReplayBuffer) -> float:
    """Mean Q of the demos' actions minus mean Q of uniform random actions at the same states."""
    batch = replay.sample(256, mix={"prior": 1.0})
    with torch.no_grad():
        z = agent.critic.encode({"state": torch.as_tensor(batch["obs"]["state"])}, augment=False)
        data = agent.critic.values(z, torch.as_tensor(batch["action"])).mean()
        rand = agent.critic.values(z, torch.rand(len(z), 2) * 2 - 1).mean()
    return float(data - rand)


def test_pretraining_runs_in_slices_then_warms_up_then_updates_on_online_data_only():
    replay = replay_with_demos(online=64)
    agent = WSRLAgent(SPEC, 2, small(pretrain_steps=250, pretrain_steps_per_call=100, warmup_updates=3), seed=0)
    s = WSRLAgent.sampling(agent.cfg)
    assert s.mix == {"online": 1.0} and s.needs == ("prior",)  # the demos are for pre-training only
    phases = []
    for _ in range(7):
        agent.prepare(replay)
        phases.append(agent.update(replay.sample(s.batch_size, mix=s.mix, utd=s.utd)))
    assert [m.get("pretrain_steps") for m in phases[:3]] == [100.0, 200.0, None]  # 100 steps a call, 250 in all
    assert agent.pretrained_steps == 250
    assert [m.get("warmup_left") for m in phases[2:5]] == [2.0, 1.0, 0.0]  # three learner steps that train nothing
    assert "critic_loss" in phases[5] and "actor_loss" in phases[6]  # then SAC's updates
    assert agent.update_step == 2


def test_pretraining_is_conservative_and_follows_the_demos():
    replay = replay_with_demos()
    conservative = WSRLAgent(SPEC, 2, small(pretrain_steps=300, pretrain_steps_per_call=300, cql_weight=1.0,
                                            bc_weight=1.0), seed=0)
    plain = WSRLAgent(SPEC, 2, small(pretrain_steps=300, pretrain_steps_per_call=300, cql_weight=0.0,
                                     bc_weight=1.0), seed=0)
    for agent in (conservative, plain):
        agent.prepare(replay)
    # CQL pushes down the actions the data does not take: a clear margin over plain SAC on the same data
    assert q_gap(conservative, replay) > 0.3 and q_gap(conservative, replay) > 2 * q_gap(plain, replay)
    batch = replay.sample(256, mix={"prior": 1.0})
    imitated = conservative.act({"state": batch["obs"]["state"]}, deterministic=True)
    assert np.abs(imitated - batch["action"]).mean() < 0.15


def test_a_checkpoint_keeps_the_phase():
    replay = replay_with_demos(online=32)
    agent = WSRLAgent(SPEC, 2, small(pretrain_steps=50, pretrain_steps_per_call=50, warmup_updates=5), seed=0)
    agent.prepare(replay)
    agent.update(replay.sample(64, mix={"online": 1.0}, utd=2))
    resumed = WSRLAgent(SPEC, 2, agent.cfg, seed=1)
    resumed.load_state_dict(agent.state_dict())
    assert (resumed.pretrained_steps, resumed.warmup_left) == (50, 4)
    resumed.prepare(replay)  # pre-training is not repeated
    assert resumed.pretrained_steps == 50 and "warmup_left" in resumed.update(replay.sample(64, utd=2))


def test_agent_name_wsrl_and_the_bundled_config():
    cfg = load_yaml(TrainConfig, ROOT / "robot_rl" / "configs" / "pickcube_wsrl.yaml")
    assert isinstance(cfg.agent, WSRLConfig) and cfg.demos == ["scripted:20"] and cfg.random_steps == 0
    cfg.validate()
    assert isinstance(make_agent(small(), SPEC, 2), WSRLAgent)
