"""The IBRL agent on its own: the base alone through the critic warm-up, the critics' choice between the base's
action and the actor's (kept on a right base, taken over from a wrong one beyond any residual bound), the choice
made the same in an actor process from the policy weights, exact resume."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from robot_rl.agents import make_agent
from robot_rl.agents.ibrl import IBRLAgent, IBRLConfig
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from tests.agents.test_residual_agent import SMALL, SPEC, batch_obs, fill, train_online


def states(rng, base: np.ndarray, n: int = 16) -> dict:
    return {"state": rng.uniform(-1, 1, (n, 3)).astype(np.float32), "base_action": np.tile(base, (n, 1)),
            "chunk_index": np.zeros(n, np.int64)}


def test_the_base_acts_alone_through_the_critic_warm_up() -> None:
    rng = np.random.default_rng(0)
    agent = make_agent(IBRLConfig(**SMALL, critic_warmup_updates=5), SPEC, 2, seed=3)
    assert isinstance(agent, IBRLAgent) and torch.equal(agent.actor.bound, torch.zeros(2))
    obs = batch_obs(rng, 32)
    assert np.array_equal(agent.act(obs), obs["base_action"])  # exploration too: the base's action exactly
    assert np.array_equal(agent.act(obs, deterministic=True), obs["base_action"])


def bandit(rng, base: np.ndarray, best: np.ndarray, explore: float) -> ReplayBuffer:
    """One-step episodes: the base proposes ``base``, the stored actions lie within ``explore`` of it (cut to
    [-1, 1]), reward -||a - best||^2."""
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=4000, demos_capacity=10, interventions_capacity=10))
    replay.with_base = True
    for _ in range(2000):
        s = rng.uniform(-1, 1, 3).astype(np.float32)
        a = np.clip(base + rng.uniform(-explore, explore, 2), -1, 1).astype(np.float32)
        replay.add({"state": s}, a, -float(np.sum((a - best) ** 2)), True, False, {"state": s}, base_action=base,
                   chunk_index=0)
    return replay


def test_a_wrong_base_is_left_beyond_any_residual_bound() -> None:
    """The base proposes [0.5, -1] where [0.2, 1] is best (data over the whole action range): the actor's action is
    chosen wherever the critics value it higher, so the executed action reaches the target (a residual would need
    a bound of 2 on the second dimension)."""
    rng = np.random.default_rng(0)
    base = np.array([0.5, -1.0], np.float32)
    replay = bandit(rng, base, np.array([0.2, 1.0], np.float32), explore=2.0)
    agent = IBRLAgent(SPEC, 2, IBRLConfig(**SMALL, critic_warmup_updates=20, n_step=1), seed=0)
    metrics = train_online(agent, replay, 600)
    assert metrics["actor_share"] > 0.9 and torch.equal(agent.actor.bound, torch.ones(2))
    action = agent.act(states(rng, base), deterministic=True)
    assert np.all(np.abs(action - [0.2, 1.0]) < 0.2), action[:3]


def test_a_right_base_keeps_being_chosen() -> None:
    """A base that proposes the best action (one-step episodes, reward -||a - base||^2, explored around it): the
    critics value it at least as high as what the actor proposes, so the executed action stays near the base's."""
    rng = np.random.default_rng(0)
    base = np.array([0.2, -0.4], np.float32)
    replay = bandit(rng, base, base, explore=0.5)
    agent = IBRLAgent(SPEC, 2, IBRLConfig(**SMALL, critic_warmup_updates=20, n_step=1), seed=0)
    train_online(agent, replay, 300)
    action = agent.act(states(rng, base, 64), deterministic=True)
    assert np.all(np.abs(action - base) < 0.15), action[:3]


def trained_chooser(cfg: IBRLConfig) -> tuple[IBRLAgent, ReplayBuffer, np.random.Generator]:
    """An agent past a 2-update warm-up, 20 updates on states around a zero base: its choice goes both ways."""
    rng = np.random.default_rng(1)
    replay = ReplayBuffer(SPEC, 2, ReplayConfig(online_capacity=600, demos_capacity=10, interventions_capacity=10))
    replay.with_base = True
    fill(replay, rng, 300, np.zeros(2, np.float32))
    agent = IBRLAgent(SPEC, 2, cfg, seed=0)
    train_online(agent, replay, 20)
    return agent, replay, rng


def test_an_actor_process_chooses_as_the_learner_and_resume_is_exact() -> None:
    cfg = IBRLConfig(**SMALL, critic_warmup_updates=2)
    agent, replay, rng = trained_chooser(cfg)
    actor = IBRLAgent(SPEC, 2, cfg, seed=5)  # an actor process: the policy weights only, critics included
    actor.load_policy_state(agent.policy_state())
    obs = batch_obs(rng, 64)
    chosen = agent.act(obs, deterministic=True)
    assert np.array_equal(actor.act(obs, deterministic=True), chosen)
    assert 0 < np.mean(np.all(chosen == obs["base_action"], axis=1)) < 1  # some states each way: the choice is real
    twin = IBRLAgent(SPEC, 2, cfg, seed=9)
    twin.load_state_dict(copy.deepcopy(agent.state_dict()))
    batch = replay.sample(64, mix={"online": 1.0}, utd=2)
    assert agent.update(copy.deepcopy(batch)) == twin.update(copy.deepcopy(batch))


