"""`robot-rl train` refuses a config that cannot run before it starts any process: one message naming the field,
exit code 2, no run folder, no restart and no resume advice."""

from __future__ import annotations

import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "robot_rl.cli", "train"]


@pytest.mark.parametrize("args, field", [
    (["pendulum", "--env.id", "NoSuchEnv-v0"], "env.id: cannot make 'NoSuchEnv-v0'"),
    (["pendulum", "--env.id", "CartPole-v1"], "env.id: 'CartPole-v1' has action space Discrete"),
    (["pendulum", "--runtime.warmup", "scripted"], "runtime.warmup: 'scripted' needs a scripted expert"),
    (["pendulum", "--demos", "scripted:5"], "demos[0]: 'scripted:5' records scripted-expert demos"),
    (["pendulum", "--teleop.device", "scripted"], "teleop.device: 'scripted'"),
    (["pendulum", "--demos", "/nonexistent/demos.zarr"], "demos[0]: replay store not found"),
    (["pendulum", "--env.obs-map.state", "nope"], "env.obs_map: the observation has no entry 'nope'"),
    (["pendulum", "--agent.name", "bc"], "demos: agent 'bc' learns from the replay's 'prior' data"),
    (["pendulum", "--agent.name", "no_such_agent"], "agent.name: unknown agent 'no_such_agent'"),
    (["pendulum", "--env.kwargs", "{not json"], "env.kwargs"),
    (["pendulum", "--env.kwargs", '{"no_such_keyword": 1}'], "env.kwargs: 'Pendulum-v1' does not take"),
    (["pendulum", "--base-policy.path", "no_base"], "base_policy.path: 'no_base' does not exist: it is neither"),
    (["pendulum", "--base-policy.path", "no_base", "--base-policy.made-by", "robot-rl train-bc --out no_base"],
     "nor a saved policy folder (policy.json); make it first with: robot-rl train-bc --out no_base"),
    (["pickcube_pixels", "--demos"],
     "agent.encoder.pretrain_steps: the encoder pre-trains on the demos, and this run has none"),
    (["pickcube", "--env.kwargs", '{"image_size": 64}', "--replay.online-capacity", "100000000"],
     "replay: 100,200,000 rows with cameras need"),
])
def test_config_errors_stop_the_run_before_any_process_starts(tmp_path, args, field) -> None:
    proc = subprocess.run([*CLI, *args, "--runs-dir", str(tmp_path / "runs"), "--name", "x"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert field in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "runs").exists(), "a run folder was made: something started"
    assert "resume" not in proc.stderr.lower() and "restart" not in proc.stderr.lower()
    assert "Traceback" not in proc.stderr


def test_a_child_that_refuses_its_config_ends_the_run_without_restarts(tmp_path) -> None:
    """A config that passed in the parent but fails in a child (here: the run's config.yaml edited between two
    starts) ends with code 2 at once instead of burning the restart budget."""
    from robot_rl.config import save_yaml
    from robot_rl.training.config import TrainConfig

    cfg = TrainConfig(name="r", runs_dir=str(tmp_path), total_env_steps=200, random_steps=100, learning_starts=100,
                      eval_episodes=1, progress=False)
    run = tmp_path / "r"
    run.mkdir()
    save_yaml(cfg, run / "config.yaml")
    text = (run / "config.yaml").read_text().replace("id: Pendulum-v1", "id: NoSuchEnv-v0")
    (run / "config.yaml").write_text(text)
    for side in (["learner"], ["actor", "--index", "0"]):
        proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", *side, "--run-dir", str(run)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "env.id: cannot make 'NoSuchEnv-v0'" in proc.stderr, proc.stderr[-2000:]


def test_a_success_key_the_env_never_reports_is_said_with_the_keys_it_does(caplog) -> None:
    import logging

    from robot_rl.config import replace
    from robot_rl.runtime.preflight import check_run
    from robot_rl.training.config import TrainConfig

    cfg = replace(TrainConfig(), {"env.id": "robot_rl/Reach-v0", "env.success_key": "succes"})
    with caplog.at_level(logging.WARNING, logger="robot_rl"):
        check_run(cfg)
    assert "env.success_key 'succes' is not in the info" in caplog.text and "is_success" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="robot_rl"):
        check_run(replace(cfg, {"env.success_key": "is_success"}))
    assert "success_key" not in caplog.text


def test_a_replay_larger_than_memory_is_refused_with_capacities_that_fit() -> None:
    from robot_rl.cli import resolve_config
    from robot_rl.config import ConfigError, parse
    from robot_rl.replay.storage import RingStorage
    from robot_rl.runtime.preflight import _check_replay_memory
    from robot_rl.spaces import ObsSpec
    from robot_rl.training.config import TrainConfig

    cfg = parse(TrainConfig, resolve_config("pickcube_pixels"), [])
    spec = ObsSpec(state_dim=10, cameras={"front": (64, 64, 3), "wrist": (64, 64, 3)})
    row = RingStorage.bytes_needed(spec, 4, 1)
    _check_replay_memory(cfg, spec, 4, available=row * 140_000)  # 100k + 20k + 20k rows fit
    with pytest.raises(ConfigError) as refused:
        _check_replay_memory(cfg, spec, 4, available=row * 70_000)
    text = str(refused.value)
    assert text.startswith("replay: 140,000 rows with cameras need") and "\n" not in text, text
    assert ("--replay.online-capacity 40000 --replay.demos-capacity 8000 --replay.interventions-capacity 8000"
            in text), text  # four fifths of the RAM, in the configured proportions
    _check_replay_memory(cfg, ObsSpec(state_dim=10, cameras={}), 4, available=1)  # state rows: never refused
