"""The algorithm contract: agents by name, behaviour cloning as the second agent, checks of a third-party class."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_rl.agents import Agent, BCAgent, BCConfig, SACAgent, SACConfig, agent_class, make_agent
from robot_rl.agents.registry import Capabilities, capabilities, check_agent_class
from robot_rl.config import ConfigError, from_dict
from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
from robot_rl.spaces import ObsSpec
from robot_rl.training.config import TrainConfig


def test_agents_are_chosen_by_name_and_follow_the_protocol() -> None:
    assert agent_class("sac") is SACAgent and agent_class("bc") is BCAgent
    assert agent_class("robot_rl.agents.behavior_cloning:BCAgent") is BCAgent
    for cfg in (SACConfig(num_critics=2), BCConfig()):
        agent = make_agent(cfg, ObsSpec(3), 2, seed=0)
        assert isinstance(agent, Agent)
        assert agent.act({"state": np.zeros(3, np.float32)}).shape == (2,)
    with pytest.raises(ValueError, match="unknown agent 'dqn'; registered: base, bc, critic_guided, ibrl, residual, "
                                         "sac"):
        agent_class("dqn")
    with pytest.raises(ValueError, match="is not an agent: it lacks"):
        agent_class("collections:OrderedDict")


def test_yaml_agent_section_takes_the_named_agents_config() -> None:
    cfg = from_dict(TrainConfig, {"agent": {"name": "bc", "lr": 0.01, "hidden_dims": [8]}})
    assert isinstance(cfg.agent, BCConfig) and cfg.agent.lr == 0.01 and cfg.agent.hidden_dims == (8,)
    with pytest.raises(ConfigError, match="agent.num_critics"):  # a SAC field is not a BC field
        from_dict(TrainConfig, {"agent": {"name": "bc", "num_critics": 3}})
    assert isinstance(from_dict(TrainConfig, {"agent": {"utd": 2}}).agent, SACConfig)


def test_behaviour_cloning_fits_the_demonstrations() -> None:
    rng = np.random.default_rng(0)
    spec = ObsSpec(4)
    replay = ReplayBuffer(spec, 2, ReplayConfig(online_capacity=10, demos_capacity=600, interventions_capacity=10))
    target = np.array([[0.5, -0.3], [0.2, 0.4], [-0.1, 0.1], [0.3, 0.0]], np.float32)
    for _ in range(500):
        s = rng.uniform(-1, 1, 4).astype(np.float32)
        replay.add({"state": s}, np.tanh(s @ target), 0.0, False, True, {"state": s}, source="demo")
    agent = BCAgent(spec, 2, BCConfig(hidden_dims=(64, 64), batch_size=128), seed=0)
    sampling = BCAgent.sampling(agent.cfg)
    assert sampling.mix == {"prior": 1.0} and sampling.needs == ("prior",)
    losses = []
    for _ in range(400):
        agent.prepare(replay)
        losses.append(agent.update(replay.sample(sampling.batch_size, mix=sampling.mix, utd=sampling.utd))["bc_loss"])
    assert agent.encoder.normalizer_fitted
    assert np.mean(losses[-20:]) < 0.05 * np.mean(losses[:5]), (losses[:5], losses[-20:])
    # Resuming restores everything: the same next update on both.
    twin = BCAgent(spec, 2, agent.cfg, seed=7)
    twin.load_state_dict(copy.deepcopy(agent.state_dict()))  # torch's optimizer load shares tensors
    batch = replay.sample(128, mix={"prior": 1.0}, utd=1)
    assert agent.update(batch) == twin.update(batch)
    for k, v in agent.policy_state().items():
        assert torch.equal(v, twin.policy_state()[k])


def test_a_class_without_the_contract_is_refused() -> None:
    class Half:
        def act(self, obs, deterministic=False):
            return np.zeros(1)
    with pytest.raises(ValueError, match="lacks update, prepare"):
        check_agent_class(Half, "Half")


def test_optional_capabilities_are_declared_and_checked() -> None:
    """Each built-in agent declares what it can do beyond the contract; a class declaring a capability without what
    goes with it is refused."""
    declared = {name: {k for k, v in dataclasses.asdict(capabilities(agent_class(name))).items() if v}
                for name in ("sac", "bc", "base", "residual", "ibrl", "critic_guided")}
    assert declared == {"sac": {"exportable"}, "bc": {"exportable"}, "base": {"uses_base"},
                        "residual": {"uses_base"}, "ibrl": {"uses_base", "keeps_acting_state"},
                        "critic_guided": {"uses_base", "trains_base"}}
    from robot_rl.policies.evaluate import ComposedAgent, ExecutorAgent

    assert capabilities(ExecutorAgent).episodic and capabilities(ComposedAgent).episodic

    class Claims(BCAgent):
        uses_base = True
        trains_base = True
        keeps_acting_state = True
        deterministic_module = None  # type: ignore[assignment]
        exportable = True
    with pytest.raises(ValueError, match=r"base_weights\(\) \(trains_base\), base_policy\(\) \(trains_base\), "
                                         r"deterministic_module\(\) \(exportable\), a base_path field in its config "
                                         r"\(trains_base\), a base= argument to __init__ \(trains_base\), "
                                         r"an acting_state annotation \(keeps_acting_state\)"):
        check_agent_class(Claims, "Claims")


def test_the_runtime_reads_declared_capabilities_and_never_probes_for_them() -> None:
    names = "|".join(f.name for f in dataclasses.fields(Capabilities)) + "|acting_state|begin_episode|" \
        "deterministic_module|base_path|base_weights|base_policy"
    probe = re.compile(rf"""(getattr|hasattr)\([^)]*["']({names})["']""")
    root = Path(__file__).resolve().parents[2] / "robot_rl"
    found = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if p.name != "base.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if probe.search(line)]
    assert not found, found


def test_a_run_config_is_never_rewritten_its_agent_config_is_derived() -> None:
    """An agent that fine-tunes the base's weights trains the run's base policy: ``agent_config()`` says so, the
    config itself stays as given."""
    from robot_rl.agents.critic_guided_config import CriticGuidedConfig
    from robot_rl.policies.config import BasePolicyConfig

    cfg = TrainConfig(agent=CriticGuidedConfig(), base_policy=BasePolicyConfig(path="policies/vla"))
    assert cfg.agent.base_path == "" and cfg.agent_config().base_path == "policies/vla"
    assert cfg.agent_config() == dataclasses.replace(cfg.agent, base_path="policies/vla")
    plain = TrainConfig(base_policy=BasePolicyConfig(path="policies/vla"))
    assert plain.agent_config() is plain.agent  # sac does not train the base


# ------------------------------------------------------------------ one agent base
LEARNING_AGENTS = ("sac", "wsrl", "residual", "ibrl", "bc", "critic_guided")


def test_every_learning_agent_is_built_on_the_one_base() -> None:
    """The constructor preamble, the update loop over UTD slices, the counters and the state plumbing are written once
    (robot_rl/agents/off_policy.py): every learning agent derives from it, and no agent file outside it loops over a
    sample's UTD axis, builds the seeded generators or reads and writes the update counter's state."""
    from robot_rl.agents.base import BUILTIN
    from robot_rl.agents.off_policy import GradientAgent

    for name in LEARNING_AGENTS:
        assert issubclass(agent_class(name), GradientAgent), name
    root = Path(__file__).resolve().parents[2]
    markers = [r"utd_batch\(", r"for \w+ in range\(utd\)", r"seeded_generator\(seed", r'state\["update_step"\]',
               r"self\.update_step \+= 1", r'"generator": self\.generator']
    files = {root / (module.split(":")[0].replace(".", "/") + ".py") for module in BUILTIN.values()}
    found = [f"{path.relative_to(root)}: {m}" for path in sorted(files) for m in markers
             if re.search(m, path.read_text())]
    assert not found, found


def test_the_base_loop_makes_one_step_per_utd_slice_and_counts_updates() -> None:
    """The shared loop: a [utd, B] sample is utd train steps, the last one training the actor; one update counted."""
    from robot_rl.agents.off_policy import GradientAgent

    steps: list[bool] = []

    class Probe(BCAgent):
        def train_step(self, mb, update_actor):
            assert mb["action"].shape == (8, 2)
            steps.append(update_actor)
            return {"probe": torch.tensor(float(len(steps)))}

    agent = Probe(ObsSpec(3), 2, BCConfig(batch_size=8, utd=3))
    assert isinstance(agent, GradientAgent)
    rng = np.random.default_rng(0)
    batch = {"obs": {"state": rng.normal(size=(3, 8, 3)).astype(np.float32)},
             "action": rng.uniform(-1, 1, (3, 8, 2)).astype(np.float32)}
    out = agent.update(batch)
    assert steps == [False, False, True] and out == {"probe": 3.0} and agent.update_step == 1
    state = agent.state_dict()
    other = Probe(ObsSpec(3), 2, BCConfig(batch_size=8, utd=3), seed=5)
    other.load_state_dict(state)
    assert other.update_step == 1 and torch.equal(other.generator.get_state(), agent.generator.get_state())
