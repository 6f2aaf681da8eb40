"""The learner stays visibly alive through long evaluations, and the UTD rate limiter holds from the first env
step past learning_starts, also while the learner process is still starting."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from robot_rl.config import replace
from robot_rl.envs import WrapperConfig
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.run_folder import prepare_run
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, board_name
from robot_rl.training.config import TrainConfig

from .test_processes import CLI, logged, wait_for


def test_heartbeat_continues_through_an_evaluation_longer_than_the_timeout(tmp_path) -> None:
    slow = WrapperConfig(target="tests.runtime.slow_env:SlowStep", kwargs={"seconds": 0.03})
    cfg = TrainConfig(name="hb", runs_dir=str(tmp_path), eval_episodes=2, progress=False)
    cfg = replace(cfg, {"env.wrappers": (slow,), "env.max_episode_steps": 40, "runtime.heartbeat_timeout": 1.0,
                        "agent.num_critics": 2, "agent.hidden_dims": (32, 32)})
    learner = Learner(cfg, prepare_run(cfg, None))
    ages: list[float] = []
    done = threading.Event()

    def watch() -> None:  # what an actor sees of the learner while it evaluates
        while not done.is_set():
            status = shm.peek_learner_status(board_name(learner.run_dir))
            if status is not None:
                ages.append(status.beat_age_s)
            time.sleep(0.02)
    watcher = threading.Thread(target=watch)
    try:
        learner.publisher.beat()
        watcher.start()
        t0 = time.perf_counter()
        learner.evaluate()
        took = time.perf_counter() - t0
    finally:
        done.set()
        watcher.join()
        learner.close(unlink=True)
    assert took > 2 * cfg.runtime.heartbeat_timeout, took  # 2 x 40 steps x 30 ms
    # Beats every 0.25 s while evaluating; what matters is that no actor ever sees it silent for the timeout (a loaded
    # 2-core CI machine once delayed the beat thread to 0.69 s; without the beats the age reaches ~2.4 s).
    assert ages and max(ages) < cfg.runtime.heartbeat_timeout, max(ages)


@pytest.mark.timeout(300)
def test_rate_limiter_holds_while_the_learner_starts_late(tmp_path) -> None:
    """The actor runs alone first: it stops at learning_starts + max_update_lag although its warm-up would go on;
    once the learner starts late, owed updates never exceed the bound for the rest of the run."""
    cfg = TrainConfig(name="late", runs_dir=str(tmp_path), total_env_steps=900, random_steps=800, learning_starts=200,
                      eval_every=0, eval_episodes=1, checkpoint_every=0, log_every=25, progress=False)
    lag = 100
    cfg = replace(cfg, {"agent.num_critics": 2, "agent.utd": 1, "agent.batch_size": 32, "agent.hidden_dims": (32, 32),
                        "runtime.chunk_steps": 16, "runtime.max_update_lag": lag})
    run = prepare_run(cfg, None)
    actor = subprocess.Popen([*CLI, "actor", "--run-dir", str(run)])
    learner = None
    try:
        wait_for(lambda: actor_dir(run).is_dir() and any(actor_dir(run).glob("*.json")), 120, "the actor")
        ring = json.loads(next(actor_dir(run).glob("*.json")).read_text())["ring"]

        def steps() -> int:
            status = shm.ring_status(ring)
            return status.stats.env_steps if status else 0
        wait_for(lambda: steps() >= cfg.learning_starts + lag, 120, "the actor's warm-up")
        time.sleep(3.0)  # a learner that takes its time to start
        assert steps() <= cfg.learning_starts + lag + 1, steps()
        learner = subprocess.Popen([*CLI, "learner", "--run-dir", str(run)])
        assert learner.wait(timeout=240) == 0
        assert actor.wait(timeout=60) == 0
    finally:
        for proc in (actor, learner):
            if proc is not None and proc.poll() is None:
                proc.kill()
        for path in actor_dir(run).glob("*.json") if actor_dir(run).is_dir() else ():
            shm.unlink_shm(json.loads(path.read_text())["ring"])
        shm.unlink_shm(board_name(run))
    owed = [v for step, v in logged(Path(run), "utd/owed_updates") if step > cfg.learning_starts]
    assert owed and max(owed) <= lag + 1, owed
    # Hence the UTD: updates / (env steps past learning_starts) >= 1 - (lag + 1) / (env steps past learning_starts).
    utd = [(step, v) for step, v in logged(Path(run), "utd/actual") if step > cfg.learning_starts]
    assert utd and all(v >= 1 - (lag + 1) / (step - cfg.learning_starts) for step, v in utd), utd
    assert logged(Path(run), "utd/actual")[-1][1] == pytest.approx(1.0, abs=0.01)


def test_no_header_word_indices_outside_shm() -> None:
    """The shared-memory layout is private to the shm package (each header's words to its own module): every other
    module uses its typed accessors."""
    root = Path(__file__).parents[2]
    offenders = []
    for folder in ("robot_rl", "benchmarks", "tests", "sim", "controllers"):
        for path in (root / folder).rglob("*.py"):
            if path.parent.name == "shm" or path.name == Path(__file__).name:
                continue
            text = path.read_text()
            for word in ("header[", "shm.W_", "shm.HEAD", "shm.TAIL", "shm.SENT", "shm.DROPPED", "_W_STOP"):
                if word in text:
                    offenders.append(f"{path.relative_to(root)}: {word}")
    assert not offenders, offenders
