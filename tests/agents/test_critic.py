"""The critic component on its own (robot_rl.agents.critic): an update lowers the TD error on a fixed batch, the
subset-min target and the Polyak update equal hand computations, the HL-Gauss critic learns; every off-policy agent
learns with it (no agent writes a TD target of its own, each critic field is declared once); and checkpoints and
policies saved by the code before the component (commit 46aecde) load and learn as they did."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_rl.agents.base import AgentConfig, seeded_generator
from robot_rl.agents.config import ActorCriticConfig, CriticConfig
from robot_rl.agents.critic import Critic
from robot_rl.agents.registry import make_agent
from robot_rl.config import from_dict, load_yaml, save_yaml
from robot_rl.reference_docs import config_targets
from robot_rl.spaces import ObsSpec
from robot_rl.utils.imports import import_object
from robot_rl.utils.state_io import load_state

ROOT = Path(__file__).resolve().parents[2]
D, A, B = 4, 2, 32
SMALL = CriticConfig(hidden_dims=(32, 32), num_critics=4, num_min_critics=2, batch_size=B)


def critic(cfg: CriticConfig = SMALL, seed: int = 0) -> Critic:
    return Critic(cfg, ObsSpec(D), A, init=seeded_generator(seed), generator=seeded_generator(seed + 1))


def fixed_batch(seed: int = 0, n_step: bool = False) -> dict:
    g = torch.Generator().manual_seed(seed)
    out = {"obs": {"state": torch.randn(B, D, generator=g)}, "next_obs": {"state": torch.randn(B, D, generator=g)},
           "action": torch.rand(B, A, generator=g) * 2 - 1, "reward": torch.randn(B, generator=g),
           "terminated": (torch.rand(B, generator=g) < 0.2).float()}
    if n_step:
        out["discount"] = 0.99 ** torch.randint(1, 4, (B,), generator=g).float()
    return out


def td_error(c: Critic, batch: dict, members: torch.Tensor) -> float:
    with torch.no_grad():
        target = c.td_target(batch, c.target_value(c.encode(batch["next_obs"]), batch["action"], members))
        return float(c.loss(c.encode(batch["obs"]), batch["action"], target)[0])


def update(c: Critic, batch: dict, members: torch.Tensor) -> dict:
    """One critic update as every agent makes it (the next action here: the batch's own)."""
    x = c.encode(batch["obs"])
    with torch.no_grad():
        target = c.td_target(batch, c.target_value(c.encode(batch["next_obs"]), batch["action"], members))
    loss, _, metrics = c.loss(x, batch["action"], target)
    c.step(loss)
    return metrics


@pytest.mark.parametrize("n_step", [False, True])
def test_updates_lower_the_td_error_on_a_fixed_batch(n_step):
    c, batch = critic(dataclasses.replace(SMALL, critic_lr=3e-3)), fixed_batch(n_step=n_step)
    members = torch.tensor([0, 1])
    before = td_error(c, batch, members)
    for _ in range(60):
        update(c, batch, members)
    assert td_error(c, batch, members) < 0.5 * before
    assert c.steps == 60


def test_the_target_is_the_min_over_the_subset_and_the_n_step_discount_the_samples():
    c = critic(dataclasses.replace(SMALL, discount=0.5))
    with torch.no_grad():  # target member e outputs the constant 10 e + 1 (head weights 0, bias the value)
        c.target.head.weight.zero_()
        c.target.head.bias.copy_(torch.tensor([1.0, 11.0, 21.0, 31.0]).view(4, 1, 1))
    batch = fixed_batch()
    x = c.encode(batch["next_obs"])
    for members, low in (([2, 3], 21.0), ([3, 1], 11.0), ([0, 1, 2, 3], 1.0)):
        value = c.target_value(x, batch["action"], torch.tensor(members))
        torch.testing.assert_close(value, torch.full((B,), low))
        want = batch["reward"] + 0.5 * (1 - batch["terminated"]) * low
        torch.testing.assert_close(c.td_target(batch, value), want)
        # an n-step sample carries its own discount (gamma^k of the k transitions it sums): it replaces cfg.discount
        discounted = {**batch, "discount": torch.full((B,), 0.25)}
        torch.testing.assert_close(c.td_target(discounted, value), batch["reward"] + 0.25 * (1 - batch["terminated"])
                                   * low)
    drawn = {tuple(sorted(c.members().tolist())) for _ in range(200)}
    assert all(len(m) == 2 for m in drawn) and len(drawn) == 6  # every 2-subset of 4, from the agent's generator


def test_a_step_is_one_adam_step_then_the_polyak_update():
    cfg = dataclasses.replace(SMALL, tau=0.25)
    c, twin = critic(cfg), critic(cfg)
    batch, members = fixed_batch(), torch.tensor([0, 2])
    target_before = [p.clone() for p in c.target.parameters()]
    update(c, batch, members)
    # by hand: the same loss, torch's Adam, then target <- target + tau (online - target)
    x = twin.encode(batch["obs"])
    with torch.no_grad():
        y = twin.td_target(batch, twin.target_value(twin.encode(batch["next_obs"]), batch["action"], members))
    reference = torch.optim.Adam(twin.net.parameters(), lr=cfg.critic_lr)
    reference.zero_grad()
    (twin.net(x, batch["action"]).squeeze(-1) - y).pow(2).mean().backward()
    reference.step()
    for online, want in zip(c.net.parameters(), twin.net.parameters()):
        torch.testing.assert_close(online, want)
    for target, before, online in zip(c.target.parameters(), target_before, c.net.parameters()):
        torch.testing.assert_close(target, before + 0.25 * (online.detach() - before))
    assert c.steps == 1 and all(not p.requires_grad for p in c.target.parameters())


def test_the_hl_gauss_critic_learns_and_reads_as_expected_values():
    cfg = dataclasses.replace(SMALL, hl_gauss=True, hl_gauss_bins=21, hl_gauss_range=(-5.0, 5.0))
    c, batch, members = critic(cfg), fixed_batch(), torch.tensor([1, 3])
    assert c.net.head.weight.shape[-1] == 21
    x = c.encode(batch["obs"])
    logits = c.net(x, batch["action"])
    torch.testing.assert_close(c.values(x, batch["action"]), (logits.softmax(-1) * c.hl.centers).sum(-1))
    first = update(c, batch, members)["critic_loss"]
    for _ in range(40):
        last = update(c, batch, members)["critic_loss"]
    assert last < first


def test_a_checkpoint_round_trip_restores_the_critic_exactly():
    c, batch, members = critic(), fixed_batch(), torch.tensor([0, 1])
    update(c, batch, members)
    restored = critic(seed=7)
    restored.load_state_dict(c.state_dict())
    assert set(c.state_dict()) == {"critic", "target_critic", "encoder", "optimizer", "critic_step"}
    for a, b in zip(update(c, batch, members).values(), update(restored, batch, members).values()):
        assert torch.equal(a, b)


# ------------------------------------------------------------------ the agents share it
AGENT_CODE = sorted([*(ROOT / "robot_rl/agents").glob("*.py"), *(ROOT / "robot_rl/vla").glob("*.py")])


def test_no_agent_writes_a_critic_update_of_its_own():
    """The TD target, the subset draw, the critics' construction and the target's Polyak update live in critic.py
    only (the hand-derived SAC gradients take the target from it too)."""
    markers = [r'"terminated"', r"(?<!class )EnsembleCritic\(", r"randperm\((self\.)?cfg\.num_critics",
               r"self\._target, self\._online", r"target_critic ="]
    found = [f"{path.relative_to(ROOT)}: {m}" for path in AGENT_CODE if path.name != "critic.py"
             for m in markers if re.search(m, path.read_text())]
    assert not found, found


def test_every_off_policy_agent_learns_with_the_component():
    from robot_rl.agents.critic_guided_config import CriticGuidedConfig
    from robot_rl.agents.ibrl import IBRLConfig
    from robot_rl.agents.residual_config import ResidualConfig
    from robot_rl.agents.sac import SACAgent

    for cfg in (ResidualConfig(), IBRLConfig(), CriticGuidedConfig()):
        assert isinstance(cfg, CriticConfig)
    agent = SACAgent(ObsSpec(D), A, dataclasses.replace(SMALL_SAC))
    assert isinstance(agent.critic, Critic) and agent.encoder is agent.critic.encoder


def test_n_step_returns_and_hl_gauss_for_every_agent_with_critics():
    """The critic's options reach every agent: sac samples n-step returns when asked (and refuses one-step samples
    then), the residual agent learns with an HL-Gauss critic."""
    from robot_rl.agents.residual import ResidualAgent
    from robot_rl.agents.residual_config import ResidualConfig
    from robot_rl.agents.sac import SACAgent

    cfg = dataclasses.replace(SMALL_SAC, n_step=3, utd=1)
    s = SACAgent.sampling(cfg)
    assert (s.n_step, s.discount, s.utd) == (3, cfg.discount, 1)
    sac = SACAgent(ObsSpec(D), A, cfg)
    one_step = {k: (v.numpy() if isinstance(v, torch.Tensor) else {kk: vv.numpy() for kk, vv in v.items()})
                for k, v in fixed_batch().items()}
    with pytest.raises(ValueError, match="needs n-step samples"):
        sac.update(one_step)
    assert np.isfinite(sac.update({**one_step, "discount": np.full(B, 0.97, np.float32)})["critic_loss"])

    rcfg = ResidualConfig(hidden_dims=(16, 16), num_critics=3, utd=1, batch_size=B, n_step=1, hl_gauss=True,
                          hl_gauss_bins=11, hl_gauss_range=(-5.0, 5.0), critic_warmup_updates=0)
    residual = ResidualAgent(ObsSpec(D), A, rcfg)
    assert residual.critic.net.head.weight.shape[-1] == 11
    g = np.random.default_rng(0)
    based = {**one_step, "base_action": g.uniform(-1, 1, (B, A)).astype(np.float32),
             "next_base_action": g.uniform(-1, 1, (B, A)).astype(np.float32), "chunk_index": np.zeros(B, np.int64),
             "next_chunk_index": np.ones(B, np.int64), "source": np.zeros(B, np.uint8),
             "intervened": np.zeros(B, bool)}
    losses = [residual.update(based)["critic_loss"] for _ in range(30)]
    assert losses[-1] < losses[0] and "actor_loss" in residual.update(based)


SMALL_SAC = from_dict(AgentConfig.resolve_config_class({"name": "sac"}), {"hidden_dims": [16, 16], "num_critics": 2})


def test_each_critic_and_actor_field_is_declared_once():
    """CriticConfig declares and documents every critic field, ActorCriticConfig every actor field; the config of an
    agent that learns them may restate a default (no docstring), nothing more."""
    def names(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)} - {f.name for f in dataclasses.fields(AgentConfig)}

    configs = {import_object(t, "config") for t in config_targets()}
    learners = sorted((c for c in configs if issubclass(c, CriticConfig) and c not in (CriticConfig,
                                                                                       ActorCriticConfig)),
                      key=lambda c: c.__name__)
    assert {c.__name__ for c in learners} >= {"SACConfig", "OnBaseConfig", "ResidualConfig", "IBRLConfig",
                                              "CriticGuidedConfig"}
    restated = []
    for cls in learners:
        shared = names(ActorCriticConfig if issubclass(cls, ActorCriticConfig) else CriticConfig)
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
        for stmt, after in zip(body, [*body[1:], None]):
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in shared:
                documented = isinstance(after, ast.Expr) and isinstance(getattr(after, "value", None), ast.Constant)
                restated.append((f"{cls.__name__}.{stmt.target.id}", documented))
    assert not [name for name, documented in restated if documented], restated
    assert sorted(name for name, _ in restated) == [  # agent-specific defaults only
        "CriticGuidedConfig.n_step", "CriticGuidedConfig.use_cameras", "IBRLConfig.bc_weight",
        "OnBaseConfig.actor_layer_norm", "OnBaseConfig.bc_q_filter", "OnBaseConfig.bc_weight",
        "OnBaseConfig.init_temperature", "OnBaseConfig.n_step", "OnBaseConfig.use_cameras"]


