"""The algorithm contract through the real runtime: behaviour cloning trained and evaluated by `robot-rl train` with
actor and learner processes (SAC runs there in tests/runtime/test_processes.py), and an agent of your own,
``agent.name: module:Class`` from a file in ``env.imports``, trained, checkpointed, resumed and evaluated."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from robot_rl.replay.store import load_buffer
from robot_rl.runtime.checkpoint import latest_checkpoint

from .test_processes import logged

CLI = [sys.executable, "-m", "robot_rl.cli"]


@pytest.mark.timeout(400)
def test_behaviour_cloning_trains_and_evaluates_through_actor_and_learner_processes(tmp_path) -> None:
    proc = subprocess.run([*CLI, "train", "--env.id", "robot_rl/Reach-v0", "--agent.name", "bc", "--agent.utd", "2",
                           "--demos", "scripted:10", "--total-env-steps", "900", "--random-steps", "100",
                           "--learning-starts", "100", "--eval-every", "0", "--eval-episodes", "10",
                           "--runtime.max-update-lag", "100", "--name", "bc", "--runs-dir", str(tmp_path / "runs"),
                           "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=380)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "runs" / "bc"
    final = json.loads((run / "final_eval.json").read_text())
    assert final["success_rate"] >= 0.4, final  # 10 scripted demos; BC reaches ~70 % on Reach
    losses = [v for _, v in logged(run, "train/bc_loss")]
    assert losses and losses[-1] < losses[0], losses
    replay = load_buffer(latest_checkpoint(run) / "replay.zarr")
    online = replay.partitions["online"]
    versions = online.arrays["policy_version"][: online.size][online.arrays["valid"][: online.size]]
    assert versions.max() > 2, "the actor never acted with the BC policy the learner published"
    assert replay.partitions["demos"].num_transitions > 0


AGENT_MODULE = '''
"""An agent of your own: behaviour cloning of the online data's own actions (it exists to show the plumbing)."""
from dataclasses import dataclass

from robot_rl.agents import BCAgent, BCConfig, Sampling


@dataclass(frozen=True)
class EchoConfig(BCConfig):
    name: str = "my_agents:EchoAgent"
    """Which agent."""
    scale: float = 1.0
    """A field of its own."""


class EchoAgent(BCAgent):
    name = "my_agents:EchoAgent"
    config_class = EchoConfig

    @classmethod
    def sampling(cls, cfg):
        return Sampling(batch_size=cfg.batch_size, utd=1, mix={"online": 1.0})

    def prepare(self, replay):
        if not self.encoder.normalizer_fitted:
            self.encoder.fit_state_normalizer(replay.valid_states("online"))
'''


@pytest.mark.timeout(300)
def test_an_agent_of_your_own_by_module_and_class(tmp_path) -> None:
    (tmp_path / "my_agents.py").write_text(textwrap.dedent(AGENT_MODULE))
    (tmp_path / "run.yaml").write_text(textwrap.dedent("""
        env: {id: Pendulum-v1, imports: [my_agents.py]}
        agent: {name: "my_agents:EchoAgent", scale: 2.0, batch_size: 32, hidden_dims: [16]}
        total_env_steps: 300
        random_steps: 100
        learning_starts: 100
        eval_every: 0
        eval_episodes: 1
        checkpoint_every: 150
        runtime: {processes: false}
        """))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    common = ["--runs-dir", str(tmp_path / "runs"), "--name", "echo", "--no-progress"]
    proc = subprocess.run([*CLI, "train", str(tmp_path / "run.yaml"), *common], cwd=elsewhere,
                          capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "runs" / "echo"
    assert "name: my_agents:EchoAgent" in (run / "config.yaml").read_text()
    assert json.loads((latest_checkpoint(run) / "counters.json").read_text())["updates"] == 200
    proc = subprocess.run([*CLI, "train", "--resume", str(run), "--total-env-steps", "400", "--no-progress"],
                          cwd=elsewhere, capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((latest_checkpoint(run) / "counters.json").read_text())["updates"] == 300
    proc = subprocess.run([*CLI, "eval", str(run), "--episodes", "1"], cwd=tmp_path.parent, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and np.isfinite(json.loads(proc.stdout)["return_mean"]), proc.stderr[-2000:]
