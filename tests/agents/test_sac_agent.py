"""SAC/RLPD agent: ensemble maths, subset-min target, UTD bookkeeping, entropy tuning, pixels, state round trips."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from robot_rl.agents import EncoderConfig, SACAgent, SACConfig
from robot_rl.agents.encoders import frames_to_float, frames_to_input, random_shift
from robot_rl.agents.hl_gauss import HLGauss
from robot_rl.agents.networks import EnsembleCritic
from robot_rl.spaces import ObsSpec
from robot_rl.utils.state_io import load_state, save_state

D, A, B = 5, 2, 16
STATE = ObsSpec(D)


def batch(utd: int | None = 1, spec: ObsSpec = STATE, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    lead = (utd, B) if utd else (B,)

    def obs():
        o = {"state": rng.standard_normal((*lead, spec.state_dim)).astype(np.float32)}
        if spec.cameras:
            o["pixels"] = {c: rng.integers(0, 256, (*lead, *s), dtype=np.uint8) for c, s in spec.cameras.items()}
        if spec.instruction_dim:
            o["instruction"] = rng.standard_normal((*lead, spec.instruction_dim)).astype(np.float32)
        return o
    return {"obs": obs(), "next_obs": obs(), "action": rng.uniform(-1, 1, (*lead, A)).astype(np.float32),
            "reward": rng.standard_normal(lead).astype(np.float32), "terminated": rng.random(lead) < 0.1,
            "source": rng.integers(0, 3, lead).astype(np.uint8), "intervened": rng.random(lead) < 0.2}


def small(**kw) -> SACConfig:
    base = dict(hidden_dims=(32, 32), num_critics=4, num_min_critics=2, utd=1, batch_size=B)
    return SACConfig(**{**base, **kw})


@pytest.mark.parametrize("layer_norm", [True, False])
def test_ensemble_matches_per_critic_reference(layer_norm):
    torch.manual_seed(0)
    critic = EnsembleCritic(3, 7, (16, 16), 1, layer_norm)
    with torch.no_grad():  # non-trivial LayerNorm affine so the per-member parameters matter
        for norm in critic.norms:
            if layer_norm:
                norm.weight.normal_()
                norm.bias.normal_()
    z, a = torch.randn(9, 5), torch.randn(9, 2)
    out = critic(z, a)
    assert out.shape == (3, 9, 1)
    for e in range(3):
        x = torch.cat([z, a], -1)
        for lin, norm in zip(critic.linears, critic.norms):
            x = x @ lin.weight[e] + lin.bias[e, 0]
            if layer_norm:
                x = F.layer_norm(x, x.shape[-1:]) * norm.weight[e, 0] + norm.bias[e, 0]
            x = F.relu(x)
        ref = x @ critic.head.weight[e] + critic.head.bias[e, 0]
        torch.testing.assert_close(out[e], ref, atol=1e-5, rtol=1e-5)
    members = torch.tensor([2, 0])
    torch.testing.assert_close(critic(z, a, members=members), out[members], atol=1e-6, rtol=1e-6)


def test_target_is_min_over_the_random_subset_not_all_critics():
    agent = SACAgent(ObsSpec(D), A, small(num_critics=4, num_min_critics=2, backup_entropy=False, discount=0.5))
    # Target critic member e outputs the constant 10*e + 1: head weights 0, bias = value.
    with torch.no_grad():
        agent.critic.target.head.weight.zero_()
        agent.critic.target.head.bias.copy_(torch.tensor([1.0, 11.0, 21.0, 31.0]).view(4, 1, 1))
    b = {k: v[0] if not isinstance(v, dict) else {kk: vv[0] for kk, vv in v.items()} for k, v in batch().items()}
    from robot_rl.agents.sac import to_torch
    tb = to_torch(b, agent.device)
    captured = {}
    original = agent.critic.net.forward

    def spy(z, action, detach_params=False, members=None):
        out = original(z, action, detach_params, members)
        if not detach_params:
            captured["q"] = out
        return out
    agent.critic.net.forward = spy
    for members, expected in (([2, 3], 21.0), ([1, 3], 11.0)):  # min over the subset, never the global min 1.0
        loss, _ = losses_at(agent, tb, torch.tensor(0.0), torch.tensor(members), update_actor=False)
        q = captured["q"].squeeze(-1)
        target = tb["reward"] + 0.5 * (1 - tb["terminated"]) * expected
        torch.testing.assert_close(loss, (q - target).pow(2).mean())


def test_utd_update_does_utd_critic_steps_and_one_actor_step():
    agent = SACAgent(ObsSpec(D), A, small(utd=5, tau=0.5))
    target_before = [p.clone() for p in agent.critic.target.parameters()]
    for call in range(1, 3):
        agent.update(batch(utd=5, seed=call))
        state = agent.critic.optimizer.state
        critic_steps = {int(state[p]["step"]) for p in agent.critic.net.parameters()}
        actor_steps = {int(state[p]["step"]) for p in agent.actor.parameters()}
        assert critic_steps == {5 * call} and actor_steps == {call}
        assert int(state[agent.log_alpha]["step"]) == call
    assert agent.critic.steps == 10 and agent.update_step == 2
    assert any(not torch.equal(a, b) for a, b in zip(target_before, agent.critic.target.parameters()))


@pytest.mark.parametrize("target_entropy, direction", [(50.0, 1), (-50.0, -1)])
def test_entropy_tuning_moves_alpha_toward_the_target(target_entropy, direction):
    agent = SACAgent(ObsSpec(D), A, small(target_entropy=target_entropy, temperature_lr=1e-2))
    before = agent.alpha
    for i in range(20):
        agent.update(batch(seed=i))
    assert np.sign(agent.alpha - before) == direction


def test_hl_gauss_projection_and_learning():
    hl = HLGauss(-10, 10, 51)
    y = torch.tensor([-7.3, 0.0, 4.2, 9.0])
    probs = hl.target_probs(y)
    torch.testing.assert_close(probs.sum(-1), torch.ones(4))
    torch.testing.assert_close(hl.to_scalar(probs.log()), y, atol=0.05, rtol=0)
    agent = SACAgent(ObsSpec(D), A, small(hl_gauss=True, hl_gauss_bins=21, hl_gauss_range=(-5.0, 5.0)))
    b = batch()
    first = agent.update(b)["critic_loss"]
    for _ in range(30):
        last = agent.update(b)["critic_loss"]
    assert last < first


PIX = ObsSpec(D, {"front": (24, 24, 3), "wrist": (24, 24, 3)})
PIX_ENC = EncoderConfig(conv_channels=(8, 8), conv_strides=(2, 1), latent_dim=16, augment_pad=2)


def test_pixel_agent_acts_and_updates_and_actor_grads_do_not_reach_encoder():
    agent = SACAgent(PIX, A, small(encoder=PIX_ENC))
    b = batch(None, PIX)
    single = {"state": b["obs"]["state"][0], "pixels": {c: f[0] for c, f in b["obs"]["pixels"].items()}}
    assert agent.act(single).shape == (A,)
    assert agent.act(b["obs"], deterministic=True).shape == (B, A)
    from robot_rl.agents.sac import to_torch
    tb = to_torch(b, agent.device)

    def losses(update_actor: bool) -> torch.Tensor:  # identical randomness for both calls
        agent.generator.manual_seed(0)
        return losses_at(agent, tb, torch.tensor(0.1), torch.tensor([0, 1]), update_actor)[0]

    agent.critic.optimizer.zero_grad(set_to_none=True)
    (losses(True) - losses(False)).backward()  # = actor loss + temperature loss, through the agent's own code
    assert all(p.grad is None or not p.grad.any() for p in agent.encoder.parameters())
    assert all(p.grad is None or not p.grad.any() for p in agent.critic.net.parameters())
    assert any(p.grad is not None and p.grad.any() for p in agent.actor.parameters())
    enc_before = [p.clone() for p in agent.encoder.parameters()]
    agent.update(batch(1, PIX))
    assert any(not torch.equal(a, b) for a, b in zip(enc_before, agent.encoder.parameters()))


def test_without_use_cameras_the_agent_reads_the_state_alone_and_samples_carry_no_frames():
    cfg = small(use_cameras=False)
    agent = SACAgent(PIX, A, cfg)
    assert not agent.encoder.has_pixels and agent.obs_spec.cameras == {} and agent._manual is not None
    assert SACAgent.sampling(cfg).pixels is False and SACAgent.sampling(small()).pixels is True
    b = batch(None, PIX)
    blind = {k: v for k, v in b["obs"].items() if k != "pixels"}
    with_frames = agent.act(b["obs"], deterministic=True)
    assert np.array_equal(with_frames, agent.act(blind, deterministic=True))  # the frames change nothing
    no_frames = batch(1, PIX)
    for key in ("obs", "next_obs"):
        no_frames[key].pop("pixels")
    agent.update(no_frames)  # a state-only sample updates it
    with pytest.raises(ValueError, match="use_cameras"):
        SACAgent(ObsSpec(0, PIX.cameras), A, cfg)


def test_random_shift_is_an_integer_translation_of_the_padded_image():
    images = torch.rand(6, 3, 10, 10)
    out = random_shift(images, pad=2, generator=torch.Generator().manual_seed(0))
    assert out.shape == images.shape and out.dtype == images.dtype
    padded = F.pad(images, (2, 2, 2, 2), mode="replicate")
    for i in range(6):
        crops = [padded[i, :, dy:dy + 10, dx:dx + 10] for dy in range(5) for dx in range(5)]
        assert any(torch.equal(out[i], c) for c in crops)
    assert not all(torch.equal(out[i], images[i]) for i in range(6))


def test_shifting_the_stored_frames_is_random_shift_of_their_float_conversion():
    frames = torch.randint(0, 256, (2, 5, 12, 10, 3), dtype=torch.uint8)  # leading dims are flattened
    shifted = frames_to_input(frames, 3, torch.Generator().manual_seed(7))
    expected = random_shift(frames_to_float(frames), 3, torch.Generator().manual_seed(7))
    assert shifted.shape == (10, 3, 12, 10) and torch.equal(shifted, expected)
    assert torch.equal(frames_to_input(frames, 0), frames_to_float(frames))


def test_policy_state_and_full_state_round_trips(tmp_path):
    agent = SACAgent(PIX, A, small(encoder=PIX_ENC))
    agent.update(batch(1, PIX))
    fresh = SACAgent(PIX, A, small(encoder=PIX_ENC), seed=5)
    obs = batch(None, PIX)["obs"]
    fresh.load_policy_state(agent.policy_state())
    np.testing.assert_array_equal(fresh.act(obs, True), agent.act(obs, True))

    save_state(tmp_path / "agent.safetensors", agent.state_dict())
    restored = SACAgent(PIX, A, small(encoder=PIX_ENC), seed=9)
    restored.load_state_dict(load_state(tmp_path / "agent.safetensors"))
    nxt = batch(1, PIX, seed=3)
    m1 = agent.update(nxt)  # the restored generator draws the same noise
    m2 = restored.update(nxt)
    assert m1 == m2
    for a, b in zip(agent.critic.net.parameters(), restored.critic.net.parameters()):
        assert torch.equal(a, b)


def test_frozen_pretrained_encoder(tmp_path):
    donor = SACAgent(PIX, A, small(encoder=PIX_ENC))
    donor.encoder.save_pretrained(tmp_path / "enc.safetensors")
    enc = EncoderConfig(**{**PIX_ENC.__dict__, "pretrained_path": str(tmp_path / "enc.safetensors")})
    agent = SACAgent(PIX, A, small(encoder=enc), seed=3)
    for a, b in zip(donor.encoder.convs.parameters(), agent.encoder.convs.parameters()):
        assert torch.equal(a, b)
    frozen = [p.clone() for p in agent.encoder.convs.parameters()]
    agent.update(batch(1, PIX))
    assert all(torch.equal(a, b) for a, b in zip(frozen, agent.encoder.convs.parameters()))
    wrong = EncoderConfig(**{**enc.__dict__, "conv_channels": (4, 4)})
    with pytest.raises(ValueError, match="do not fit"):
        SACAgent(PIX, A, small(encoder=wrong))


def test_invalid_config_names_the_field():
    with pytest.raises(ValueError, match="num_min_critics"):
        SACAgent(ObsSpec(D), A, small(num_critics=2, num_min_critics=3))


# ------------------------------------------------------------------ hand-derived gradients (manual_grad.py)
@pytest.mark.parametrize("critic_ln, actor_ln, backup, critics", [
    (False, False, True, 2), (True, False, True, 4), (True, True, False, 4), (False, True, True, 3)])
@pytest.mark.parametrize("update_actor", [True, False])
@pytest.mark.parametrize("bc_weight, q_filter, normalized", [(0.0, True, False), (2.0, False, True), (2.0, True, True)])
def test_manual_gradients_match_autograd(critic_ln, actor_ln, backup, critics, update_actor, bc_weight, q_filter,
                                         normalized):
    cfg = small(num_critics=critics, critic_layer_norm=critic_ln, actor_layer_norm=actor_ln, backup_entropy=backup,
                bc_weight=bc_weight, bc_q_filter=q_filter)
    agent = SACAgent(ObsSpec(D), A, cfg)
    assert agent._manual is not None
    if normalized:
        agent.encoder.fit_state_normalizer(np.random.default_rng(5).normal(0.3, 2.0, (64, D)))
    with torch.no_grad():  # non-trivial LayerNorm affine and target != online critic
        for norm in agent.critic.net.norms if critic_ln else ():
            norm.weight.normal_()
            norm.bias.normal_()
        for p, t in zip(agent.critic.net.parameters(), agent.critic.target.parameters()):
            t.copy_(p + 0.1 * torch.randn_like(p))
    from robot_rl.agents.sac import to_torch
    tb = to_torch({k: index_tree_np(v) for k, v in batch().items()}, agent.device)
    alpha, members = torch.tensor(0.3), torch.tensor([critics - 1, 0])
    state = agent.generator.get_state()  # the autograd path draws the same policy noise from the agent's generator
    eps = torch.stack([torch.randn(B, A, generator=agent.generator) for _ in range(2 if update_actor else 1)])
    agent.generator.set_state(state)
    loss, ref_metrics = losses_at(agent, tb, alpha, members, update_actor)
    agent.critic.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    params = [*agent.critic.net.parameters(), *agent.actor.parameters(), agent.log_alpha]
    ref = [None if p.grad is None else p.grad.clone() for p in params]
    metrics = agent._manual.compute_grads(tb, alpha, members, update_actor, eps=eps)
    assert set(metrics) == set(ref_metrics)
    for k in metrics:
        torch.testing.assert_close(metrics[k], ref_metrics[k], atol=1e-5, rtol=1e-5)
    for p, r in zip(params, ref):
        if r is None:  # actor and temperature untouched on critic-only steps
            assert p.grad is None
        else:
            torch.testing.assert_close(p.grad, r, atol=1e-6, rtol=1e-4)


def index_tree_np(v):
    return {k: vv[0] for k, vv in v.items()} if isinstance(v, dict) else v[0]


def test_fused_adam_step_matches_optimizer_step_and_survives_state_reload():
    def make(manual: bool) -> SACAgent:
        return SACAgent(ObsSpec(D), A, small(utd=3, manual_grad=manual))
    agent = make(True)
    batches = [batch(utd=3, seed=s) for s in range(4)]
    for b in batches[:2]:
        agent.update(b)
    reference = SACAgent(ObsSpec(D), A, small(utd=3))
    reference.load_state_dict(copy.deepcopy(agent.state_dict()))  # torch's optimizer load shares tensors
    agent.load_state_dict(copy.deepcopy(agent.state_dict()))  # replaces the optimizer state under the cached plan
    reference.critic.fused_step.step = lambda groups: reference.critic.optimizer.step()  # plain torch.optim.Adam.step
    for b in batches[2:]:
        agent.generator.manual_seed(1)
        m1 = agent.update(b)
        reference.generator.manual_seed(1)
        m2 = reference.update(b)
        assert m1 == m2
    for a, r in zip(agent.critic.net.parameters(), reference.critic.net.parameters()):
        assert torch.equal(a, r)
    for a, r in zip(agent.actor.parameters(), reference.actor.parameters()):
        assert torch.equal(a, r)
    assert agent.critic.optimizer.state[agent.log_alpha]["step"] == 4
    assert agent.critic.optimizer.state[next(agent.critic.net.parameters())]["step"] == 12


def test_manual_path_learns_like_autograd():
    """Same seed and batches: the two paths follow the same trajectory up to float rounding."""
    agents = [SACAgent(ObsSpec(D), A, small(utd=2, manual_grad=m)) for m in (True, False)]
    assert agents[0]._manual is not None and agents[1]._manual is None
    for step in range(5):
        out = []
        for agent in agents:
            agent.generator.manual_seed(step)
            out.append(agent.update(batch(utd=2, seed=step)))
        for k in out[1]:
            assert out[0][k] == pytest.approx(out[1][k], rel=1e-4, abs=1e-5), k
    for a, r in zip(agents[0].critic.net.parameters(), agents[1].critic.net.parameters()):
        torch.testing.assert_close(a, r, atol=1e-5, rtol=1e-4)


def test_instruction_embedding_is_an_input_and_manual_gradients_still_match():
    """A language-conditioned task: the instruction embedding joins the state features (acting and learning), and
    the hand-derived update equals autograd's with it."""
    spec = ObsSpec(D, instruction_dim=5)
    agent = SACAgent(spec, A, small())
    assert agent._manual is not None and agent.encoder.out_dim == D + 5
    obs = {"state": np.zeros(D, np.float32), "instruction": np.eye(5, dtype=np.float32)[0]}
    other = {**obs, "instruction": np.eye(5, dtype=np.float32)[1]}
    assert not np.allclose(agent.act(obs, deterministic=True), agent.act(other, deterministic=True))
    from robot_rl.agents.sac import to_torch
    tb = to_torch({k: index_tree_np(v) for k, v in batch(spec=spec).items()}, agent.device)
    alpha, members = torch.tensor(0.3), torch.tensor([3, 0])
    state = agent.generator.get_state()
    eps = torch.stack([torch.randn(B, A, generator=agent.generator) for _ in range(2)])
    agent.generator.set_state(state)
    loss, _ = losses_at(agent, tb, alpha, members, True)
    agent.critic.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    params = [*agent.critic.net.parameters(), *agent.actor.parameters(), agent.log_alpha]
    ref = [p.grad.clone() for p in params]
    agent._manual.compute_grads(tb, alpha, members, True, eps=eps)
    for p, r in zip(params, ref):
        torch.testing.assert_close(p.grad, r, atol=1e-6, rtol=1e-4)


