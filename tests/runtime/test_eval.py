"""`robot-rl eval`: per-run figures with CIs, IQM across runs (seeds), a video of the episodes and the operator
view's recordings of them."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from robot_rl.config import replace
from robot_rl.runtime.supervisor import train
from robot_rl.training.config import TrainConfig
from robot_rl.training.evaluation import across_runs
from robot_rl.utils.video import read_video


def test_iqm_across_runs_uses_the_middle_half():
    runs = [{"returns": np.array([0.0, 1.0, 2.0, 100.0]), "successes": np.array([0.0, 1.0, 1.0, 1.0])}
            for _ in range(3)]
    out = across_runs(runs)
    assert out["returns_iqm"] == 1.5  # 100 and 0 are outside the interquartile range
    assert out["returns_iqm_ci_low"] <= 1.5 <= out["returns_iqm_ci_high"]
    assert out["successes_iqm"] == 1.0


def test_eval_two_seeds_reports_iqm_and_writes_a_video(tmp_path):
    runs = []
    for seed in (0, 1):
        cfg = TrainConfig(name=f"s{seed}", runs_dir=str(tmp_path), seed=seed, total_env_steps=200, random_steps=100,
                          learning_starts=100, eval_every=0, eval_episodes=1, checkpoint_every=0, progress=False)
        cfg = replace(cfg, {"env.id": "robot_rl/Reach-v0", "env.max_episode_steps": 20, "agent.num_critics": 2,
                            "agent.utd": 1, "agent.batch_size": 32, "agent.hidden_dims": (32, 32),
                            "runtime.processes": False})
        runs.append(str(train(cfg)[0]))
    video = tmp_path / "episodes.gif"
    view = ["--view.enabled", "--view.live", "none"] if find_spec("rerun") else []  # the operator view's recordings
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "eval", *runs, "--episodes", "2", "--video",
                           str(video), *view], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert set(result) == {*runs, "across_runs"}
    assert result["across_runs"]["runs"] == 2 and "returns_iqm" in result["across_runs"]
    for run in runs:
        assert 0.0 <= result[run]["success_rate"] <= 1.0
    frames = read_video(video)
    assert frames.shape[0] >= 2 and frames.shape[-1] == 3  # two episodes of up to 21 frames each
    if view:  # the first run's episodes, each a recording: every step with its rendered frame and the outcome
        from robot_rl.view.recording import read_recording

        saved = sorted((Path(runs[0]) / "eval_view").glob("*.rrd"))
        assert [p.name for p in saved] == ["episode_00000.rrd", "episode_00001.rrd"]
        for path in saved:
            rec = read_recording(path)
            steps = len(rec["episode/step"])
            assert 1 <= steps <= 20 and len(rec["camera/render"]) == len(rec["action/policy"]) == steps
            assert rec["events"].values[-1].startswith(f"episode {path.stem[-1]}: ")


def test_the_best_evaluation_keeps_its_policy_and_eval_loads_it(tmp_path):
    """Each evaluation that is at least as good as every earlier one (success rate, then mean return) writes its
    policy to ``best/``: the weights the checkpoint taken at the same env step holds; ``robot-rl eval --policy best``
    evaluates them."""
    from safetensors.torch import load_file

    from robot_rl.runtime.checkpoint import best_evaluation, evaluation_score
    from robot_rl.utils.run_dir import policy_file

    # 450 steps: the last evaluation is the end's, right before the final checkpoint (at 400, the end would
    # checkpoint again after the updates still owed, over the one taken beside that evaluation)
    cfg = TrainConfig(name="best", runs_dir=str(tmp_path), seed=0, total_env_steps=450, random_steps=100,
                      learning_starts=100, eval_every=100, eval_episodes=2, checkpoint_every=100, checkpoint_keep=5,
                      progress=False)
    cfg = replace(cfg, {"env.id": "robot_rl/Reach-v0", "env.max_episode_steps": 20, "agent.num_critics": 2,
                        "agent.utd": 1, "agent.batch_size": 32, "agent.hidden_dims": (32, 32),
                        "runtime.processes": False})
    run = train(cfg)[0]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [(r["step"], {k[5:]: v for k, v in r.items() if k.startswith("eval/")}) for r in rows
             if "eval/return_mean" in r]
    assert len(evals) >= 5, evals
    best = best_evaluation(run)
    scores = [evaluation_score(e) for _, e in evals]
    expected = max(range(len(evals)), key=lambda i: (scores[i], i))  # the best, the later of equals
    assert best["env_steps"] == evals[expected][0], (best, evals)
    kept = load_file(str(policy_file(run, "best")))
    at_that_step = load_file(str(run / "checkpoints" / f"{best['env_steps']:010d}" / "policy.safetensors"))
    assert kept.keys() == at_that_step.keys() and all((kept[k] == at_that_step[k]).all() for k in kept)
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "eval", str(run), "--policy", "best", "--episodes",
                           "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "success_rate" in json.loads(proc.stdout)
    from robot_rl.runtime.learner.loop import Learner

    resumed = Learner(cfg, run, resume=True)  # a resume competes with the best kept, not from scratch
    try:
        assert resumed.best_score == evaluation_score(best["evaluation"])
    finally:
        resumed.close(unlink=True)


def test_an_evaluation_is_scored_by_success_then_return() -> None:
    from robot_rl.runtime.checkpoint import evaluation_score

    assert evaluation_score({"success_rate": 0.5, "return_mean": -3.0}) > evaluation_score(
        {"success_rate": 0.4, "return_mean": 9.0})
    assert evaluation_score({"success_rate": float("nan"), "return_mean": 2.0}) > evaluation_score(
        {"success_rate": float("nan"), "return_mean": 1.0})  # a task without a success check: its return


def test_a_best_policy_that_fails_to_save_leaves_the_previous_best(tmp_path) -> None:
    """A save that fails half-way through writing (the file-size limit reached, as on a full disk) leaves the
    previous best policy and its evaluation, and no temporary file."""
    import resource
    import signal

    import torch
    from safetensors.torch import load_file

    from robot_rl.runtime.checkpoint import best_evaluation, save_best_policy
    from robot_rl.utils.run_dir import BEST, policy_file

    class Policy:
        def __init__(self, size: int) -> None:
            self.size = size

        def policy_state(self) -> dict[str, torch.Tensor]:
            return {"w": torch.ones(self.size)}

    save_best_policy(tmp_path, Policy(4), {"success_rate": 0.5}, 100)
    limits, handler = resource.getrlimit(resource.RLIMIT_FSIZE), signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, limits[1]))  # writes past 100 kB fail with EFBIG
    try:
        with pytest.raises(OSError):
            save_best_policy(tmp_path, Policy(1_000_000), {"success_rate": 0.9}, 200)  # 4 MB
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert load_file(str(policy_file(tmp_path, "best")))["w"].shape == (4,)
    assert best_evaluation(tmp_path) == {"env_steps": 100, "evaluation": {"success_rate": 0.5}}
    assert [p.name for p in (tmp_path / BEST).iterdir()] == ["policy.safetensors"]