def test_the_residual_bounds_are_not_ibrl_fields() -> None:
    """The actor's output is a whole action: ibrl has none of the residual's bounds and clip options."""
    fields = {f.name for f in dataclasses.fields(IBRLConfig)}
    assert not fields & {"residual_scale", "residual_scales", "straight_through_clip", "clip_excess_penalty"}
    assert IBRLConfig().bounds(2) == (1.0, 1.0) and IBRLConfig().straight_through() == (False, 0.0)
    with pytest.raises(ValueError, match="n_step"):
        IBRLConfig(n_step=0).validate()


def test_a_pessimistic_choice_compares_lower_confidence_bounds() -> None:
    """choice_pessimism k: the actor's action runs where mean - k std of the critics' values for it beats the same
    bound for the base's proposal; with k large the choice follows the ensemble's disagreement, not its mean."""
    plain, _, rng = trained_chooser(IBRLConfig(**SMALL, critic_warmup_updates=2))
    wary = IBRLAgent(SPEC, 2, IBRLConfig(**SMALL, critic_warmup_updates=2, choice_pessimism=50.0), seed=0)
    wary.load_state_dict(copy.deepcopy(plain.state_dict()))
    obs = batch_obs(rng, 256)
    chosen = wary.act(obs, deterministic=True)
    with torch.no_grad():
        x = torch.as_tensor(obs["state"])
        feats = wary._features(wary.encoder({"state": x}), torch.as_tensor(obs["base_action"]),
                               torch.as_tensor(obs["chunk_index"]))
        q_base = wary.critic.values(wary.critic_input(feats), torch.as_tensor(obs["base_action"]))
        proposal = wary._raw_action(torch.as_tensor(obs["base_action"]), wary.actor(wary._actor_input(feats)))
        q_actor = wary.critic.values(wary.critic_input(feats), proposal.clamp(-1, 1))
    take = (q_actor.mean(0) - 50 * q_actor.std(0) > q_base.mean(0) - 50 * q_base.std(0)).numpy()
    as_base = np.all(chosen == obs["base_action"], axis=1)
    assert np.array_equal(~as_base, take)
    assert not np.array_equal(as_base, np.all(plain.act(obs, deterministic=True) == obs["base_action"], axis=1))
    with pytest.raises(ValueError, match="choice_pessimism"):
        IBRLConfig(choice_pessimism=-1.0).validate()


@pytest.mark.parametrize("decay_updates", [0, 200])
def test_the_base_anchor_holds_the_actor_near_the_base_until_it_fades(decay_updates: int) -> None:
    """The wrong-base bandit above with base_anchor_weight 20: held constant, the actor's proposal stays near the
    base although the critics value [0.2, 1] higher; faded out over 200 of 600 updates, the executed action reaches
    [0.2, 1] as without the anchor."""
    rng = np.random.default_rng(0)
    base = np.array([0.5, -1.0], np.float32)
    replay = bandit(rng, base, np.array([0.2, 1.0], np.float32), explore=2.0)
    cfg = IBRLConfig(**SMALL, critic_warmup_updates=20, n_step=1, base_anchor_weight=20.0,
                     base_anchor_decay_updates=decay_updates)
    agent = IBRLAgent(SPEC, 2, cfg, seed=0)
    metrics = train_online(agent, replay, 600)
    obs = states(rng, base)
    with torch.no_grad():
        feats = agent._features(agent.encoder({"state": torch.as_tensor(obs["state"])}),
                                torch.as_tensor(obs["base_action"]), torch.as_tensor(obs["chunk_index"]))
        proposal = agent.actor(agent._actor_input(feats)).clamp(-1, 1).numpy()
    if decay_updates == 0:
        assert metrics["base_anchor"] > 0 and np.all(np.abs(proposal - base) < 0.2), proposal[:3]
    else:
        assert "base_anchor" not in metrics
        assert np.all(np.abs(agent.act(obs, deterministic=True) - [0.2, 1.0]) < 0.2)
    with pytest.raises(ValueError, match="base_anchor"):
        IBRLConfig(base_anchor_weight=-1.0).validate()


