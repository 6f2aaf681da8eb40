"""A human-in-the-loop training run as an operator works it, the scripted human at the controls: each episode waits
for the ready press, the human takes over and gives back, labels every episode success or failure; the labels reach
the run's counters and metrics, and each episode's saved recording (read back with rerun's own reader) shows the
wait, who steered each step and the label, step for step equal to what the replay holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robot_rl.config import from_dict
from robot_rl.replay.store import load_transitions
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.runtime.supervisor import train
from robot_rl.training.config import TrainConfig

pytest.importorskip("rerun")
from robot_rl.view.recording import read_recording  # noqa: E402  (needs rerun)

GIVE_UP = 50


@pytest.mark.timeout(120)
def test_scripted_operator_labels_episodes_and_the_recordings_show_takeovers(tmp_path: Path) -> None:
    cfg = from_dict(TrainConfig, {
        "name": "hil", "runs_dir": str(tmp_path), "total_env_steps": 400, "random_steps": 10**6,
        "learning_starts": 10**6, "eval_every": 0, "eval_episodes": 1, "checkpoint_every": 0, "progress": False,
        # success does not end an episode: the operator's label does (as with a learned reward)
        "env": {"id": "robot_rl/PickCube-v0", "max_episode_steps": 80, "kwargs": {"terminate_on_success": False}},
        "agent": {"num_critics": 2, "hidden_dims": [32, 32]},
        "runtime": {"processes": False, "spool": False},
        "teleop": {"device": "scripted", "start": "ready", "success_reward": 5.0,
                   "scripted": {"label": True, "give_up_steps": GIVE_UP, "max_takeovers": 2, "takeover_steps": 12,
                                "ready_after": 3, "noise": 0.0, "seed": 1}},
        # a flat-out sim outruns any viewer: a queue that never drops, so every step can be compared
        "view": {"enabled": True, "live": "none", "max_queue": 100_000}})
    run_dir, _ = train(cfg)
    status = json.loads((run_dir / "status.json").read_text())
    finished = status["episodes"]
    assert finished >= 4
    # every finished episode was labelled by the operator (the env's limit, 80 steps, is past the give-up point)
    assert status["labelled_success"] + status["labelled_failure"] == finished
    assert status["labelled_success"] >= 1 and status["labelled_failure"] >= 1, status
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any(m.get("train/episode_labelled") == 1.0 for m in metrics)

    _, _, rows = load_transitions(latest_checkpoint(run_dir) / "replay.zarr", partition="online")
    valid = rows["valid"]
    episodes = sorted(set(rows["episode_id"][valid]))
    files = sorted((run_dir / "view").glob("episode_*.rrd"))
    assert len(files) == finished + 1  # the episode running when the run ended has its recording too
    labels = {"success": 0, "failure": 0}
    took_over = 0
    for k, path in enumerate(files[:finished]):
        rec = read_recording(path)
        mine = np.flatnonzero(valid & (rows["episode_id"] == episodes[k]))
        mine = mine[np.argsort(rows["step"][mine])]
        steps = rec["episode/step"].scalars().ravel()
        assert np.array_equal(steps, rows["step"][mine])  # one frame per recorded step (its step number), none dropped
        # waiting for the ready press: frames without a recorded step, before the first one
        frames = rec["control/person"].frames
        waited = frames[frames < rec["episode/step"].frames[0]]
        assert len(waited) == cfg.teleop.scripted.ready_after + 1
        events = rec["events"].values
        assert events[0] == "waiting for the operator's ready" and events[1] in ("the policy acts", "the person steers")
        # who steered each recorded step, in the view and in the replay
        person = rec["control/person"].scalars().ravel()[len(waited):]
        assert np.array_equal(person.astype(bool), rows["intervened"][mine])
        took_over += int(person.sum() > 0)
        assert ("the person steers" in events) == bool(person.sum())
        assert len(rec["action/policy"]) == len(rec["action/person"]) == len(frames)
        # the label: the episode's last event, its last transition terminal, reward success_reward for a success
        outcome = "success" if rows["reward"][mine[-1]] == 5.0 else "failure"
        assert events[-1] == f"episode {k} ended: {outcome} (labelled by the operator)"
        assert rows["terminated"][mine[-1]] and not rows["terminated"][mine[:-1]].any()
        labels[outcome] += 1
        if outcome == "failure":  # pressed in the period after the scripted human gave up, as a person would
            assert len(mine) == GIVE_UP + 1
    assert labels == {"success": status["labelled_success"], "failure": status["labelled_failure"]}
    assert took_over >= 2