def test_ibrl_configs_saved_with_the_residual_fields_still_load(tmp_path):
    """ibrl configs used to carry the residual's bounds and clip options (which never applied to it); a saved run's
    config that lists them loads, without them."""
    from robot_rl.agents.ibrl import IBRLConfig
    from robot_rl.training.config import TrainConfig

    path = tmp_path / "config.yaml"
    save_yaml(TrainConfig(agent=IBRLConfig()), path)
    text = path.read_text().replace("  name: ibrl\n", "  name: ibrl\n  residual_scale: 0.3\n  residual_scales: []\n"
                                                      "  straight_through_clip: false\n  clip_excess_penalty: 1.0\n")
    path.write_text(text)
    cfg = load_yaml(TrainConfig, path)
    assert cfg.agent == IBRLConfig()
    assert not hasattr(cfg.agent, "residual_scale")


# --------------------------------------------------------- the previous layout
OLD = ROOT / "tests/agents/data/old_layout.safetensors"
SMALL_OLD = {"hidden_dims": [16, 16], "num_critics": 3, "batch_size": 8, "utd": 2}
CASES = {  # as tests/agents/data/make_old_layout.py built them
    "sac": {"name": "sac", **SMALL_OLD, "bc_weight": 1.0},
    "sac_autograd_hl": {"name": "sac", **SMALL_OLD, "manual_grad": False, "hl_gauss": True, "hl_gauss_bins": 11,
                        "hl_gauss_range": [-5.0, 5.0]},
    "residual": {"name": "residual", **SMALL_OLD, "critic_warmup_updates": 1, "scale_anneal_updates": 2},
    "residual_stochastic": {"name": "residual", **SMALL_OLD, "critic_warmup_updates": 1, "stochastic": True},
    "ibrl": {"name": "ibrl", **SMALL_OLD, "critic_warmup_updates": 1},
}


