"""What the learner reports: the metrics it logs (TensorBoard and ``metrics.jsonl`` through the run logger), the
``status.json`` the supervisor's progress line reads, and a warning when a never-blocked actor outruns it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from robot_rl.runtime.learner.counters import LearnerCounters
from robot_rl.runtime.learner.intake import Intake
from robot_rl.runtime.learner.rate import UpdateRate
from robot_rl.training.run_logger import RunLogger
from robot_rl.utils.log import get_logger
from robot_rl.utils.state_io import atomic_write

log = get_logger(__name__)


class Report:
    """The learner's logs and status."""

    def __init__(self, cfg: Any, run_dir: Path, counters: LearnerCounters, rate: UpdateRate, replay: Any,
                 intake: Intake) -> None:
        self.cfg, self.rt, self.run_dir = cfg, cfg.runtime, run_dir
        self.counters, self.rate, self.replay, self.intake = counters, rate, replay, intake
        self.logger = RunLogger(run_dir)
        self._perf = (time.perf_counter(), counters.env_steps, counters.updates)
        self._slow_warned = False
        self._policy_lag: float | None = None

    def log(self, train: dict[str, float], last_eval: dict[str, float]) -> None:
        """The window's metrics since the last call (``train``: the last update's)."""
        c, now = self.counters, time.perf_counter()
        t0, steps0, updates0 = self._perf
        dt = max(now - t0, 1e-9)
        utd = self.rate.utd
        since = c.env_steps - self.cfg.learning_starts
        metrics = {f"train/{k}": v for k, v in train.items()}
        metrics.update({
            "perf/env_steps_per_s": (c.env_steps - steps0) / dt,
            "perf/updates_per_s": (c.updates - updates0) * utd / dt,
            "utd/target": float(utd),
            "utd/actual": c.updates * utd / since if since > 0 else float("nan"),
            "utd/window": self.rate.windowed(),
            "utd/owed_updates": float(self.rate.owed()),
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
        self.status(last_eval, metrics)

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

    def status(self, last_eval: dict[str, float], metrics: dict[str, float] | None = None) -> None:
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
        if last_eval:
            status["eval_return"] = last_eval["return_mean"]
            status["eval_success"] = last_eval["success_rate"]
        atomic_write(self.run_dir / "status.json", lambda f: f.write_text(json.dumps(status)))

    def close(self) -> None:
        self.logger.close()