def losses_at(agent: SACAgent, tb, alpha, members, update_actor: bool):
    """The autograd path's summed loss and metrics at temperature ``alpha`` (the agent's log_alpha set to it)."""
    with torch.no_grad():
        agent.log_alpha.fill_(math.log(float(alpha)) if float(alpha) > 0 else -math.inf)
    return agent.losses(tb, members, update_actor)


def test_critic_warmup_trains_only_the_critics_then_the_actor_and_starts_again_after_init_from(tmp_path):
    """``critic_warmup_updates``: the actor and the temperature wait while the critics learn (a sim policy on a robot
    keeps acting as it did); a checkpoint resumes the count; ``init_from`` (another run's agent) starts it again."""
    agent = SACAgent(ObsSpec(D), A, small(critic_warmup_updates=2, utd=2))
    actor, alpha = [p.clone() for p in agent.actor.parameters()], agent.alpha
    critic = [p.clone() for p in agent.critic.net.parameters()]
    metrics = agent.update(batch(utd=2, seed=1))
    assert metrics["critic_warmup_left"] == 1
    save_state(tmp_path / "agent.safetensors", agent.state_dict())
    agent.update(batch(utd=2, seed=2))
    assert all(torch.equal(a, b) for a, b in zip(actor, agent.actor.parameters())) and agent.alpha == alpha
    assert any(not torch.equal(a, b) for a, b in zip(critic, agent.critic.net.parameters()))
    assert "critic_warmup_left" not in agent.update(batch(utd=2, seed=3))  # the third update trains the actor
    assert any(not torch.equal(a, b) for a, b in zip(actor, agent.actor.parameters())) and agent.alpha != alpha

    resumed = SACAgent(ObsSpec(D), A, small(critic_warmup_updates=2, utd=2))
    resumed.load_state_dict(load_state(tmp_path / "agent.safetensors"))
    assert resumed.critic_warmup_left == 1  # a resume goes on with the warm-up where it was
    resumed.initialised_from_another_run()
    assert resumed.critic_warmup_left == 2  # init_from: the critics meet a new env
    with pytest.raises(ValueError, match="critic_warmup_updates"):
        small(critic_warmup_updates=-1).validate()