def test_a_choice_per_chunk_is_held_until_the_next_chunk() -> None:
    """choice_per_chunk: the choice made at a chunk's first step holds at its later steps (missed steps too), where
    a choice per step would pick differently; the next chunk's first step chooses afresh."""
    cfg = IBRLConfig(**SMALL, critic_warmup_updates=2)
    per_step, _, rng = trained_chooser(cfg)
    held = IBRLAgent(SPEC, 2, dataclasses.replace(cfg, choice_per_chunk=True), seed=0)
    held.load_state_dict(copy.deepcopy(per_step.state_dict()))

    def actor_rows(agent: IBRLAgent, obs: dict) -> np.ndarray:
        return ~np.all(agent.act(obs, deterministic=True) == obs["base_action"], axis=1)

    first, later = batch_obs(rng, 64), batch_obs(rng, 64)
    first["chunk_index"][:] = 0
    later["chunk_index"][:] = 3
    later["chunk_index"][:8] = -1  # missed steps
    chosen = actor_rows(held, first)
    assert np.array_equal(chosen, actor_rows(per_step, first)) and 0 < chosen.mean() < 1
    assert not np.array_equal(actor_rows(per_step, later), chosen)  # a fresh choice would differ
    assert np.array_equal(actor_rows(held, later), chosen)
    later["chunk_index"][:] = 0
    assert np.array_equal(actor_rows(held, later), actor_rows(per_step, later))


def test_the_actor_acts_alone_after_the_handover_in_the_learner_an_actor_process_and_a_resume() -> None:
    """actor_alone_after_updates: before it the critics' choice runs the base on some states; after it every row
    runs the actor's action, the targets bootstrap from the actor alone (actor_share 1), and the switch travels
    with the policy weights and the checkpoint."""
    cfg = IBRLConfig(**SMALL, critic_warmup_updates=2, actor_alone_after_updates=10)
    agent, replay, rng = trained_chooser(dataclasses.replace(cfg, actor_alone_after_updates=100))
    assert not agent.actor_alone
    alone = IBRLAgent(SPEC, 2, cfg, seed=0)
    alone.load_state_dict(copy.deepcopy(agent.state_dict()))  # 20 updates done: past 2 + 10
    assert alone.actor_alone
    obs = batch_obs(rng, 64)
    as_base = np.all(agent.act(obs, deterministic=True) == obs["base_action"], axis=1)
    assert 0 < as_base.mean() < 1  # the choice still picks the base somewhere
    with torch.no_grad():
        feats = alone._features(alone.encoder({"state": torch.as_tensor(obs["state"])}),
                                torch.as_tensor(obs["base_action"]), torch.as_tensor(obs["chunk_index"]))
        proposal = alone.actor(alone._actor_input(feats)).clamp(-1, 1).numpy()
    assert np.array_equal(alone.act(obs, deterministic=True), proposal)
    actor = IBRLAgent(SPEC, 2, cfg, seed=5)  # an actor process: fresh, then the learner's policy weights
    assert not actor.actor_alone
    actor.load_policy_state(alone.policy_state())
    assert actor.actor_alone and np.array_equal(actor.act(obs, deterministic=True), proposal)
    assert alone.update(replay.sample(64, mix={"online": 1.0}, utd=2))["actor_share"] == 1.0
    early = IBRLAgent(SPEC, 2, cfg, seed=0)
    assert not early.actor_alone and not early.act(obs, deterministic=True).tolist() == proposal.tolist()
    with pytest.raises(ValueError, match="actor_alone_after_updates"):
        IBRLConfig(actor_alone_after_updates=-1).validate()


def test_a_choice_margin_sends_near_ties_to_the_base_when_acting_deterministically_or_exploring() -> None:
    """choice_margin m: the actor's action runs where the critics value it more than m above the base's proposal;
    with choice_margin_exploring off, exploring steps choose as without the margin."""
    plain, _, rng = trained_chooser(IBRLConfig(**SMALL, critic_warmup_updates=2))
    obs = batch_obs(rng, 256)
    with torch.no_grad():
        feats = plain._features(plain.encoder({"state": torch.as_tensor(obs["state"])}),
                                torch.as_tensor(obs["base_action"]), torch.as_tensor(obs["chunk_index"]))
        proposal = plain.actor(plain._actor_input(feats)).clamp(-1, 1)
        gap = (plain._choice_value(feats, proposal) - plain._choice_value(feats, torch.as_tensor(obs["base_action"])))
    margin = float(gap[gap > 0].median())

    def agent(**fields) -> IBRLAgent:
        out = IBRLAgent(SPEC, 2, IBRLConfig(**SMALL, critic_warmup_updates=2, **fields), seed=0)
        out.load_state_dict(copy.deepcopy(plain.state_dict()))
        return out

    as_base = np.all(agent(choice_margin=margin).act(obs, deterministic=True) == obs["base_action"], axis=1)
    assert np.array_equal(~as_base, (gap > margin).numpy()) and 0 < as_base.mean() < 1
    assert (gap > 0).sum() > (gap > margin).sum()  # the margin moved some rows to the base
    strict, lenient = agent(choice_margin=1e3), agent(choice_margin=1e3, choice_margin_exploring=False)
    assert np.array_equal(strict.act(obs), obs["base_action"])
    assert np.array_equal(lenient.act(obs, deterministic=True), obs["base_action"])
    assert not np.all(lenient.act(obs) == obs["base_action"])  # exploring: the plain choice picks the actor somewhere
    with pytest.raises(ValueError, match="choice_margin"):
        IBRLConfig(choice_margin=-1.0).validate()
