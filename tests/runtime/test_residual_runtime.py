"""Residual fine-tuning through the real runtime: the tiny VLA behind `robot-rl serve-policy`, actor and learner as
processes, demo rows labelled with the base's proposals, the executed action inside the residual's bound, SIGKILL
then resume with the base reference and the agent's state; interventions recorded with what ran."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from robot_rl.agents import make_agent
from robot_rl.agents.ibrl import IBRLAgent
from robot_rl.agents.residual import ResidualAgent
from robot_rl.config import from_dict, load_yaml
from robot_rl.envs.make import EnvConfig
from robot_rl.policies.config import BasePolicyConfig
from robot_rl.replay.store import load_buffer
from robot_rl.runtime.actor import Actor
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.runtime.learner import Learner
from robot_rl.spaces import ObsSpec
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.scripted import ScriptedHumanConfig
from robot_rl.training.config import RuntimeConfig, TrainConfig
from tests.policies.toy import TINY_ENV_KWARGS, served
from tests.runtime.test_processes import wait_for

CLI = [sys.executable, "-m", "robot_rl.cli"]
BOUND = 0.3


@pytest.mark.timeout(600)
def test_residual_on_a_served_base_through_processes_survives_sigkill(tiny_vla, tmp_path):
    run = tmp_path / "runs" / "r"
    train = None
    with served(tiny_vla) as url:
        try:
            train = subprocess.Popen(
                [*CLI, "train", "--env.id", "robot_rl/PickColor-v0", "--env.kwargs", json.dumps(TINY_ENV_KWARGS),
                 "--agent.name", "residual", "--agent.residual-scale", str(BOUND),
                 "--agent.critic-warmup-updates", "20", "--agent.scale-anneal-updates", "0", "--agent.utd", "2",
                 "--agent.batch-size", "32", "--agent.hidden-dims", "64", "64",
                 "--agent.num-critics", "4", "--base-policy.path", url, "--demos", "scripted:2",
                 "--total-env-steps", "100000", "--random-steps", "60", "--learning-starts", "60",
                 "--checkpoint-every", "150", "--eval-every", "0", "--name", "r", "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"],
                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                env={**os.environ, "MUJOCO_GL": "egl"})
            wait_for(lambda: (run / "checkpoints" / "latest").is_file() or train.poll() is not None, 400,
                     "a first checkpoint")
            assert train.poll() is None, train.stderr.read()[-3000:]
            time.sleep(1.0)
            os.killpg(train.pid, signal.SIGKILL)  # the whole run: launcher, learner and actor
            train.wait(timeout=30)

            ckpt = latest_checkpoint(run)
            saved = json.loads((ckpt / "counters.json").read_text())
            replay = load_buffer(ckpt / "replay.zarr")
            demos, online = replay.partitions["demos"], replay.partitions["online"]
            d = {k: v[: demos.size] for k, v in demos.arrays.items()}
            assert d["valid"].sum() > 20 and np.all(d["chunk_index"][d["valid"]] >= 0)  # labelled at start
            o = {k: v[: online.size] for k, v in online.arrays.items()}
            valid = o["valid"]
            gap = np.abs(o["action"][valid] - o["base_action"][valid]).max(axis=1)
            assert np.all(gap <= BOUND + 1e-5), gap.max()
            base_only = o["policy_version"][valid] == 0  # warm-up: the base's rollouts
            assert base_only.any() and np.all(gap[base_only] == 0)

            cfg = load_yaml(TrainConfig, run / "config.yaml")
            assert cfg.base_policy.path == url and cfg.agent.name == "residual"
            resumed = Learner(cfg, run, resume=True)
            try:  # the agent as checkpointed: updates, bound, residual weights; the demo labels kept
                agent = resumed.agent
                assert isinstance(agent, ResidualAgent) and agent.update_step == saved["updates"] > 20
                assert agent.bound == pytest.approx(BOUND)
                policy = load_file(str(ckpt / "policy.safetensors"))
                assert all(torch.equal(agent.policy_state()[k], v) for k, v in policy.items())
                assert policy["actor.net.4.weight"].abs().sum() > 0  # trained past its zero start
                part = resumed.replay.partitions["demos"]
                assert np.all(part.arrays["chunk_index"][: part.size][part.arrays["valid"][: part.size]] >= 0)
            finally:
                resumed.close(unlink=True)
        finally:
            if train is not None and train.poll() is None:
                os.killpg(train.pid, signal.SIGKILL)


def actor_loop(cfg: TrainConfig, tmp_path, prepare, steps: int) -> tuple[dict, ResidualAgent, ResidualAgent]:
    """``steps`` steps of the actor loop on ``cfg`` with the policy weights of a learner-side agent (seed 0) that
    ``prepare`` changes first: the recorded chunk, that agent and the actor's own policy."""
    actor = Actor(cfg, tmp_path)
    try:
        agent = make_agent(cfg.agent, ObsSpec.from_space(actor.env.single_observation_space), 4, seed=0)
        with torch.no_grad():
            prepare(agent)
        actor.policy.load_policy_state(agent.policy_state())
        actor.version = 1
        for _ in range(steps):
            assert actor.step()
        return {k: v.copy() for k, v in actor.outbox.builder.take().items()}, agent, actor.policy
    finally:
        actor.close()