@pytest.fixture(scope="module")
def old_layout() -> dict:
    return load_state(OLD)


@pytest.mark.parametrize("case", sorted(CASES))
def test_checkpoints_of_the_previous_layout_load_and_learn_alike(case, old_layout):
    """A checkpoint and a policy saved by commit 46aecde: the policy acts as it did, and one more update from the
    checkpoint on the same batch gives the same metrics and weights."""
    saved, fields = old_layout[case], CASES[case]
    cfg = from_dict(AgentConfig.resolve_config_class(fields), dict(fields))
    actor = make_agent(cfg, ObsSpec(5), A, seed=3)
    actor.load_policy_state(saved["policy"])
    np.testing.assert_allclose(actor.act(saved["obs"], deterministic=True), saved["action"], atol=1e-6)

    agent = make_agent(cfg, ObsSpec(5), A, seed=4)
    agent.load_state_dict(saved["state"])
    # within float rounding: the saved actions were computed on another CPU (AVX2 vs AVX-512 kernels differ by an ulp)
    np.testing.assert_allclose(agent.act(saved["obs"], deterministic=True), saved["action"], atol=1e-6)
    metrics = agent.update(saved["batch"])
    assert metrics.keys() == saved["metrics"].keys()
    for k, v in saved["metrics"].items():
        assert metrics[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    state = agent.state_dict()
    for part in ("actor", "critic", "target_critic"):
        for k, v in saved["after"][part].items():
            torch.testing.assert_close(state[part][k], v, atol=1e-6, rtol=1e-5, msg=f"{part}.{k}")
