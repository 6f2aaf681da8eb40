"""The learner: takes in the actors' chunks, updates the agent at the configured update-to-data ratio, publishes
versioned weights, evaluates, checkpoints and logs. One pass of :meth:`Learner.step`::

    intake.take()          chunks of every actor -> replay (exactly once, in order; intake.py)
    learn()                one agent.update when the rate limiter says one is owed
    publisher.after_step() weights every N updates / T seconds; heartbeat and progress for the actors
    periodic()             log / evaluate / checkpoint when their env-step marks are crossed

Rate limiting: one ``agent.update`` call is due per env step past ``learning_starts``. A learner that is ahead
waits for data; one that falls behind never blocks a robot actor (the lag is logged as ``utd/owed_updates``),
while sim actors pause at ``runtime.update_lag_bound()`` owed steps (actor.py), also while this process starts.
Logged: the ratio over the whole run (``utd/actual``) and over the last ``runtime.utd_window`` env steps
(``utd/window``), and the policy lag in env steps (``actor/policy_lag_steps``: how much newer the data is than the
data the weights that acted on it were trained on).
Long evaluations and checkpoints keep the heartbeat going (:meth:`Publisher.keep_alive`), so no actor takes a
busy learner for a dead one.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.agents.base import Agent
from robot_rl.agents.registry import make_agent, uses_base
from robot_rl.datasets.record import ensure_demos
from robot_rl.envs.contract import drives_hardware
from robot_rl.envs.make import make_env
from robot_rl.policies.loader import load_policy
from robot_rl.policies.relabel import dataset_instructions, label_base_proposals
from robot_rl.replay.buffer import ReplayBuffer
from robot_rl.replay.store import add_dataset
from robot_rl.runtime.checkpoint import load_checkpoint, oldest_kept_counters, resume_point, save_checkpoint
from robot_rl.runtime.intake import Intake, LearnerCounters
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import board_name
from robot_rl.runtime.transport.spool import has_chunks, mark_checkpointed, trim
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.config import TrainConfig
from robot_rl.training.evaluation import evaluate, evaluation_agent
from robot_rl.training.run_logger import RunLogger
from robot_rl.training.seeds import Seeds
from robot_rl.utils.log import get_logger
from robot_rl.utils.state_io import atomic_write

log = get_logger(__name__)

SPOOL_CHECKPOINT_MIN_S = 5.0
"""Checkpoints for spool pressure (``runtime.spool_max_mb``) come at most this often."""


class Publisher:
    """The learner's side of the weight board: versioned weights, heartbeat and progress for the actors."""

    def __init__(self, run_dir: Path, agent: Agent, counters: LearnerCounters, cfg: TrainConfig) -> None:
        self.agent, self.counters, self.rt = agent, counters, cfg.runtime
        name, template = board_name(run_dir), agent.policy_state()
        try:
            self.board = shm.WeightBoard(name, template)  # a restarted learner keeps the board its actors hold
        except FileNotFoundError:
            self.board = shm.WeightBoard(name, template, create=True)
        # Versions only grow, also across restarts: actors ignore anything not newer than what they hold.
        counters.version = max(counters.version, self.board.version)
        self.published_at: dict[int, int] = {}
        """Policy version -> env steps taken in when it was published, for weights trained by at least one update
        (the policy lag in env steps)."""
        self._last_time, self._last_updates = 0.0, -1
        self._beat_lock = threading.Lock()
        self.beat()

    def publish(self) -> None:
        """Publishes the policy (what ``agent.policy_state`` returns) under the next version number."""
        self.counters.version += 1
        self.board.publish(self.agent.policy_state(), self.counters.version)
        if self.counters.updates:  # trained weights: the data they act on has a policy lag (the first have none)
            self.published_at[self.counters.version] = self.counters.env_steps
            self.published_at.pop(self.counters.version - 10_000, None)  # actors act on recent versions only
        self._last_time, self._last_updates = time.perf_counter(), self.counters.updates

    def after_step(self, updated: bool) -> None:
        if (self.counters.updates - self._last_updates >= self.rt.publish_every_updates
                or (updated and time.perf_counter() - self._last_time > self.rt.publish_every_seconds)):
            self.publish()
        self.beat()

    def beat(self) -> None:
        with self._beat_lock:
            self.board.beat(self.counters.updates, self.counters.env_steps)

    @contextmanager
    def keep_alive(self, period: float = 0.25) -> Iterator[None]:
        """Heartbeats from a thread while the body runs (an evaluation or a checkpoint longer than
        ``runtime.heartbeat_timeout`` must not look like a dead learner)."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(period):
                self.beat()
        thread = threading.Thread(target=beat, name="learner-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.beat()

    def stop_actors(self) -> None:
        self.board.request_stop()

    def close(self, unlink: bool = False) -> None:
        self.board.close(unlink=unlink)


class Learner:
    def __init__(self, cfg: TrainConfig, run_dir: str | Path, resume: bool = False) -> None:
        cfg.validate()
        self.cfg, self.rt, self.run_dir = cfg, cfg.runtime, Path(run_dir)
        seeds = Seeds(cfg.seed)
        self.eval_env = make_env(cfg.env)
        self.spec = ObsSpec.from_space(self.eval_env.observation_space)
        self.action_dim = action_dim_of(self.eval_env.action_space)
        agent_cfg = cfg.agent_config()
        self.agent = make_agent(agent_cfg, self.spec, self.action_dim, seed=seeds.agent())
        self.sampling = type(self.agent).sampling(agent_cfg)
        self.counters = LearnerCounters()
        start = resume_point(self.run_dir) if resume else None
        if resume and start is None:
            log.info("no checkpoint yet: the agent starts fresh; the actors' spools rebuild the replay")
        if start is not None:
            replay, saved = load_checkpoint(start, self.agent, cfg.replay, self.spec, self.action_dim)
            self.replay = replay or ReplayBuffer(self.spec, self.action_dim, cfg.replay, seed=seeds.replay())
            self.counters = LearnerCounters.from_json(saved)
        else:
            self.replay = ReplayBuffer(self.spec, self.action_dim, cfg.replay, seed=seeds.replay())
            added = []
            for entry in cfg.demos:
                path, before = str(self._demo_path(entry)), self.replay.partitions["demos"].size
                add_dataset(self.replay, path, "demos")
                added.append((path, np.arange(before, self.replay.partitions["demos"].size)))
            if added and uses_base(cfg.agent):
                self._label_demos(added)
        self.replay.with_base = bool(cfg.base_policy.path)
        self.replay.set_n_step(self.sampling.n_step, self.sampling.discount)
        self.replay.with_pixels = self.sampling.pixels
        self.publisher = Publisher(self.run_dir, self.agent, self.counters, cfg)
        self.intake = Intake(self.run_dir, self.spec, self.action_dim, self.replay, self.counters, self.rt.spool,
                             announce=self.publisher.beat, published_at=self.publisher.published_at)
        # (env steps, updates done by the time the next env step came in): the windowed update-to-data ratio
        self._trace: deque[tuple[int, int]] = deque([(self.counters.env_steps, self.counters.updates)])
        self._slow_warned = False
        self._policy_lag: float | None = None
        self.logger = RunLogger(self.run_dir)
        self._marks = {k: self.counters.env_steps // max(1, getattr(cfg, f"{k}_every") or 1)
                       for k in ("log", "eval", "checkpoint")}
        self._perf = (time.perf_counter(), self.counters.env_steps, self.counters.updates)
        self._started = self._perf[0]
        self.last_metrics: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        self._eval_agent: Any = None  # the agent, with the base policy when it acts on one (first evaluation)
        self.finished = False
        self._stop_signal = 0
        self._last_checkpoint = self._spool_checked = time.monotonic()
        self.publisher.publish()

    def _label_demos(self, added: list[tuple[str, np.ndarray]]) -> None:
        """The base policy's proposals on every demo step (what it would have done there; ``added``: each
        dataset's rows), for agents acting on a base (robot_rl.policies.relabel). Checkpoints keep the labels."""
        policy = load_policy(self.cfg.base_policy)
        try:
            labelled = sum(label_base_proposals(self.replay.partitions["demos"], policy, rows,
                                                dataset_instructions(path), self.cfg.execution.execute_steps)
                           for path, rows in added)
        finally:
            policy.close()
        log.info("labelled %d demo transitions with the base policy's proposals", labelled)

    def _demo_path(self, entry: str) -> Path:
        """A demo dataset path, or ``scripted:N``: N scripted-expert demos of this task, recorded on first use."""
        if not entry.startswith("scripted:"):
            return Path(entry)

        try:
            n = int(entry.split(":", 1)[1])
        except ValueError:
            raise ValueError(f"demos: {entry!r} is neither a path nor 'scripted:<number of episodes>'") from None
        return ensure_demos(self.cfg.env.id, n, seed=self.cfg.seed, env_kwargs=self.cfg.env.kwargs)

    # ----------------------------------------------------------------- learn
    def owed_updates(self) -> int:
        due = max(0, self.counters.env_steps - self.cfg.learning_starts)
        return due - self.counters.updates

    def _owes_too_much(self) -> bool:
        """Taking in more now would leave the learner more than the lag bound behind the data: a spool read back
        after a restart arrives all at once, and its updates come first, so every window's ratio holds. A robot's
        actor is never blocked (bound 0): what it sends is taken as it comes."""
        bound = self.rt.update_lag_bound()
        return bool(bound) and self.owed_updates() > bound and self.replay.can_sample(self.sampling.mix)

    def learn(self) -> bool:
        """One ``agent.update`` if the rate limiter says one is owed; whether it ran."""
        s = self.sampling
        if self.owed_updates() <= 0 or not self.replay.can_sample(s.mix):
            return False
        self.agent.prepare(self.replay)
        batch = self.replay.sample(s.batch_size, mix=s.mix, utd=s.utd, reuse_output=True)
        self.last_metrics = self.agent.update(batch)
        self.counters.updates += 1
        return True

    def request_stop(self, signum: int) -> None:
        """Stop at the end of the current step (a signal handler's call): what the actors sent is taken in and a
        final checkpoint written (:meth:`stop`); ``step`` then returns False."""
        self._stop_signal = self._stop_signal or signum

    @property
    def stop_signal(self) -> int:
        """The signal that stopped this learner (0: none)."""
        return self._stop_signal

    def stop(self) -> None:
        """Takes in every chunk available now and writes a checkpoint (a stop before the run is complete)."""
        while self.intake.take():
            pass
        if self.counters.env_steps:
            self.checkpoint()
        log.info("stopped: checkpoint at %d env steps, %d updates", self.counters.env_steps, self.counters.updates)

    def stop_by_operator(self, uid: str) -> None:
        """The operator pressed stop on actor ``uid``'s teleop device: the run ends here, like a complete one, but
        without a final evaluation (its result is the last evaluation); ``robot-rl train --resume`` continues it."""
        log.info("actor %s: the operator stopped the run", uid)
        self.stop()
        self.publisher.stop_actors()
        (self.run_dir / "final_eval.json").write_text(json.dumps(self.last_eval, indent=2))

    def step(self) -> bool:
        """Intake, at most one update, publishing and the periodic work; False once the run is complete or a stop
        was requested."""
        if self._stop_signal:
            self.stop()
            return False
        if (uid := self.intake.stop_requested()) is not None:
            self.stop_by_operator(uid)
            return False
        taken = self.intake.take(held=self._owes_too_much)
        updated = self.learn()
        self._trace_ratio()
        self.publisher.after_step(updated)
        self._periodic()
        if self.counters.env_steps >= self.cfg.total_env_steps and self.owed_updates() <= 0:
            self.finish()
            return False
        if not taken and not updated:
            time.sleep(0.0005)  # waiting for data
        return True

    def _trace_ratio(self) -> None:
        c, trace = self.counters, self._trace
        if trace[-1][0] == c.env_steps:
            trace[-1] = (c.env_steps, c.updates)
        else:
            trace.append((c.env_steps, c.updates))
        while len(trace) > 2 and trace[1][0] <= c.env_steps - self.rt.utd_window:
            trace.popleft()

    def windowed_utd(self) -> float:
        """The update-to-data ratio over the last ``runtime.utd_window`` env steps (at least that many: from the
        newest trace point that far back); NaN until ``learning_starts`` + the window."""
        (e0, u0), (e1, u1) = self._trace[0], self._trace[-1]
        if e0 < self.cfg.learning_starts or e1 - e0 < self.rt.utd_window:
            return float("nan")
        return (u1 - u0) * self.sampling.utd / (e1 - e0)

    def run(self) -> dict[str, float]:
        while self.step():
            pass
        return self.last_eval

    # -------------------------------------------------------------- periodic
    def _crossed(self, key: str, every: int) -> bool:
        if not every:
            return False
        mark = self.counters.env_steps // every
        if mark > self._marks[key]:
            self._marks[key] = mark
            return True
        return False

    def _periodic(self) -> None:
        cfg = self.cfg
        if self._crossed("log", cfg.log_every):
            self.log()
        if self._crossed("eval", cfg.eval_every):
            self.evaluate()
        since = time.monotonic() - self._last_checkpoint
        by_time = cfg.checkpoint_every_s and since > cfg.checkpoint_every_s
        if self._crossed("checkpoint", cfg.checkpoint_every) or (by_time and self.counters.env_steps) \
                or (since > SPOOL_CHECKPOINT_MIN_S and self._spool_pressure()):
            self.checkpoint()

    def _spool_pressure(self) -> bool:
        """An actor's spool is at 80 % of ``runtime.spool_max_mb`` (checked at most once a second): a checkpoint
        trims it before a sim actor has to wait."""
        now = time.monotonic()
        if now - self._spool_checked < 1.0 or not self.rt.spool:
            return False
        self._spool_checked = now
        return self.intake.spool_mb() >= 0.8 * self.rt.spool_max_mb

    def log(self) -> None:
        c, now = self.counters, time.perf_counter()
        t0, steps0, updates0 = self._perf
        dt = max(now - t0, 1e-9)
        utd = self.sampling.utd
        since = c.env_steps - self.cfg.learning_starts
        metrics = {f"train/{k}": v for k, v in self.last_metrics.items()}
        metrics.update({
            "perf/env_steps_per_s": (c.env_steps - steps0) / dt,
            "perf/updates_per_s": (c.updates - updates0) * utd / dt,
            "utd/target": float(utd),
            "utd/actual": c.updates * utd / since if since > 0 else float("nan"),
            "utd/window": self.windowed_utd(),
            "utd/owed_updates": float(self.owed_updates()),
            "replay/size": float(len(self.replay)),
        })
        if c.labelled_success or c.labelled_failure:  # a person (or the scripted human) labels episodes
            metrics.update({"train/labelled_successes": float(c.labelled_success),
                            "train/labelled_failures": float(c.labelled_failure)})
        metrics.update(self.intake.episodes.take_window())
        metrics.update(self.intake.actor_metrics())
        self._warn_if_slow(metrics)
        self._perf = (now, c.env_steps, c.updates)
        self.logger.log(metrics, c.env_steps)
        self._write_status(metrics)

    def _warn_if_slow(self, metrics: dict[str, float]) -> None:
        """A never-blocked actor (a robot, ``max_update_lag`` 0) that outruns the learner: said once, with the
        update rate and the ratio it holds."""
        target, window = metrics["utd/target"], metrics["utd/window"]
        if (self._slow_warned or self.rt.update_lag_bound() or self.rt.catch_up_between_episodes
                or not window < 0.75 * target):
            return
        self._slow_warned = True
        steps_per_s = metrics["perf/env_steps_per_s"]
        holds = metrics["perf/updates_per_s"] / steps_per_s if steps_per_s > 0 else float("nan")
        log.warning("the learner cannot hold the update-to-data ratio %.2g in real time: %.0f gradient steps/s "
                    "against %.1f env steps/s holds about %.2g (%.2g over the last %d env steps); the actor is never "
                    "blocked (max_update_lag 0), so the updates owed grow. Lower agent.utd or the control rate, or "
                    "give the learner a faster machine", target, metrics["perf/updates_per_s"], steps_per_s, holds,
                    window, self.rt.utd_window)

    def _write_status(self, metrics: dict[str, float] | None = None) -> None:
        """``status.json``: a small summary the supervisor's progress line reads."""
        c = self.counters
        status = {"env_steps": c.env_steps, "updates": c.updates, "version": c.version,
                  "replay_size": len(self.replay), "replay_mb": self.replay.filled_bytes() / 2**20,
                  "episodes": c.episodes, "labelled_success": c.labelled_success,
                  "labelled_failure": c.labelled_failure}
        if metrics:
            status["utd_actual"] = metrics["utd/actual"]
            status["utd_window"] = metrics["utd/window"]
            self._policy_lag = metrics.get("actor/policy_lag_steps", self._policy_lag)  # the newest measured
        if self._policy_lag is not None:
            status["policy_lag_steps"] = self._policy_lag
        if self.last_eval:
            status["eval_return"] = self.last_eval["return_mean"]
            status["eval_success"] = self.last_eval["success_rate"]
        atomic_write(self.run_dir / "status.json", lambda f: f.write_text(json.dumps(status)))

    def evaluate(self) -> dict[str, float]:
        if drives_hardware(self.eval_env):
            return self.last_eval  # a robot is driven by its actor only; evaluate it with `robot-rl eval RUN_DIR`
        with self.publisher.keep_alive():
            if self._eval_agent is None:
                self._eval_agent = evaluation_agent(self.cfg, self.agent, self.eval_env)
            self.last_eval = evaluate(self._eval_agent, self.eval_env, self.cfg.eval_episodes,
                                      seed=Seeds(self.cfg.seed).evaluation())
        row = {f"eval/{k}": v for k, v in self.last_eval.items()}
        row["eval/updates"] = self.counters.updates
        row["eval/learner_wall_s"] = time.perf_counter() - self._started  # since this learner process started
        self.logger.log(row, self.counters.env_steps)
        self.logger.plot()
        self._write_status()
        return self.last_eval

    def checkpoint(self) -> Path:
        self._last_checkpoint = time.monotonic()
        with self.publisher.keep_alive():
            path = save_checkpoint(self.run_dir, self.agent, self.replay, self.counters.to_json(),
                                   keep=self.cfg.checkpoint_keep, keep_policies=self.cfg.keep_policies)
        if not self.rt.spool:
            return path
        for uid, nxt in self.counters.ingested.items():  # held by this checkpoint: the spools' bound skips it
            mark_checkpointed(self.run_dir / "spool" / uid, int(nxt) - 1)
        oldest = oldest_kept_counters(self.run_dir)
        for uid, nxt in (oldest or {}).get("ingested", {}).items():  # held by every kept checkpoint: not needed
            directory = self.run_dir / "spool" / uid
            trim(directory, int(nxt) - 1)
            if uid in self.intake.retired and not has_chunks(directory):
                shutil.rmtree(directory, ignore_errors=True)
        return path

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        if not self.last_eval or not self.cfg.eval_every or self.counters.env_steps % self.cfg.eval_every:
            self.evaluate()
        self.log()
        self.checkpoint()
        self.publisher.publish()
        self.publisher.stop_actors()
        (self.run_dir / "final_eval.json").write_text(json.dumps(self.last_eval, indent=2))
        log.info("run complete: %d env steps, %d updates", self.counters.env_steps, self.counters.updates)

    def close(self, unlink: bool = False) -> None:
        try:
            self.logger.close()
        except OSError as exc:  # its last writes failed (a full disk): the rest must still be released
            log.warning("closing the run's logs: %s", exc)
        self.intake.close(unlink=unlink)
        self.publisher.close(unlink=unlink)
        self.eval_env.close()
