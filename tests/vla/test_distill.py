"""RL -> generalist distillation: a policy recorded as a demo source (successes kept, instructions in the
metadata), re-training the small VLA from a saved one's weights, and the command's checks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import torch

from robot_rl.datasets.record import read_meta, record_demos
from robot_rl.policies.vla_policy import load_vla
from robot_rl.replay.store import load_transitions
from robot_rl.vla.distill import PolicyDevice
from robot_rl.vla.train import TrainBCConfig, train_bc
from tests.policies.toy import TINY_ENV_KWARGS


class ExpertActor:
    """A 'specialist' that acts on observations: the task's scripted expert (it succeeds), counting episodes."""

    episodic = True  # begin_episode is called after each reset (robot_rl.agents.base.Capabilities)

    def __init__(self) -> None:
        self.env, self.episodes, self.seen = None, 0, 0

    def begin_episode(self, info) -> None:
        self.episodes += 1
        assert info["instruction"].startswith("pick up the")

    def act(self, obs, deterministic: bool = True) -> np.ndarray:
        assert deterministic and obs["state"].shape == (11,)
        self.seen += 1
        return self.env.unwrapped.expert_action(0.0)


class BoundDevice(PolicyDevice):
    def start(self, env) -> None:
        self.actor.env = env


def test_a_policy_is_recorded_as_demos_with_its_instructions(tmp_path):
    actor = ExpertActor()
    stats = record_demos("PickColor", 2, tmp_path / "spec.zarr", env_kwargs=TINY_ENV_KWARGS, progress=False,
                         device=BoundDevice(actor))
    assert stats.episodes == 2 and actor.episodes == stats.attempts >= 2
    meta = read_meta(tmp_path / "spec.zarr")
    assert meta["device"] == "policy" and all(e["instruction"].startswith("pick up the") for e in meta["episodes"])
    _, _, arrays = load_transitions(tmp_path / "spec.zarr")
    assert arrays["valid"].sum() == stats.transitions <= actor.seen  # the kept episodes' steps, as the policy acted


def test_train_bc_starts_from_a_saved_policy(tiny_vla, tmp_path):
    demos = sorted((tiny_vla.parent / "demos").glob("PickColor*.zarr"))
    start = load_vla(tiny_vla)
    train_bc(TrainBCConfig(datasets=tuple(map(str, demos)), out=str(tmp_path / "again"), init=str(tiny_vla), steps=1,
                           lr=1e-12, warmup_steps=1, batch_size=4, eval_episodes=0, progress=False))
    again = load_vla(tmp_path / "again")
    assert again.cfg == start.cfg and torch.equal(again.state_mean, start.state_mean)
    for (name, a), b in zip(start.model.state_dict().items(), again.model.state_dict().values()):
        assert torch.allclose(a.float(), b.float(), atol=1e-6), name


def test_distill_needs_a_run():
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "distill"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "--run RUN" in proc.stderr
