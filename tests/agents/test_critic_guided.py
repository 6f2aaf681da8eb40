"""Critic-guided fine-tuning of the base's weights on its own: acts with the base's proposal, checks what base it
can train, moves the tiny VLA towards the action the critics value (a bandit with a known best action), ships the
base's weights in its policy state, and resumes exactly."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from robot_rl.agents import make_agent
from robot_rl.agents.critic_guided import CriticGuidedAgent
from robot_rl.agents.critic_guided_config import CriticGuidedConfig
from robot_rl.policies.vla_policy import load_vla
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec
from robot_rl.text import make_text_encoder

SPEC = ObsSpec(11, {"front": (32, 32, 3), "wrist": (32, 32, 3)}, 64)
BEST = np.array([0.4, -0.4, 0.2, 1.0], np.float32)  # the gripper (last) is open or closed
SCENE = {c: np.random.default_rng(i).integers(0, 240, (32, 32, 3)) for i, c in enumerate(("front", "wrist"))}
STATES = np.random.default_rng(7).normal(0, 1, (4, 11)).astype(np.float32)  # a few robot poses
SMALL = dict(hidden_dims=(128, 128), num_critics=4, batch_size=128, utd=2, n_step=1, critic_warmup_updates=0)


def observations(rng, n: int) -> dict:
    text = make_text_encoder("hash").encode("pick up the red cube")
    return {"state": STATES[rng.integers(0, len(STATES), n)],
            "pixels": {c: (SCENE[c] + rng.integers(0, 8, (n, *SCENE[c].shape))).astype(np.uint8) for c in SCENE},
            "instruction": np.tile(text, (n, 1)).astype(np.float32)}


def bandit_replay(rng, n: int, demos: int = 0, demo_action: np.ndarray = BEST) -> ReplayBuffer:
    """One-step episodes: reward -||a - BEST||^2 for uniform random actions (and ``demos`` rows that act
    ``demo_action``)."""
    replay = ReplayBuffer(SPEC, 4, ReplayConfig(online_capacity=n, demos_capacity=max(demos, 2),
                                                interventions_capacity=2))
    replay.with_base = True
    obs = observations(rng, n + demos)
    for i in range(n + demos):
        row = {"state": obs["state"][i], "pixels": {c: v[i] for c, v in obs["pixels"].items()},
               "instruction": obs["instruction"][i]}
        a = demo_action if i >= n else rng.uniform(-1, 1, 4).astype(np.float32)
        replay.add(row, a, -float(np.sum((a - BEST) ** 2)), True, False, row, source="demo" if i >= n else "online",
                   base_action=np.zeros(4, np.float32), chunk_index=0)
    return replay


def built(cfg: CriticGuidedConfig, seed: int = 0) -> CriticGuidedAgent:
    """The agent on the base its config names, loaded as a run loads it."""
    return CriticGuidedAgent(SPEC, 4, cfg, seed=seed, base=load_vla(cfg.base_path))


def first_actions(agent: CriticGuidedAgent, obs: dict) -> np.ndarray:
    """The base's deterministic decode's first action on each observation."""
    base = agent.base
    with torch.no_grad():
        inputs = agent.base.batch_inputs({"state": torch.as_tensor(obs["state"]), "instruction":
                                    torch.as_tensor(obs["instruction"]),
                                    "pixels": {c: torch.as_tensor(v) for c, v in obs["pixels"].items()}})
        return base.model.decode(base.model.encode(*inputs))[:, 0].clamp(-1, 1).numpy()


def test_acts_with_the_base_and_checks_the_base_it_trains(tiny_vla) -> None:
    cfg = CriticGuidedConfig(**SMALL, base_path=str(tiny_vla))
    agent = make_agent(cfg, SPEC, 4, seed=0, base=load_vla(cfg.base_path))
    rng = np.random.default_rng(0)
    proposal = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
    obs = {**observations(rng, 8), "base_action": proposal, "chunk_index": np.zeros(8, np.int64)}
    assert np.array_equal(agent.act(obs, deterministic=True), proposal)
    noisy = agent.act(obs)
    assert 0 < np.abs(noisy - proposal).max() < 0.5 and np.all(np.abs(noisy) <= 1)
    with pytest.raises(ValueError, match="saved robot_rl VLA"):
        CriticGuidedAgent.check_spaces(SPEC, 4, CriticGuidedConfig(base_path="ws://localhost:8000"))
    base = load_vla(cfg.base_path)  # the base is passed in (a run loads it: robot_rl.training.agents.build_agent)
    with pytest.raises(ValueError, match="cameras"):
        CriticGuidedAgent(ObsSpec(11, {"front": (32, 32, 3)}, 64), 4, cfg, base=base)
    with pytest.raises(ValueError, match="instruction_encoder"):
        CriticGuidedAgent(ObsSpec(11, SPEC.cameras, 384), 4, cfg, base=base)
    with pytest.raises(ValueError, match="base="):
        CriticGuidedAgent(SPEC, 4, cfg)
    # the base's weights are the policy state: another agent (an actor's) takes them over exactly
    with torch.no_grad():
        agent.base.model.flow_out.bias.add_(0.25)
    other = make_agent(cfg, SPEC, 4, seed=1, base=load_vla(cfg.base_path))
    other.load_policy_state(agent.policy_state())
    assert all(torch.equal(v, other.base_weights()[k]) for k, v in agent.base_weights().items())


def test_improvement_moves_the_base_towards_the_action_the_critic_values(tiny_vla) -> None:
    rng = np.random.default_rng(1)
    replay = bandit_replay(rng, 3000)
    cfg = CriticGuidedConfig(**{**SMALL, "critic_warmup_updates": 200}, base_path=str(tiny_vla), improve_every=1,
                             improve_batch=16, num_samples=8, base_lr=1e-4, noise_std=0.5, pick_pessimism=0.0)
    agent = built(cfg, seed=0)
    s = agent.sampling(cfg)
    assert not s.pixels  # critic samples skip the frames; improvement draws its own with them
    held_out = observations(np.random.default_rng(9), 64)
    before = np.linalg.norm(first_actions(agent, held_out) - BEST, axis=1).mean()
    gains = []
    for i in range(260):
        agent.prepare(replay)
        batch = replay.sample(s.batch_size, mix={"online": 1.0}, utd=s.utd, pixels=s.pixels)
        assert "pixels" not in batch["obs"]
        metrics = agent.update(batch)
        assert ("base_loss" in metrics) == (i >= 200)
        if i >= 200:
            gains.append(metrics["q_gain"])
    after = np.linalg.norm(first_actions(agent, held_out) - BEST, axis=1).mean()
    assert np.mean(gains) > 0  # the critics found better chunks than the decode among the samples
    assert after < 0.6 * before, (before, after)


def test_demo_rows_pull_the_base_to_their_action_and_resume_is_exact(tiny_vla) -> None:
    rng = np.random.default_rng(2)
    replay = bandit_replay(rng, 200, demos=200)
    cfg = CriticGuidedConfig(**SMALL, base_path=str(tiny_vla), improve_every=1, improve_batch=16, num_samples=4,
                             base_lr=1e-3, bc_weight=1.0, anchor_tau=0.1)  # the anchor's reference resumes too
    agent = built(cfg, seed=0)
    s = agent.sampling(cfg)
    for _ in range(3):
        agent.prepare(replay)
        agent.update(replay.sample(s.batch_size, utd=s.utd, pixels=False))
    twin = built(cfg, seed=5)
    state = copy.deepcopy(agent.state_dict())
    # as checkpoints before the critic component (46aecde) wrote it: the same keys, an unnamed optimizer group
    assert {"critic", "target_critic", "encoder", "optimizer", "critic_step"} <= set(state)
    del state["optimizer"]["param_groups"][0]["name"]
    twin.load_state_dict(state)
    replay_twin = copy.deepcopy(replay)
    for a, r in ((agent, replay), (twin, replay_twin)):
        a.prepare(r)
        a.update(r.sample(s.batch_size, utd=s.utd, pixels=False))
    assert twin.improve_step == agent.improve_step == 4
    assert all(torch.equal(v, twin.base_weights()[k]) for k, v in agent.base_weights().items())
    assert all(torch.equal(v, twin.critic.net.state_dict()[k]) for k, v in agent.critic.net.state_dict().items())
    assert all(torch.equal(v, twin.reference.state_dict()[k]) for k, v in agent.reference.state_dict().items())


def test_the_pick_moves_only_where_the_critics_agree_on_a_gain(tiny_vla) -> None:
    agent = built(CriticGuidedConfig(**SMALL, base_path=str(tiny_vla)))
    # sample 1 looks best to two members and worst to the other two: whichever half picks, the other half refutes
    split = torch.tensor([[[0.5, 1.6, 0.4]], [[0.5, 0.0, 0.4]], [[0.5, 1.6, 0.4]], [[0.5, 0.0, 0.4]]])  # [4, 1, 3]
    # sample 2 is better than the decode by 0.1 for every member
    agreed = torch.tensor([[[0.5, 0.4, 0.60]], [[0.3, 0.2, 0.41]], [[0.7, 0.6, 0.79]], [[0.5, 0.4, 0.60]]])
    for _ in range(20):  # the halves are drawn at random each time
        best, gain = agent.pick(split)
        assert best.item() == 0 and gain.item() == 0.0
        best, gain = agent.pick(agreed)
        assert best.item() == 2 and abs(gain.item() - 0.1) < 0.02
    with pytest.raises(ValueError, match="pick_pessimism"):
        CriticGuidedConfig(pick_pessimism=-1.0).validate()


def test_the_anchor_holds_the_decode_where_the_critics_verified_no_gain(tiny_vla) -> None:
    # a critic that values nothing (pick_pessimism so high that no pick is verified): with the anchor the decode
    # stays at the original base's while the head's own loss trains; without it, the same updates move it
    rng = np.random.default_rng(3)
    replay = bandit_replay(rng, 300)
    held_out = observations(np.random.default_rng(9), 32)
    moved = {}
    for anchor in (1.0, 0.0):
        cfg = CriticGuidedConfig(**SMALL, base_path=str(tiny_vla), improve_every=1, improve_batch=16,
                                 num_samples=4, base_lr=1e-3, sample_weight=0.1, pick_pessimism=1e9,
                                 anchor_weight=anchor)
        agent = built(cfg, seed=0)
        start = first_actions(agent, held_out)
        s = agent.sampling(cfg)
        for _ in range(30):
            agent.prepare(replay)
            metrics = agent.update(replay.sample(s.batch_size, mix={"online": 1.0}, utd=s.utd, pixels=False))
        assert metrics["kept_decode"] == 1.0
        moved[anchor] = float(np.abs(first_actions(agent, held_out) - start).mean())
    assert moved[1.0] < 0.2 * moved[0.0], moved


def test_with_anchor_tau_the_anchor_follows_the_fine_tuned_base(tiny_vla) -> None:
    # demo rows move the decode; the anchor's reference stays the original base (tau 0) or follows the base
    rng = np.random.default_rng(4)
    replay = bandit_replay(rng, 200, demos=200)
    held_out = observations(np.random.default_rng(11), 32)
    for tau in (0.0, 0.2):
        cfg = CriticGuidedConfig(**SMALL, base_path=str(tiny_vla), improve_every=1, improve_batch=16,
                                 num_samples=4, base_lr=1e-3, bc_weight=1.0, anchor_tau=tau)
        agent = built(cfg, seed=0)
        original = copy.deepcopy(agent.reference.state_dict())
        start = first_actions(agent, held_out)
        s = agent.sampling(cfg)
        for _ in range(30):
            agent.prepare(replay)
            agent.update(replay.sample(s.batch_size, utd=s.utd, pixels=False))
        now = first_actions(agent, held_out)
        agent.base.model, kept = agent.reference, agent.base.model  # the reference's own decode
        reference = first_actions(agent, held_out)
        agent.base.model = kept
        moved = np.abs(now - start).mean()
        assert moved > 0.1  # the demos moved the decode
        if tau == 0.0:
            assert all(torch.equal(v, agent.reference.state_dict()[k]) for k, v in original.items())
        else:  # most of the way to the base: 30 steps at 0.2 leave 0.8^30 of the start, plus the lag of each step
            assert np.abs(reference - now).mean() < 0.25 * moved, (np.abs(reference - now).mean(), moved)
    with pytest.raises(ValueError, match="anchor_tau"):
        CriticGuidedConfig(anchor_tau=1.5).validate()


def test_base_lr_decay_stops_the_base_and_resumes_on_schedule(tiny_vla) -> None:
    # demo rows move the decode while the rate lasts; after base_lr_decay_steps improvements the base stays put
    rng = np.random.default_rng(6)
    replay = bandit_replay(rng, 200, demos=200)
    cfg = CriticGuidedConfig(**SMALL, base_path=str(tiny_vla), improve_every=1, improve_batch=16, num_samples=4,
                             base_lr=1e-3, bc_weight=1.0, base_lr_decay_steps=4)
    agent = built(cfg, seed=0)
    s = agent.sampling(cfg)
    rates = []
    for _ in range(4):
        agent.prepare(replay)
        rates.append(agent.update(replay.sample(s.batch_size, utd=s.utd, pixels=False))["base_lr"])
    assert rates == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3])
    twin = built(cfg, seed=3)
    twin.load_state_dict(copy.deepcopy(agent.state_dict()))
    assert twin.base_lr() == agent.base_lr() == 0.0  # the schedule resumes from the step count
    frozen = copy.deepcopy(agent.base_weights())
    for _ in range(3):
        agent.prepare(replay)
        assert agent.update(replay.sample(s.batch_size, utd=s.utd, pixels=False))["base_lr"] == 0.0
    assert all(torch.equal(v, agent.base_weights()[k]) for k, v in frozen.items())
    with pytest.raises(ValueError, match="base_lr_decay_steps"):
        CriticGuidedConfig(base_lr_decay_steps=-1).validate()


def test_demo_filter_follows_only_the_demos_the_critics_verify(tiny_vla) -> None:
    # demos that act the best action beat the decode and are followed; demos that act its opposite are not
    followed = {}
    for name, demo_action in (("best", BEST), ("worst", -BEST)):
        replay = bandit_replay(np.random.default_rng(8), 1500, demos=500, demo_action=demo_action)
        cfg = CriticGuidedConfig(**{**SMALL, "critic_warmup_updates": 150}, base_path=str(tiny_vla), improve_every=1,
                                 improve_batch=32, num_samples=4, base_lr=1e-5, demo_filter=True)
        agent = built(cfg, seed=0)
        s = agent.sampling(cfg)
        shares = []
        for i in range(170):
            agent.prepare(replay)
            metrics = agent.update(replay.sample(s.batch_size, utd=s.utd, pixels=False))
            if i >= 150:
                shares.append(metrics["demos_followed"])
        followed[name] = float(np.mean(shares))
    assert followed["best"] > 0.8 and followed["worst"] < 0.05, followed
