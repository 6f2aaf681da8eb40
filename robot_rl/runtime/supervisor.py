"""``robot-rl train``: prepares the run folder, then runs the learner and the actors through a launcher (OS
processes here, or Ray actors on other machines), shows progress, replaces a dead actor and resumes a dead learner
from its latest checkpoint. A process that refuses the config (exit code 2) ends the run at once: restarts are for
crashes only. With ``runtime.processes: false`` the same actor and learner alternate in one process instead
(debugging, small tests).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from robot_rl.config import ConfigError, save_yaml
from robot_rl.runtime.config import TrainConfig
from robot_rl.runtime.launchers import CONFIG_ERROR, Launcher, LocalLauncher, Process
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, board_name
from robot_rl.utils.log import get_logger
from robot_rl.utils.progress import progress_bar

log = get_logger(__name__)


def prepare_run(cfg: TrainConfig, resume_dir: str | Path | None) -> Path:
    """The run folder: a new one (refusing to overwrite a run) or the one to resume; writes config.yaml."""
    cfg.validate()
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        if not (run_dir / "checkpoints" / "latest").is_file():
            raise FileNotFoundError(f"cannot resume {run_dir}: no checkpoint (missing checkpoints/latest)")
    else:
        name = cfg.name or f"{cfg.env.id.replace('/', '_').replace(':', '_')}-{datetime.now():%Y%m%d-%H%M%S}"
        run_dir = Path(cfg.runs_dir) / name
        if (run_dir / "checkpoints").exists():
            raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} or another name")
        run_dir.mkdir(parents=True, exist_ok=True)
    save_yaml(cfg, run_dir / "config.yaml")
    return run_dir


def status_line(run_dir: Path) -> str:
    try:
        s = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return ""
    line = (f"updates {s.get('updates', 0)} | utd {s.get('utd_window', float('nan')):.2f} "
            f"(run {s.get('utd_actual', float('nan')):.2f})")
    if "policy_lag_steps" in s:
        line += f" | lag {s['policy_lag_steps']:.0f} steps"
    if "eval_return" in s:
        line += f" | eval return {s['eval_return']:.1f}"
    if s.get("eval_success") is not None:
        line += f" success {s['eval_success']:.0%}"
    return line


def run_inprocess(cfg: TrainConfig, run_dir: Path, resume: bool) -> dict[str, float]:
    from robot_rl.runtime.actor import Actor
    from robot_rl.runtime.learner import Learner

    learner = Learner(cfg, run_dir, resume=resume)
    actor = Actor(cfg, run_dir)
    try:
        with progress_bar(cfg.progress, info=True) as progress:
            task = progress.add_task("train", total=cfg.total_env_steps, info="")
            while True:
                actor.step()
                actor.publish_stats()
                if not learner.step():
                    break
                progress.update(task, completed=learner.counters.env_steps, info=status_line(run_dir))
    finally:
        actor.close()
        actor.ring.close(unlink=True)
        learner.close(unlink=True)
    return learner.last_eval


class Supervisor:
    """Starts and watches the learner and the actors of one run (through ``launcher``)."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, resume: bool, launcher: Launcher | None = None) -> None:
        self.cfg, self.run_dir, self.resume = cfg, run_dir, resume
        self.launcher = launcher or LocalLauncher(run_dir)
        self.learner: Process | None = None
        self.actors: dict[int, Process] = {}
        self.incarnations = dict.fromkeys(range(cfg.runtime.num_actors), 0)
        self.learner_restarts = 0
        self.actor_restarts = 0

    def start_actor(self, index: int) -> None:
        self.actors[index] = self.launcher.start_actor(index, self.incarnations[index])

    def run(self) -> dict[str, float]:
        # SIGTERM (e.g. from a job scheduler) ends the run like Ctrl-C: children stopped, shared memory freed.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
        try:
            self.launcher.setup()
            for i in range(self.cfg.runtime.num_actors):  # they start up while the learner does
                self.start_actor(i)
            self.learner = self.launcher.start_learner(self.resume)
            with progress_bar(self.cfg.progress, info=True) as progress:
                task = progress.add_task("train", total=self.cfg.total_env_steps, info="")
                while True:
                    time.sleep(0.2)
                    learner = shm.peek_learner_status(board_name(self.run_dir))
                    steps, stopped = (learner.env_steps, learner.stop) if learner else (0, False)
                    progress.update(task, completed=min(steps, self.cfg.total_env_steps),
                                    info=status_line(self.run_dir))
                    code = self.learner.poll()
                    if code == 0:
                        break
                    if code is not None:
                        self._learner_died(code)
                    for i, proc in list(self.actors.items()):
                        if proc.poll() is not None and not stopped:
                            self._actor_died(i, proc.returncode)
            self._wait_actors(timeout=30)
        finally:
            self.shutdown()
        return json.loads((self.run_dir / "final_eval.json").read_text())

    def _learner_died(self, code: int) -> None:
        if code == CONFIG_ERROR:
            raise ConfigError("the learner refused the run's config (its message is above)")
        if self.learner_restarts >= self.cfg.runtime.learner_restarts:
            raise RuntimeError(f"learner exited with code {code}; restarts used up "
                               f"({self.cfg.runtime.learner_restarts}). Resume with --resume {self.run_dir}")
        self.learner_restarts += 1
        resume = (self.run_dir / "checkpoints" / "latest").is_file()
        log.warning("learner exited with code %d; restarting it (%s)", code,
                    "from the latest checkpoint" if resume else "fresh, replaying the spools")
        self.learner = self.launcher.start_learner(resume)

    def _actor_died(self, index: int, code: int) -> None:
        if code == CONFIG_ERROR:
            raise ConfigError(f"actor {index} refused the run's config (its message is above)")
        self.launcher.check_actor_death(index, code)
        if self.actor_restarts >= self.cfg.runtime.actor_restarts:
            raise RuntimeError(f"actor {index} exited with code {code}; restarts used up "
                               f"({self.cfg.runtime.actor_restarts})")
        self.actor_restarts += 1
        self.incarnations[index] += 1
        log.warning("actor %d exited with code %d; starting a replacement", index, code)
        self.start_actor(index)

    def _wait_actors(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.actors.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.terminate()

    def shutdown(self) -> None:
        for proc in [self.learner, *self.actors.values()]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.launcher.teardown()
        shm.unlink_shm(board_name(self.run_dir))
        if actor_dir(self.run_dir).is_dir():
            for path in actor_dir(self.run_dir).glob("*.json"):
                shm.unlink_shm(json.loads(path.read_text())["ring"])
                path.unlink()


def train(cfg: TrainConfig, resume_dir: str | Path | None = None) -> tuple[Path, dict[str, float]]:
    run_dir = prepare_run(cfg, resume_dir)
    resume = resume_dir is not None
    launcher: Launcher = LocalLauncher(run_dir)
    if cfg.runtime.transport == "ray":  # actors on other machines (or many): see transport/ray_launcher.py
        from robot_rl.runtime.transport.ray_launcher import RayLauncher

        launcher = RayLauncher(cfg, run_dir)
    elif not cfg.runtime.processes:
        return run_dir, run_inprocess(cfg, run_dir, resume=resume)
    return run_dir, Supervisor(cfg, run_dir, resume=resume, launcher=launcher).run()