@pytest.mark.timeout(300)
def test_interventions_override_the_residual_and_are_recorded_as_executed(tiny_vla, tmp_path):
    human = ScriptedHumanConfig(noise=0.0, takeover_steps=6, max_takeovers=0)  # exact expert actions
    cfg = TrainConfig(env=EnvConfig(id="robot_rl/PickColor-v0", kwargs=TINY_ENV_KWARGS, max_episode_steps=40),
                      random_steps=0, agent=from_dict(TrainConfig, {"agent": {"name": "residual",
                                                                             "residual_scale": BOUND}}).agent,
                      base_policy=BasePolicyConfig(path=str(tiny_vla)),
                      runtime=RuntimeConfig(num_envs=1, chunk_steps=1000, flush_seconds=1e6, spool=False),
                      teleop=TeleopConfig(device="scripted", scripted=human))

    def moving(residual: ResidualAgent) -> None:  # a residual that moves: random output layer at the full bound
        residual.actor.net[-1].weight.normal_(0, 1.0)
        residual.actor.bound.fill_(BOUND)

    chunk, _, _ = actor_loop(cfg, tmp_path, moving, 120)
    valid = chunk["valid"]
    human_rows, policy_rows = valid & chunk["intervened"], valid & ~chunk["intervened"]
    assert human_rows.sum() >= 6 and policy_rows.sum() >= 6, (human_rows.sum(), policy_rows.sum())
    gap = np.abs(chunk["action"] - chunk["base_action"]).max(axis=1)
    # the policy's steps ran base + residual (inside the bound, and not the base alone) ...
    assert np.all(gap[policy_rows] <= BOUND + 1e-5) and gap[policy_rows].mean() > 0.01
    # ... the human's steps ran, and are stored as, the expert's command (gripper exactly +-1), the base's
    # proposal kept beside it
    assert np.all(np.abs(chunk["action"][human_rows, -1]) == 1.0)
    assert np.all(chunk["chunk_index"][valid] >= -1) and set(chunk["source"][human_rows]) == {2}


@pytest.mark.timeout(300)
def test_an_ibrl_actor_runs_the_base_or_its_own_action_as_the_critics_choose(tiny_vla, tmp_path):
    """The actor loop with agent ibrl: the policy weights it receives carry the critics, and each executed step is
    either the base's proposal exactly or the actor's own action, as the critics value them."""
    cfg = TrainConfig(env=EnvConfig(id="robot_rl/PickColor-v0", kwargs=TINY_ENV_KWARGS, max_episode_steps=40),
                      random_steps=0, agent=from_dict(TrainConfig, {"agent": {"name": "ibrl", "hidden_dims": [32],
                                                                             "num_critics": 2}}).agent,
                      base_policy=BasePolicyConfig(path=str(tiny_vla)),
                      runtime=RuntimeConfig(num_envs=1, chunk_steps=1000, flush_seconds=1e6, spool=False))

    def varying(agent: IBRLAgent) -> None:
        # past the warm-up (the full range), an actor whose action varies with the state; its own generator: the
        # same actor (54 of 80 steps the base's here) whatever ran before
        agent.actor.net[-1].weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(0))
        agent.actor.bound.fill_(1.0)

    chunk, learner_side, acting = actor_loop(cfg, tmp_path, varying, 80)
    assert isinstance(learner_side, IBRLAgent)
    assert torch.equal(acting.critic.net.head.weight, learner_side.critic.net.head.weight)
    valid = chunk["valid"]
    as_base = np.all(chunk["action"][valid] == chunk["base_action"][valid], axis=1)
    assert 0 < as_base.sum() < valid.sum(), (as_base.sum(), valid.sum())  # some steps each way


