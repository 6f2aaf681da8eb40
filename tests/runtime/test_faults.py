"""Nothing lost at any instant: ``robot-rl train`` as real processes, hit by a power cut before the first
checkpoint, a closed terminal or a scheduler's SIGTERM, a hung (SIGSTOPped) learner or actor, a spent restart
budget, a full disk, the supervisor's own death, and a log that is not a terminal. Every case ends in a run that
resumes and holds every transition exactly once (tests/runtime/delivery.py)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from robot_rl.config import replace, save_yaml
from robot_rl.runtime.progress import run_progress
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import board_name
from robot_rl.utils.failpoint import ENV

from .delivery import (
    CLI,
    alive,
    assert_exactly_once,
    assert_resumed_without_warmup,
    children,
    clear_shm,
    kill_group,
    shm_left,
    spooled_chunks,
    start_train,
    wait_for,
)
from .test_processes import tiny


def config(tmp_path: Path, name: str, overrides: dict | None = None, **runtime) -> Path:
    cfg = tiny(tmp_path, name, **runtime)
    cfg = replace(cfg, {"checkpoint_every": 0, "checkpoint_every_s": 0.0, **(overrides or {})})
    path = tmp_path / f"{name}.yaml"
    save_yaml(cfg, path)
    return path


def resume(run: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "train", "--resume", str(run), *args], capture_output=True, text=True,
                          timeout=timeout)


def env_steps(run: Path) -> int:
    board = shm.peek_learner_status(board_name(run))
    return board.env_steps if board else 0


@pytest.mark.timeout(400)
def test_power_cut_before_the_first_checkpoint_resumes_from_the_spools(tmp_path):
    cfg = config(tmp_path, "cut", {"total_env_steps": 100_000}, control_hz=300.0)
    run, log = tmp_path / "cut", tmp_path / "cut.log"
    proc = start_train(cfg, log=log)
    try:
        wait_for(lambda: env_steps(run) >= 400, 180, "400 env steps", proc, log)
    finally:
        kill_group(proc)  # learner, actor and supervisor at once, mid-run: no checkpoint was ever written
    clear_shm(run)  # the reboot after a power cut
    assert not (run / "checkpoints" / "latest").exists()
    spooled = spooled_chunks(run)
    assert spooled >= 400 // 16, spooled
    cut_at = run_progress(run).env_steps  # what the spools hold
    done = resume(run, "--total-env-steps", "1100")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no checkpoint yet" in done.stderr
    # every transition spooled before the cut (400 or more) and those after it, each once
    assert assert_exactly_once(run) >= 1100
    assert not shm_left(run)
    # the warm-up (200 random actions) was done before the cut: none after it, the ratio held from the first window
    assert_resumed_without_warmup(run, 200, cut_at, 2.0)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP, signal.SIGTERM], ids=["Ctrl-C twice", "SIGHUP",
                                                                                  "SIGTERM"])
def test_a_closed_terminal_or_sigterm_stops_with_a_final_checkpoint_and_resumes(tmp_path, sig):
    cfg = config(tmp_path, "sig", {"total_env_steps": 100_000}, control_hz=300.0)
    run, log = tmp_path / "sig", tmp_path / "sig.log"
    proc = start_train(cfg, log=log)
    try:
        wait_for(lambda: env_steps(run) >= 400, 180, "400 env steps", proc, log)
        kids = children(proc.pid)
        assert len(kids) >= 2, kids  # learner, actor (and Python's shared-memory resource tracker)
        if sig == signal.SIGINT:  # a terminal sends Ctrl-C to the whole process group; an impatient person, twice
            os.killpg(proc.pid, sig)
            time.sleep(0.5)
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        assert proc.wait(timeout=120) == 128 + sig
        wait_for(lambda: not [k for k in kids if alive(k)], 10, "every child to exit")
    finally:
        kill_group(proc)
    assert not shm_left(run)
    # the actors flushed their last chunks, the learner took everything in: nothing waits in a spool
    assert spooled_chunks(run) == 0
    stopped = assert_exactly_once(run)
    assert stopped >= 400
    text = log.read_text()
    assert "stopped: checkpoint at" in text
    assert "Traceback" not in text and "Exception ignored" not in text, text[-3000:]  # a clean exit on every path
    clear_shm(run)  # and the machine rebooted overnight
    done = resume(run, "--total-env-steps", str(stopped + 400))
    assert done.returncode == 0, done.stderr[-3000:]
    assert assert_exactly_once(run) >= stopped + 400
    assert_resumed_without_warmup(run, 200, stopped, 2.0)


@pytest.mark.timeout(500)
def test_a_hung_learner_is_replaced_and_a_spent_restart_budget_ends_the_run_with_one_message(tmp_path):
    # one restart per window: the hung learner uses it, the next death ends the run
    cfg = config(tmp_path, "hung", {"total_env_steps": 100_000, "checkpoint_every": 300}, control_hz=300.0,
                 heartbeat_timeout=3.0, learner_restarts=1, restart_backoff_s=0.2)
    run, log = tmp_path / "hung", tmp_path / "hung.log"
    proc = start_train(cfg, log=log)
    try:
        wait_for(lambda: (run / "checkpoints" / "latest").is_file(), 180, "a first checkpoint", proc, log)
        first = shm.peek_learner_status(board_name(run)).pid
        os.kill(first, signal.SIGSTOP)  # a deadlock, as the supervisor sees it: alive, silent
        second = wait_for(lambda: (s := shm.peek_learner_status(board_name(run))) and s.pid != first and s.pid,
                          120, "a replacement learner", proc, log)
        assert not alive(first)
        assert "is hung: no heartbeat for" in log.read_text()
        steps = env_steps(run)
        wait_for(lambda: env_steps(run) > steps + 100, 120, "the replacement learning", proc, log)
        os.kill(second, signal.SIGKILL)
        assert proc.wait(timeout=120) == 1
    finally:
        kill_group(proc)
    text = log.read_text()
    assert "1 restarts within 600 s used up (runtime.learner_restarts)" in text
    assert "Traceback" not in text
    assert not shm_left(run)
    before = assert_exactly_once(run)
    done = resume(run, "--total-env-steps", str(before + 600))
    assert done.returncode == 0, done.stderr[-3000:]
    assert assert_exactly_once(run) >= before + 600


@pytest.mark.timeout(400)
def test_a_hung_actor_is_replaced(tmp_path):
    cfg = config(tmp_path, "hung_actor", {"total_env_steps": 1500}, control_hz=300.0, heartbeat_timeout=3.0,
                 restart_backoff_s=0.2)
    run, log = tmp_path / "hung_actor", tmp_path / "hung_actor.log"
    proc = start_train(cfg, log=log)
    try:
        wait_for(lambda: env_steps(run) >= 300, 180, "300 env steps", proc, log)
        actor = next(json.loads(p.read_text())["pid"] for p in (run / "actors").glob("*.json"))
        os.kill(actor, signal.SIGSTOP)
        assert proc.wait(timeout=300) == 0
    finally:
        kill_group(proc)
    assert f"actor 0 (pid {actor}) is hung" in log.read_text()
    assert assert_exactly_once(run) >= 1500


@pytest.mark.timeout(400)
def test_a_full_disk_stops_the_run_with_one_message_the_last_checkpoint_intact(tmp_path):
    cfg = config(tmp_path, "full", {"total_env_steps": 100_000, "checkpoint_every": 300, "log_every": 50},
                 control_hz=300.0)
    run, log = tmp_path / "full", tmp_path / "full.log"
    proc = start_train(cfg, log=log)
    try:
        wait_for(lambda: (run / "checkpoints" / "latest").is_file(), 180, "a first checkpoint", proc, log)
        learner = shm.peek_learner_status(board_name(run)).pid
        # the learner's next write past 4 KB fails as on a full disk (EFBIG, the same path as ENOSPC)
        resource.prlimit(learner, resource.RLIMIT_FSIZE, (4096, 4096))
        assert proc.wait(timeout=120) == 1
    finally:
        kill_group(proc)
    text = log.read_text()
    assert "stopped, the disk is full (" in text and "File too large" in text, text[-3000:]
    assert "the error did not say which" not in text, text[-3000:]  # the file is named
    assert "stopped on a full disk" in text and "Traceback" not in text
    assert not list((run / "checkpoints").glob(".*"))  # nothing torn left behind
    assert_exactly_once(run)  # the last checkpoint loads and is whole
    stopped = run_progress(run).env_steps  # the checkpoint and what the actor spooled after it
    clear_shm(run)
    done = resume(run, "--total-env-steps", str(stopped + 400))
    assert done.returncode == 0, done.stderr[-3000:]
    assert assert_exactly_once(run) >= stopped + 400
    assert_resumed_without_warmup(run, 200, stopped, 2.0)


@pytest.mark.timeout(300)
def test_children_stop_with_a_final_checkpoint_when_the_supervisor_is_killed(tmp_path):
    cfg = config(tmp_path, "orphan", {"total_env_steps": 100_000}, control_hz=300.0)
    run, log = tmp_path / "orphan", tmp_path / "orphan.log"
    proc = start_train(cfg, log=log)
    try:
        wait_for(lambda: env_steps(run) >= 300, 180, "300 env steps", proc, log)
        kids = children(proc.pid)
        proc.kill()  # the supervisor alone, however it dies: its children get SIGTERM (no orphans)
        proc.wait(timeout=30)
        wait_for(lambda: not [k for k in kids if alive(k)], 120, "the children to exit")
    finally:
        kill_group(proc)
    assert (run / "checkpoints" / "latest").is_file()  # the learner's final checkpoint on its way out
    assert assert_exactly_once(run) >= 300


@pytest.mark.timeout(300)
def test_plain_progress_lines_and_time_checkpoints_when_not_a_terminal(tmp_path):
    cfg = config(tmp_path, "plain", {"total_env_steps": 3000, "checkpoint_every_s": 3.0, "keep_policies": True,
                                     "progress": True, "progress_every_s": 2.0}, control_hz=200.0)
    run, log = tmp_path / "plain", tmp_path / "plain.log"
    proc = start_train(cfg, log=log)
    t0 = time.monotonic()
    try:
        assert proc.wait(timeout=240) == 0, log.read_text()[-3000:]
    finally:
        kill_group(proc)
    took = time.monotonic() - t0
    lines = [ln for ln in log.read_text().splitlines() if "[robot_rl.progress] train " in ln]
    # one line per progress_every_s (startup of ~10 s included in `took`), the last at the end, uncut
    assert len(lines) >= (took - 15) / 2.0 * 0.5, (took, lines)
    assert "train 3000/3000 (100%)" in lines[-1] and "| updates " in lines[-1], lines[-1]
    assert "left" in lines[len(lines) // 2]
    # by time, not by steps (checkpoint_every 0): more checkpoints than the final one
    assert len(list((run / "checkpoints" / "policies").glob("*.safetensors"))) >= 3


@pytest.mark.timeout(300)
@pytest.mark.parametrize("robot", [False, True], ids=["sim-waits", "robot-never-blocked"])
def test_the_spool_bound_checkpoints_early_and_holds_a_sim_actor(tmp_path, robot):
    # about 120 (sim) / 36 (robot) transitions; no checkpoint by steps or time: only spool pressure writes them
    steps = 3000 if robot else 1000
    cfg = config(tmp_path, "bound", {"total_env_steps": steps, "keep_policies": True},
                 spool_max_mb=0.024 if robot else 0.08, **({"max_update_lag": 0, "control_hz": 200.0} if robot else {}))
    run, log = tmp_path / "bound", tmp_path / "bound.log"
    proc = start_train(cfg, log=log)
    try:
        assert proc.wait(timeout=240) == 0, log.read_text()[-3000:]
    finally:
        kill_group(proc)
    # early ones (at most one per 5 s) + the final
    assert len(list((run / "checkpoints" / "policies").glob("*.safetensors"))) >= 3
    text = log.read_text()
    assert ("past runtime.spool_max_mb" in text) == robot, text[-2000:]
    if not robot:  # held while the spool was full
        paused = [v for k, v in json.loads((run / "metrics.jsonl").read_text().splitlines()[-1]).items()
                  if k.endswith("/paused_s")]
        assert paused and paused[0] > 0
    assert assert_exactly_once(run) >= steps


@pytest.mark.timeout(500)
@pytest.mark.parametrize("point", ["checkpoint.replay_written:2", "checkpoint.renamed:2", "spool.trim:2",
                                   "evaluation.episode:2"])
def test_a_power_cut_at_the_worst_instant_resumes_with_every_transition_once(tmp_path, monkeypatch, point):
    """The whole run SIGKILLed at one exact instant (robot_rl.utils.failpoint): half-way through writing a
    checkpoint, with a complete checkpoint not yet named ``latest``, half-way through trimming a spool, and in the
    middle of an evaluation. The previous checkpoint stays the one resumed; nothing is delivered twice or lost."""
    cfg = config(tmp_path, "instant", {"total_env_steps": 100_000, "checkpoint_every": 200, "eval_every": 300,
                                       "eval_episodes": 2}, control_hz=300.0)
    run, log = tmp_path / "instant", tmp_path / "instant.log"
    monkeypatch.setenv(ENV, point)
    proc = start_train(cfg, log=log)
    try:
        assert proc.wait(timeout=300) == -signal.SIGKILL, log.read_text()[-3000:]
    finally:
        kill_group(proc)
    monkeypatch.delenv(ENV)
    root = run / "checkpoints"
    named = (root / "latest").read_text().strip()
    assert (root / named / "counters.json").is_file()  # the previous checkpoint, complete
    torn = list(root.glob(".*.tmp*"))
    newer = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name > named)
    if point.startswith("checkpoint.replay_written"):
        assert torn and not (torn[0] / "counters.json").exists()
    if point.startswith("checkpoint.renamed"):
        assert newer, list(root.iterdir())  # complete, renamed into place, but never named by `latest`
    if point.startswith("spool.trim"):  # chunks the latest checkpoint holds are still on disk
        ingested = json.loads((root / named / "counters.json").read_text())["ingested"]
        held = [int(p.name.split(".")[0]) for uid, nxt in ingested.items()
                for p in (run / "spool" / uid).glob("*.safetensors") if int(p.name.split(".")[0]) < int(nxt)]
        assert held, ingested
    stopped = int(json.loads((root / named / "counters.json").read_text())["env_steps"])
    done = resume(run, "--total-env-steps", str(stopped + 600))
    assert done.returncode == 0, done.stderr[-3000:]
    assert assert_exactly_once(run) >= stopped + 600
    assert not list(root.glob(".*.tmp*"))  # a torn checkpoint is cleaned by the next one
    assert not shm_left(run)
