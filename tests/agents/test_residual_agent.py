"""The residual agent on its own: exactly the base before it learns, bounded always, critic-only warm-up and the
annealed bound, learning a correction of a biased base on real replay samples, the demos' BC term, exact resume."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from robot_rl.agents import make_agent
from robot_rl.agents.residual import ResidualAgent
from robot_rl.agents.residual_config import ResidualConfig
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec

SPEC = ObsSpec(3)
SMALL = dict(hidden_dims=(64, 64), num_critics=4, batch_size=64, utd=2)


def batch_obs(rng, n: int) -> dict:
    return {"state": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            "base_action": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
            "chunk_index": rng.integers(-1, 8, n)}


@pytest.mark.parametrize("stochastic", [False, True])
def test_the_untrained_residual_executes_the_base_exactly(stochastic: bool) -> None:
    rng = np.random.default_rng(0)
    cfg = ResidualConfig(**SMALL, critic_warmup_updates=0, scale_anneal_updates=0, stochastic=stochastic)
    agent = make_agent(cfg, SPEC, 2, seed=3)
    obs = batch_obs(rng, 32)
    assert np.array_equal(agent.act(obs, deterministic=True), obs["base_action"])
    one = {"state": obs["state"][0], "base_action": obs["base_action"][0], "chunk_index": np.int64(2)}
    assert np.array_equal(agent.act(one, deterministic=True), obs["base_action"][0])
    explore = agent.act(obs)  # exploration noise (fixed, or the Gaussian's initial std), inside the bound
    inside = np.abs(obs["base_action"]) < 0.75  # rows the clip to [-1, 1] does not cut
    gap = np.abs(explore - obs["base_action"])
    assert 0 < gap.max() <= 0.2 + 1e-6
    # noise of std 0.1 (exploration_std, in action units for both) cut at the bound 0.2: a mean |gap| near 0.08
    assert 0.06 < gap[inside].mean() < 0.1, gap[inside].mean()
    no_phase = agent.act({"state": obs["state"], "base_action": obs["base_action"]}, deterministic=True)
    assert np.array_equal(no_phase, obs["base_action"])  # no chunk index: encoded as a held step
    with pytest.raises(ValueError, match="base_policy.path"):
        agent.act({"state": obs["state"]})


def fill(replay: ReplayBuffer, rng, n: int, target: np.ndarray, source: str = "online", explore: float = 0.5) -> None:
    """One-step episodes of a bandit: reward -||a - target||^2; the base proposes target + 0.3 (a biased base)."""
    for _ in range(n):
        s = rng.uniform(-1, 1, 3).astype(np.float32)
        base = np.clip(target + 0.3, -1, 1).astype(np.float32)
        a = np.clip(base + rng.uniform(-explore, explore, 2), -1, 1).astype(np.float32)
        replay.add({"state": s}, a, -float(np.sum((a - target) ** 2)), True, False, {"state": s}, source=source,
                   base_action=base, chunk_index=0)


@pytest.mark.parametrize(("stochastic", "critic_base_input"), [(False, True), (True, True), (False, False)])
def test_residual_learns_to_correct_a_biased_base_within_its_bound(stochastic: bool, critic_base_input: bool) -> None:
    rng = np.random.default_rng(0)
    target = np.array([0.2, -0.4], np.float32)
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=4000, demos_capacity=10, interventions_capacity=10))
    replay.with_base = True
    fill(replay, rng, 2000, target)
    cfg = ResidualConfig(**SMALL, residual_scale=0.2, critic_warmup_updates=20, scale_anneal_updates=40, n_step=1,
                         stochastic=stochastic, critic_base_input=critic_base_input)
    agent = ResidualAgent(SPEC, 2, cfg, seed=0)
    s = agent.sampling(cfg)
    replay.set_n_step(s.n_step, s.discount)
    obs = {"state": rng.uniform(-1, 1, (16, 3)).astype(np.float32),
           "base_action": np.tile(np.clip(target + 0.3, -1, 1), (16, 1)).astype(np.float32),
           "chunk_index": np.zeros(16, np.int64)}
    bounds = []
    for i in range(300):
        agent.prepare(replay)
        metrics = agent.update(replay.sample(s.batch_size, mix={"online": 1.0}, utd=s.utd))
        bounds.append(metrics["residual_bound"])
        if i < 19:  # critic-only warm-up: the base acts alone
            assert np.array_equal(agent.act(obs, deterministic=True), obs["base_action"])
            assert "actor_loss" not in metrics
    assert bounds[18] == 0.0 and bounds[39] == pytest.approx(0.1) and bounds[-1] == pytest.approx(0.2)
    if stochastic:  # SAC's temperature is tuned, and the Gaussian's entropy is logged
        assert metrics["alpha"] != pytest.approx(0.01) and np.isfinite(metrics["entropy"])
    action = agent.act(obs, deterministic=True)
    assert np.all(np.abs(action - obs["base_action"]) <= 0.2 + 1e-6)
    # the base misses by +0.3 per dim; the bound allows 0.2 of correction, and the residual takes over half of it
    assert np.all(obs["base_action"] - action > 0.1), action[:2]


@pytest.mark.parametrize("stochastic", [False, True])
def test_resume_restores_the_agent_exactly(stochastic: bool) -> None:
    rng = np.random.default_rng(1)
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=600, demos_capacity=10, interventions_capacity=10))
    replay.with_base = True
    fill(replay, rng, 300, np.zeros(2, np.float32))
    cfg = ResidualConfig(**SMALL, critic_warmup_updates=2, scale_anneal_updates=4, stochastic=stochastic)
    agent = ResidualAgent(SPEC, 2, cfg, seed=0)
    agent.prepare(replay)
    with pytest.raises(ValueError, match="needs n-step samples"):  # n_step 3 without n-step sampling
        agent.update(replay.sample(64, mix={"online": 1.0}, utd=2))
    s = ResidualAgent.sampling(cfg)
    replay.set_n_step(s.n_step, s.discount)
    for _ in range(5):
        agent.update(replay.sample(64, mix={"online": 1.0}, utd=2))
    twin = ResidualAgent(SPEC, 2, cfg, seed=9)
    twin.load_state_dict(copy.deepcopy(agent.state_dict()))
    batch = replay.sample(64, mix={"online": 1.0}, utd=2)
    assert agent.update(copy.deepcopy(batch)) == twin.update(copy.deepcopy(batch))
    for k, v in agent.policy_state().items():
        assert torch.equal(v, twin.policy_state()[k]), k
    assert torch.equal(agent.log_alpha, twin.log_alpha)
    actor = ResidualAgent(SPEC, 2, cfg, seed=5)  # an actor process: policy weights only
    actor.load_policy_state(agent.policy_state())
    obs = batch_obs(rng, 8)
    assert np.array_equal(actor.act(obs, deterministic=True), agent.act(obs, deterministic=True))


def open_gripper_bandit(rng) -> ReplayBuffer:
    """One-step episodes: the base proposes [0.5, -1] (gripper open), reward -||a - [0.2, 1]||^2."""
    target, base = np.array([0.2, 1.0], np.float32), np.array([0.5, -1.0], np.float32)
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=4000, demos_capacity=10, interventions_capacity=10))
    replay.with_base = True
    for _ in range(2000):
        s = rng.uniform(-1, 1, 3).astype(np.float32)
        a = np.clip(base + rng.uniform([-0.3, 0.0], [0.3, 2.0]), -1, 1).astype(np.float32)
        replay.add({"state": s}, a, -float(np.sum((a - target) ** 2)), True, False, {"state": s},
                   base_action=base, chunk_index=0)
    return replay


def train_online(agent: ResidualAgent, replay: ReplayBuffer, updates: int) -> dict:
    """``updates`` updates on online rows sampled as the agent's config asks; the last update's metrics."""
    s = agent.sampling(agent.cfg)
    replay.set_n_step(s.n_step, s.discount)
    agent.prepare(replay)
    for _ in range(updates):
        metrics = agent.update(replay.sample(s.batch_size, mix={"online": 1.0}, utd=s.utd))
    return metrics


def test_per_dimension_bounds_let_the_residual_cross_an_absolute_command() -> None:
    """A base that holds its gripper open (-1) where the target is closed (+1): a bound of 2 on that dimension alone
    lets the residual close it, while the motion dimension stays within its own small bound."""
    rng = np.random.default_rng(0)
    replay = open_gripper_bandit(rng)
    cfg = ResidualConfig(**SMALL, residual_scales=(0.2, 2.0), critic_warmup_updates=20, scale_anneal_updates=40,
                         n_step=1, residual_penalty=0.01)
    agent = ResidualAgent(SPEC, 2, cfg, seed=0)
    assert train_online(agent, replay, 400)["residual_bound"] == pytest.approx(2.0)
    assert torch.allclose(agent.actor.bound, torch.tensor([0.2, 2.0]))
    obs = {"state": rng.uniform(-1, 1, (16, 3)).astype(np.float32),
           "base_action": np.tile([0.5, -1.0], (16, 1)).astype(np.float32), "chunk_index": np.zeros(16, np.int64)}
    action = agent.act(obs, deterministic=True)
    assert np.all(action[:, 0] >= 0.3 - 1e-6) and np.all(action[:, 0] < 0.45)  # moved down, at most 0.2
    assert np.all(action[:, 1] > 0.0)  # the gripper crossed over to closed
    old = {k: (v[:1] if k == "actor.bound" else v) for k, v in agent.policy_state().items()}  # a [1]-bound policy
    actor = ResidualAgent(SPEC, 2, cfg, seed=5)
    actor.load_policy_state(old)
    assert torch.equal(actor.actor.bound, torch.tensor([0.2, 0.2]))


def gripper_after_a_residual_past_the_edge(straight_through: bool) -> np.ndarray:
    """open_gripper_bandit with the residual starting at -0.6 on the
    gripper, so base + residual = -1.6 lies past the clip: the executed gripper command after 300 updates."""
    rng = np.random.default_rng(0)
    replay, base = open_gripper_bandit(rng), np.array([0.5, -1.0], np.float32)
    cfg = ResidualConfig(**SMALL, residual_scales=(0.2, 2.0), critic_warmup_updates=20, scale_anneal_updates=0,
                         n_step=1, straight_through_clip=straight_through)
    agent = ResidualAgent(SPEC, 2, cfg, seed=0)
    with torch.no_grad():
        agent.actor.net[-1].bias[1] = float(np.arctanh(-0.3))  # residual -0.6 once the bound is 2
    assert train_online(agent, replay, 300)["residual_bound"] == pytest.approx(2.0)
    obs = {"state": rng.uniform(-1, 1, (16, 3)).astype(np.float32), "base_action": np.tile(base, (16, 1)),
           "chunk_index": np.zeros(16, np.int64)}
    return agent.act(obs, deterministic=True)[:, 1]


def test_the_residual_comes_back_from_past_the_clip() -> None:
    """Where the clip cuts base + residual, its gradient is zero: without the straight-through gradient the
    critics cannot pull the gripper residual back, and the gripper stays open; with it, the gripper closes."""
    assert np.all(gripper_after_a_residual_past_the_edge(straight_through=False) == -1.0)
    assert np.all(gripper_after_a_residual_past_the_edge(straight_through=True) > 0.0)


def test_bad_residual_configs_are_refused() -> None:
    for bad in ({"residual_scale": 0.0}, {"n_step": 0}, {"num_min_critics": 20}, {"residual_scales": (0.3, 2.5)},
                {"clip_excess_penalty": -1.0}, {"bc_decay_updates": -1}, {"init_temperature": 0.0},
                {"stochastic": True, "exploration_std": 0.0}):
        with pytest.raises(ValueError, match="residual"):
            ResidualConfig(**bad).validate()
    with pytest.raises(ValueError, match="residual_scales has 2 entries"):
        ResidualAgent(SPEC, 3, ResidualConfig(residual_scales=(0.3, 2.0)))


def test_demo_rows_pull_the_residual_towards_the_demonstrator() -> None:
    """The BC term (on by default, on every demo row): demos that act 0.15 above a base proposing 0, online data
    that says nothing (reward 0 everywhere), so only the relabelled demo residuals can move the residual."""
    rng = np.random.default_rng(0)
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=2000, demos_capacity=2000, interventions_capacity=10))
    replay.with_base = True
    base = np.zeros(2, np.float32)
    for source, n in (("online", 1000), ("demo", 1000)):
        for _ in range(n):
            s = rng.uniform(-1, 1, 3).astype(np.float32)
            a = (np.full(2, 0.15) if source == "demo" else rng.uniform(-0.2, 0.2, 2)).astype(np.float32)
            replay.add({"state": s}, a, 0.0, True, False, {"state": s}, source=source, base_action=base,
                       chunk_index=0)
    obs = {"state": rng.uniform(-1, 1, (16, 3)).astype(np.float32), "base_action": np.zeros((16, 2), np.float32),
           "chunk_index": np.zeros(16, np.int64)}
    residuals = {}
    for bc_weight in (2.5, 0.0):
        cfg = ResidualConfig(**SMALL, residual_scale=0.2, critic_warmup_updates=10, scale_anneal_updates=0, n_step=1,
                             bc_weight=bc_weight)
        assert not cfg.bc_q_filter
        agent = ResidualAgent(SPEC, 2, cfg, seed=0)
        s = agent.sampling(cfg)
        replay.set_n_step(s.n_step, s.discount)
        agent.prepare(replay)
        for _ in range(120):
            metrics = agent.update(replay.sample(s.batch_size, utd=s.utd))
        residuals[bc_weight] = agent.act(obs, deterministic=True)
    assert metrics["residual_bound"] == pytest.approx(0.2)
    assert np.all(np.abs(residuals[2.5] - 0.15) < 0.05), residuals[2.5]  # what the demonstrator did
    assert np.abs(residuals[0.0] - 0.15).mean() > np.abs(residuals[2.5] - 0.15).mean() + 0.03  # not the critics' doing


def residual_beside_a_right_base(actor_pessimism: float, seed: int = 0) -> float:
    """The base is right (reward -||a - base||^2) and the data explore only 0.05 around it: the mean |residual| the
    agent learns within a bound of 0.5."""
    rng = np.random.default_rng(seed)
    base = np.array([0.1, -0.2], np.float32)
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=4000, demos_capacity=10, interventions_capacity=10))
    replay.with_base = True
    for _ in range(2000):
        s = rng.uniform(-1, 1, 3).astype(np.float32)
        a = (base + rng.uniform(-0.05, 0.05, 2)).astype(np.float32)
        replay.add({"state": s}, a, -float(np.sum((a - base) ** 2)), True, False, {"state": s}, base_action=base,
                   chunk_index=0)
    cfg = ResidualConfig(**SMALL, residual_scale=0.5, critic_warmup_updates=50, scale_anneal_updates=0, n_step=1,
                         actor_pessimism=actor_pessimism)
    agent = ResidualAgent(SPEC, 2, cfg, seed=seed)
    s = agent.sampling(cfg)
    replay.set_n_step(s.n_step, s.discount)
    agent.prepare(replay)
    for _ in range(300):
        metrics = agent.update(replay.sample(s.batch_size, mix={"online": 1.0}, utd=s.utd))
    assert ("q_pi_std" in metrics) == (actor_pessimism > 0)
    obs = {"state": rng.uniform(-1, 1, (64, 3)).astype(np.float32), "base_action": np.tile(base, (64, 1)),
           "chunk_index": np.zeros(64, np.int64)}
    return float(np.abs(agent.act(obs, deterministic=True) - obs["base_action"]).mean())


def test_actor_pessimism_keeps_the_residual_where_the_critics_have_data() -> None:
    """With the critics' mean, the residual follows their extrapolation most of the way to its bound although the
    base is right; with their mean minus 3 standard deviations it stays within the explored 0.05."""
    assert residual_beside_a_right_base(0.0) > 0.25
    assert residual_beside_a_right_base(3.0) < 0.05
    with pytest.raises(ValueError, match="actor_pessimism"):
        ResidualConfig(actor_pessimism=-1.0).validate()


def test_the_bc_weight_decays_to_zero_after_the_warm_up() -> None:
    """bc_decay_updates: the full weight through the critic warm-up, half of it halfway, then no BC term at all."""
    rng = np.random.default_rng(0)
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=400, demos_capacity=400, interventions_capacity=10))
    replay.with_base = True
    fill(replay, rng, 300, np.zeros(2, np.float32), source="demo")
    fill(replay, rng, 300, np.zeros(2, np.float32))
    cfg = ResidualConfig(**SMALL, critic_warmup_updates=4, scale_anneal_updates=0, n_step=1, bc_decay_updates=10)
    agent = ResidualAgent(SPEC, 2, cfg, seed=0)
    s = agent.sampling(cfg)
    replay.set_n_step(s.n_step, s.discount)
    agent.prepare(replay)
    weights, bc_losses = [], []
    for _ in range(16):
        weights.append(agent._faded(cfg.bc_weight, cfg.bc_decay_updates))
        bc_losses.append("bc_loss" in agent.update(replay.sample(s.batch_size, utd=s.utd)))
    assert weights[:5] == [2.5] * 5 and weights[9] == pytest.approx(1.25) and weights[14:] == [0.0, 0.0]
    assert bc_losses[4:14] == [True] * 10 and bc_losses[14:] == [False, False]


@pytest.mark.parametrize("base_input", [True, False])
def test_actor_and_critics_read_the_base_proposal_only_when_asked(base_input: bool) -> None:
    rng = np.random.default_rng(0)
    cfg = ResidualConfig(**SMALL, actor_base_input=base_input, critic_base_input=base_input)
    agent = ResidualAgent(SPEC, 2, cfg, seed=0)
    agent.actor.bound.fill_(0.5)
    with torch.no_grad():  # an actor whose output depends on its input
        agent.actor.net[-1].weight.normal_(0, 1.0)
    obs = batch_obs(rng, 8)
    other = {**obs, "base_action": -obs["base_action"]}  # the same states and steps, other proposals
    action = torch.as_tensor(rng.uniform(-1, 1, (8, 2)).astype(np.float32))
    values, residuals = [], []
    for o in (obs, other):
        t = {k: torch.as_tensor(v) for k, v in o.items()}
        x = agent._features(agent.encoder(t), t["base_action"], t["chunk_index"])
        values.append(agent.critic.net(agent.critic_input(x), action).detach())
        residuals.append(agent.actor(agent._actor_input(x)).detach())
    assert torch.equal(values[0], values[1]) != base_input
    assert torch.equal(residuals[0], residuals[1]) != base_input
