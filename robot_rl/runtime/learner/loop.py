"""The learner: takes in the actors' chunks, updates the agent at the configured update-to-data ratio, publishes
versioned weights, evaluates, checkpoints and logs. One pass of :meth:`Learner.step`::

    intake.take()          chunks of every actor -> replay (exactly once, in order; intake.py)
    learn()                one agent.update when the rate limiter says one is owed (rate.py)
    publisher.after_step() weights every N updates / T seconds; heartbeat and progress for the actors
    periodic work          log / evaluate / checkpoint when their marks are crossed (schedule.py, report.py)

Rate limiting: one ``agent.update`` call is due per env step past ``learning_starts``. A learner that is ahead
waits for data; one that falls behind never blocks a robot actor (the lag is logged as ``utd/owed_updates``),
while sim actors pause at ``runtime.update_lag_bound()`` owed steps (the actor's pace), also while this process
starts. Long evaluations and checkpoints keep the heartbeat going (:meth:`Publisher.keep_alive`), so no actor
takes a busy learner for a dead one.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from robot_rl.envs.contract import drives_hardware
from robot_rl.envs.make import make_env
from robot_rl.runtime.checkpoint import (
    best_evaluation,
    evaluation_score,
    load_agent_from,
    oldest_kept_counters,
    resume_point,
    save_best_policy,
    save_checkpoint,
)
from robot_rl.runtime.learner.intake import Intake
from robot_rl.runtime.learner.publisher import Publisher
from robot_rl.runtime.learner.rate import UpdateRate
from robot_rl.runtime.learner.replay_setup import learner_replay
from robot_rl.runtime.learner.report import Report
from robot_rl.runtime.learner.schedule import Schedule
from robot_rl.runtime.transport.spool import has_chunks, mark_checkpointed, trim
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.agents import build_agent
from robot_rl.training.config import TrainConfig
from robot_rl.training.evaluation import evaluate, evaluation_agent
from robot_rl.training.seeds import Seeds
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


class Learner:
    """One learner process's work; :meth:`step` is one pass, :meth:`run` loops until the run is complete."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path, resume: bool = False) -> None:
        cfg.validate()
        self.cfg, self.rt, self.run_dir = cfg, cfg.runtime, Path(run_dir)
        seeds = Seeds(cfg.seed)
        self.eval_env = make_env(cfg.env)
        self.spec = ObsSpec.from_space(self.eval_env.observation_space)
        self.action_dim = action_dim_of(self.eval_env.action_space)
        agent_cfg = cfg.agent_config()
        self.agent = build_agent(cfg, self.spec, self.action_dim, seed=seeds.agent())
        self.sampling = type(self.agent).sampling(agent_cfg)
        start = resume_point(self.run_dir) if resume else None
        if resume and start is None:
            log.info("no checkpoint yet: the agent starts fresh; the actors' spools rebuild the replay")
        self.replay, self.counters = learner_replay(cfg, start, self.agent, self.spec, self.action_dim, seeds.replay())
        if cfg.init_from and start is None:  # a resume has its own checkpoint: the agent fine-tuned so far
            load_agent_from(cfg.init_from, self.agent)
        self.replay.with_base = bool(cfg.base_policy.path)
        self.replay.set_n_step(self.sampling.n_step, self.sampling.discount)
        self.replay.with_pixels = self.sampling.pixels
        self.publisher = Publisher(self.run_dir, self.agent, self.counters, cfg)
        self.intake = Intake(self.run_dir, self.spec, self.action_dim, self.replay, self.counters, self.rt.spool,
                             announce=self.publisher.beat, published_at=self.publisher.published_at)
        self.rate = UpdateRate(cfg, self.counters, self.sampling.utd)
        self.report = Report(cfg, self.run_dir, self.counters, self.rate, self.replay, self.intake)
        self.schedule = Schedule(cfg, self.counters.env_steps, self.intake.spool_mb)
        self._started, self._eval_seconds = time.perf_counter(), 0.0
        self.last_metrics: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        kept = best_evaluation(self.run_dir) if resume else None  # a resumed run's best stays until beaten
        self.best_score = evaluation_score(kept["evaluation"]) if kept else None
        self._eval_agent: Any = None  # the agent, with the base policy when it acts on one (first evaluation)
        self.finished = False
        self._stop_signal = 0
        self.publisher.publish()

    # ----------------------------------------------------------------- learn
    def owed_updates(self) -> int:
        return self.rate.owed()

    def windowed_utd(self) -> float:
        return self.rate.windowed()

    def _owes_too_much(self) -> bool:
        return self.rate.owes_too_much() and self.replay.can_sample(self.sampling.mix)

    def learn(self) -> bool:
        """One ``agent.update`` if the rate limiter says one is owed; whether it ran."""
        s = self.sampling
        if self.rate.owed() <= 0 or not self.replay.can_sample(s.mix):
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
        self.rate.trace()
        self.publisher.after_step(updated)
        for task in self.schedule.due(self.counters.env_steps):
            {"log": self.log, "eval": self.evaluate, "checkpoint": self.checkpoint}[task]()
        if self.counters.env_steps >= self.cfg.total_env_steps and self.rate.owed() <= 0:
            self.finish()
            return False
        if not taken and not updated:
            time.sleep(0.0005)  # waiting for data
        return True

    def run(self) -> dict[str, float]:
        while self.step():
            pass
        return self.last_eval

    # -------------------------------------------------------------- periodic
    def log(self) -> None:
        self.report.log(self.last_metrics, self.last_eval)

    def evaluate(self) -> dict[str, float]:
        if drives_hardware(self.eval_env):
            return self.last_eval  # a robot is driven by its actor only; evaluate it with `robot-rl eval RUN_DIR`
        t0 = time.perf_counter()
        with self.publisher.keep_alive():
            if self._eval_agent is None:
                self._eval_agent = evaluation_agent(self.cfg, self.agent, self.eval_env)
            self.last_eval = evaluate(self._eval_agent, self.eval_env, self.cfg.eval_episodes,
                                      seed=Seeds(self.cfg.seed).evaluation())
        self._eval_seconds += time.perf_counter() - t0
        score = evaluation_score(self.last_eval)
        if self.cfg.keep_best and (self.best_score is None or score >= self.best_score):
            save_best_policy(self.run_dir, self.agent, self.last_eval, self.counters.env_steps)
            self.best_score = score
        row = {f"eval/{k}": v for k, v in self.last_eval.items()}
        row["eval/updates"] = self.counters.updates
        row["eval/learner_wall_s"] = time.perf_counter() - self._started  # since this learner process started
        row["eval/learner_eval_s"] = self._eval_seconds  # of which evaluating (a robot's learner does not)
        self.report.logger.log(row, self.counters.env_steps)
        self.report.logger.plot()
        self.report.status(self.last_eval)
        return self.last_eval

    def checkpoint(self) -> Path:
        self.schedule.last_checkpoint = time.monotonic()
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
            self.report.close()
        except OSError as exc:  # its last writes failed (a full disk): the rest must still be released
            log.warning("closing the run's logs: %s", exc)
        self.intake.close(unlink=unlink)
        self.publisher.close(unlink=unlink)
        self.eval_env.close()
