"""A run started from another run's agent (``init_from``): the learner begins with that checkpoint's networks and
optimizers and none of its data, the actor with no random warm-up; a mismatched agent or a folder without a
checkpoint is refused with one message."""

from __future__ import annotations

import pytest
import torch

from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.supervisor import train
from robot_rl.utils.state_io import load_state

from .test_train import small_config


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory) -> str:
    """A short run whose agent has been updated (so it differs from a fresh one of the same seed)."""
    root = tmp_path_factory.mktemp("sim")
    train(small_config(root, total_env_steps=200, checkpoint_every=200))
    return str(root / "t")


@pytest.mark.timeout(300)
def test_a_run_starts_from_another_runs_agent_and_acts_without_random_warm_up(sim_run, tmp_path) -> None:
    trained = load_state(latest_checkpoint(sim_run) / "agent.safetensors")
    cfg = small_config(tmp_path / "robot", init_from=sim_run, random_steps=-1, **{"agent.critic_warmup_updates": 7})
    assert cfg.warmup_steps(drives_hardware=False) == 0  # a trained policy acts from the first step
    (tmp_path / "robot" / "t").mkdir(parents=True)
    learner = Learner(cfg, tmp_path / "robot" / "t")
    try:
        now = learner.agent.state_dict()
        flat_now, flat_trained = _flat(now), _flat(trained)
        assert flat_now.keys() == flat_trained.keys()
        differ = [k for k in flat_now if not torch.equal(flat_now[k], flat_trained[k])]
        assert not differ, differ[:5]
        fresh = Learner(small_config(tmp_path / "fresh"), _mkdir(tmp_path / "fresh" / "t"))
        try:  # the same seed without init_from: the check above can tell
            assert any(not torch.equal(v, flat_trained[k]) for k, v in _flat(fresh.agent.state_dict()).items())
        finally:
            fresh.close(unlink=True)
        assert learner.replay.partitions["online"].size == 0 and learner.counters.env_steps == 0
        assert learner.agent.critic_warmup_left == 7  # the critics meet this run's env first
    finally:
        learner.close(unlink=True)


@pytest.mark.timeout(300)
def test_a_mismatched_agent_or_a_folder_without_checkpoint_is_refused(sim_run, tmp_path) -> None:
    wider = small_config(tmp_path / "robot", init_from=sim_run, **{"agent.hidden_dims": (64, 64)})
    (tmp_path / "robot" / "t").mkdir(parents=True)
    with pytest.raises(ValueError, match="another agent"):
        Learner(wider, tmp_path / "robot" / "t")
    with pytest.raises(ValueError, match="no intact checkpoint"):
        small_config(tmp_path / "x", init_from=str(tmp_path / "nothing")).validate()


@pytest.mark.timeout(120)
def test_a_resume_after_its_first_checkpoint_needs_no_base_run(sim_run, tmp_path) -> None:
    """The base run moved or deleted overnight: a resume loads its own agent, so only a run still without a
    checkpoint of its own needs the base."""
    import shutil

    from robot_rl.cli import resumed_agent

    base = tmp_path / "base"
    shutil.copytree(sim_run, base)
    cfg = small_config(tmp_path / "robot", init_from=str(base))
    shutil.rmtree(base)
    with pytest.raises(ValueError, match="no intact checkpoint"):  # nothing of its own yet: the base is needed
        resumed_agent(cfg, str(_mkdir(tmp_path / "robot" / "t"))).validate()
    resumed_agent(cfg, sim_run).validate()  # a run with a checkpoint: its own agent is loaded


def _mkdir(path):
    path.mkdir(parents=True)
    return path


def _flat(state: dict, prefix: str = "") -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif isinstance(v, torch.Tensor):
            out[f"{prefix}{k}"] = v
    return out