@pytest.mark.timeout(300)
@pytest.mark.parametrize("share", [0.0, 0.5])
def test_a_warm_up_with_a_base_swaps_the_configured_share_of_its_actions_for_random_ones(tiny_vla, tmp_path, share):
    """warmup_random_share: during the warm-up (no weights yet) each step runs the base's proposal or, with that
    probability, a uniform random action; the proposal is recorded beside it either way."""
    cfg = TrainConfig(env=EnvConfig(id="robot_rl/PickColor-v0", kwargs=TINY_ENV_KWARGS, max_episode_steps=40),
                      random_steps=1000, warmup_random_share=share,
                      agent=from_dict(TrainConfig, {"agent": {"name": "ibrl", "hidden_dims": [32]}}).agent,
                      base_policy=BasePolicyConfig(path=str(tiny_vla)),
                      runtime=RuntimeConfig(num_envs=1, chunk_steps=1000, flush_seconds=1e6, spool=False))
    actor = Actor(cfg, tmp_path)
    try:
        for _ in range(60):
            assert actor.step()
        chunk = actor.outbox.builder.take()
    finally:
        actor.close()
    valid = chunk["valid"]
    as_base = np.all(chunk["action"][valid] == chunk["base_action"][valid], axis=1)
    if share == 0.0:
        assert as_base.all()
    else:  # about half each way (60 draws at 0.5: 17-43 base steps with probability > 0.999)
        assert 17 <= as_base.sum() <= 43, as_base.sum()
        assert np.all(np.abs(chunk["action"][valid]) <= 1.0)


@pytest.mark.parametrize("share", [-0.1, 1.5])
def test_a_warm_up_random_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(ValueError, match="warmup_random_share"):
        TrainConfig(warmup_random_share=share).validate()


@pytest.mark.timeout(300)
def test_an_ibrl_choice_per_chunk_holds_through_the_actors_policy_swaps(tiny_vla, tmp_path):
    """choice_per_chunk in the actor loop, with new weights swapped in mid-chunk (loaded and warmed as the weights
    thread does): every chunk runs the base's proposals throughout or the actor's actions throughout."""
    cfg = TrainConfig(env=EnvConfig(id="robot_rl/PickColor-v0", kwargs=TINY_ENV_KWARGS, max_episode_steps=40),
                      random_steps=0, agent=from_dict(TrainConfig, {"agent": {
                          "name": "ibrl", "hidden_dims": [32], "num_critics": 2, "choice_per_chunk": True}}).agent,
                      base_policy=BasePolicyConfig(path=str(tiny_vla)),
                      runtime=RuntimeConfig(num_envs=1, chunk_steps=1000, flush_seconds=1e6, spool=False))
    actor = Actor(cfg, tmp_path)
    try:
        agent = make_agent(cfg.agent, ObsSpec.from_space(actor.env.single_observation_space), 4, seed=0)
        with torch.no_grad():
            agent.actor.net[-1].weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(0))
            agent.actor.bound.fill_(1.0)
        weights = agent.policy_state()
        actor.policy.load_policy_state(weights)
        actor.version = 1
        for step in range(120):
            if step % 7 == 3:  # new weights mid-chunk
                actor.weights.standby.load_policy_state(weights)
                actor.weights.standby.act(actor.weights.warm_obs, deterministic=True)
                actor.weights.standby_version = actor.version + 1
            assert actor.step()
        chunk = actor.outbox.builder.take()
    finally:
        actor.close()
    assert actor.version > 10  # swapped
    valid = chunk["valid"]
    index = chunk["chunk_index"][valid]
    as_base = np.all(chunk["action"][valid] == chunk["base_action"][valid], axis=1)
    starts = [*np.flatnonzero(index == 0), len(index)]
    for a, b in zip(starts[:-1], starts[1:]):
        assert as_base[a:b].all() or not as_base[a:b].any(), (a, as_base[a:b])
    assert 0 < as_base.sum() < len(as_base)  # both kinds of chunk
