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
import time
from pathlib import Path

from robot_rl.config import ConfigError
from robot_rl.policies.base import POLICY_FAILED
from robot_rl.runtime.checkpoint import has_checkpoint
from robot_rl.runtime.inprocess import run_inprocess
from robot_rl.runtime.liveness import Heartbeats, RestartBudget
from robot_rl.runtime.placement.local import CONFIG_ERROR, Launcher, LocalLauncher, Process
from robot_rl.runtime.placement.ray_launcher import RayLauncher
from robot_rl.runtime.progress import run_progress
from robot_rl.runtime.run_folder import prepare_run
from robot_rl.runtime.status_line import status_line
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, board_name
from robot_rl.training.config import TrainConfig
from robot_rl.utils.disk import DISK_FULL
from robot_rl.utils.log import get_logger
from robot_rl.utils.process import exit_on_signal
from robot_rl.utils.progress import progress_bar

log = get_logger(__name__)


class RunAborted(RuntimeError):
    """The supervisor ended the run: a restart budget spent, or a full disk (the message says which and how to
    continue)."""


class Supervisor:
    """Starts and watches the learner and the actors of one run (through ``launcher``).

    A child that exits with an error, or whose heartbeat stalls (:mod:`robot_rl.runtime.liveness`: a hang, a stuck
    driver call, SIGSTOP), is replaced: a learner resumes from the latest checkpoint (or, before the first, fresh
    from the actors' spools), an actor starts anew. Each kind has a restart budget per sliding window
    (``runtime.learner_restarts`` / ``actor_restarts`` per ``restart_window_s``) with exponential backoff; a spent
    budget ends the run with one error naming what kept failing. SIGTERM and SIGHUP stop the run like Ctrl-C: the
    actors flush their last chunks, the learner takes them in and writes a final checkpoint, shared memory is
    released; the exit code is 128 + the signal's number (SIGINT 130, SIGHUP 129, SIGTERM 143)."""

    LEARNER_STOP_S = 300.0
    """How long a stopping learner may take for its final checkpoint before it is killed."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, launcher: Launcher | None = None) -> None:
        """The learner resumes whenever the run folder holds a checkpoint (``--resume`` or a restart)."""
        self.cfg, self.run_dir = cfg, run_dir
        rt = cfg.runtime
        self.launcher = launcher or LocalLauncher(run_dir)
        self.learner: Process | None = None
        self.actors: dict[int, Process] = {}
        self.incarnations = dict.fromkeys(range(rt.num_actors), 0)
        self.learner_budget = RestartBudget(rt.learner_restarts, rt.restart_window_s, rt.restart_backoff_s)
        self.actor_budget = RestartBudget(rt.actor_restarts, rt.restart_window_s, rt.restart_backoff_s)
        self.heartbeats = Heartbeats(run_dir, rt.heartbeat_timeout, rt.startup_timeout)
        self.pending: dict[str, float] = {}
        """Restarts waiting out their backoff: "learner" or "actor<i>" -> when (``time.monotonic``)."""
        self._last_watch = 0.0

    def _watch(self, proc: Process) -> Process:
        if isinstance(getattr(proc, "pid", None), int):
            self.heartbeats.watch(proc.pid)
        return proc

    def start_actor(self, index: int) -> None:
        self.actors[index] = self._watch(self.launcher.start_actor(index, self.incarnations[index]))

    def start_learner(self) -> None:
        self.learner = self._watch(self.launcher.start_learner(has_checkpoint(self.run_dir)))

    def run(self) -> dict[str, float]:
        # SIGTERM (a job scheduler) and SIGHUP (a closed terminal, a dropped SSH session) end the run like Ctrl-C.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, exit_on_signal)
        try:
            self.launcher.setup()
            for i in range(self.cfg.runtime.num_actors):  # they start up while the learner does
                self.start_actor(i)
            self.start_learner()
            # a resumed run starts the count from what is on disk; the count shown never goes back (a restarted
            # learner reports its checkpoint's count until it has taken the spools in again)
            shown = min(run_progress(self.run_dir).env_steps, self.cfg.total_env_steps)
            with progress_bar(self.cfg.progress, info=True, every_s=self.cfg.progress_every_s) as progress:
                task = progress.add_task("train", total=self.cfg.total_env_steps, completed=shown, info="")
                while True:
                    time.sleep(0.2)
                    learner = shm.peek_learner_status(board_name(self.run_dir))
                    steps, stopped = (learner.env_steps, learner.stop) if learner else (0, False)
                    shown = max(shown, min(steps, self.cfg.total_env_steps))
                    progress.update(task, completed=shown, info=status_line(self.run_dir))
                    if self._poll(stopped):
                        break
            self._wait_actors(timeout=30)
        finally:
            self.shutdown()
        return json.loads((self.run_dir / "final_eval.json").read_text())

    def _poll(self, stopped: bool) -> bool:
        """One look at every child: deaths and hangs handled, due restarts started. True once the run is done."""
        now = time.monotonic()
        for key, when in list(self.pending.items()):
            if now >= when:
                del self.pending[key]
                if key == "learner":
                    self.start_learner()
                else:
                    self.start_actor(int(key.removeprefix("actor")))
        watch = now - self._last_watch >= 1.0
        if watch:
            self._last_watch = now
        if self.learner is not None:
            code = self.learner.poll()
            if code == 0:
                return True
            if code is None and watch:
                code = self._kill_if_hung(self.learner, "learner", self.heartbeats.learner_age)
            if code is not None:
                self._learner_died(code)
        for i, proc in list(self.actors.items()):
            if proc is None or stopped:
                continue
            code = proc.poll()
            if code is None and watch:
                code = self._kill_if_hung(proc, f"actor {i}", self.heartbeats.actor_age)
            if code is not None:
                self._actor_died(i, code)
        return False

    def _kill_if_hung(self, proc: Process, what: str, age_of) -> int | None:  # noqa: ANN001 - pid -> age
        """SIGKILLs ``proc`` if its heartbeat stalled; its exit code then (else None)."""
        pid = getattr(proc, "pid", None)
        if not isinstance(pid, int):
            return None  # a remote actor: the Ray gateway retires silent ones
        reason = self.heartbeats.hung(pid, age_of(pid))
        if reason is None:
            return None
        log.warning("%s (pid %d) is hung: %s; killing it", what, pid, reason)
        proc.kill()  # SIGKILL also ends a stopped (SIGSTOP) process
        return proc.wait(timeout=30)

    def _disk_full(self, what: str) -> RunAborted:
        return RunAborted(f"{what} stopped on a full disk (its message is above): the last checkpoint is intact; "
                            f"free space, then continue with --resume {self.run_dir}")

    def _restart_delay(self, what: str, code: int, budget: RestartBudget, field: str) -> float:
        """Spends one restart of ``budget``: its backoff, or RunAborted naming ``runtime.<field>`` when spent."""
        delay = budget.take()
        if delay is None:
            rt = self.cfg.runtime
            raise RunAborted(f"{what} exited with code {code}: {getattr(rt, field)} restarts within "
                             f"{rt.restart_window_s:g} s used up (runtime.{field}). Its log is above; continue "
                             f"with --resume {self.run_dir}")
        return delay

    def _learner_died(self, code: int) -> None:
        if code == CONFIG_ERROR:
            raise ConfigError("the learner cannot start: its message is above")
        if code == DISK_FULL:
            raise self._disk_full("the learner")
        self.learner = None
        delay = self._restart_delay("learner", code, self.learner_budget, "learner_restarts")
        log.warning("learner exited with code %d; restarting it in %.0f s (%s)", code, delay,
                    "from the latest checkpoint" if has_checkpoint(self.run_dir) else "fresh, replaying the spools")
        self.pending["learner"] = time.monotonic() + delay

    def _actor_died(self, index: int, code: int) -> None:
        if code == CONFIG_ERROR:
            raise ConfigError(f"actor {index} refused the run's config (its message is above)")
        if code == POLICY_FAILED:
            raise RunAborted(f"actor {index}'s base policy kept failing (its message is above); the run stopped with a "
                             f"checkpoint: fix the policy or its server, then continue with robot-rl train --resume "
                             f"{self.run_dir}")
        if code == DISK_FULL:
            raise self._disk_full(f"actor {index}")
        self.launcher.check_actor_death(index, code)
        self.actors[index] = None  # type: ignore[assignment]
        delay = self._restart_delay(f"actor {index}", code, self.actor_budget, "actor_restarts")
        self.incarnations[index] += 1
        log.warning("actor %d exited with code %d; starting a replacement in %.0f s", index, code, delay)
        self.pending[f"actor{index}"] = time.monotonic() + delay

    def _wait_actors(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.actors.values():
            if proc is None:
                continue
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.terminate()

    def _stop(self, proc: Process | None, timeout: float) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

    def shutdown(self) -> None:
        """Actors first (each flushes its last chunk to its spool), then the learner (takes them in, writes a final
        checkpoint); then the shared memory of the run."""
        # a second signal while stopping must not cut the final checkpoint short
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        try:
            for proc in self.actors.values():
                if proc is not None and proc.poll() is None:
                    proc.terminate()
            for proc in self.actors.values():
                self._stop(proc, 30)
            self._stop(self.learner, self.LEARNER_STOP_S)
            self.launcher.teardown()
            shm.unlink_shm(board_name(self.run_dir))
            if actor_dir(self.run_dir).is_dir():
                for path in actor_dir(self.run_dir).glob("*.json"):
                    shm.unlink_shm(json.loads(path.read_text())["ring"])
                    path.unlink()
        finally:
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)


def train(cfg: TrainConfig, resume_dir: str | Path | None = None) -> tuple[Path, dict[str, float]]:
    run_dir = prepare_run(cfg, resume_dir)
    resume = resume_dir is not None
    launcher: Launcher = LocalLauncher(run_dir)
    if cfg.runtime.transport == "ray":  # actors on other machines (or many): see transport/ray_launcher.py
        launcher = RayLauncher(cfg, run_dir)
    elif not cfg.runtime.processes:
        return run_dir, run_inprocess(cfg, run_dir, resume=resume)
    return run_dir, Supervisor(cfg, run_dir, launcher=launcher).run()
