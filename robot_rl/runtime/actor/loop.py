"""The actor's control loop: one control period at a time (:meth:`Actor.step`) at ``runtime.control_hz``.

It acts with the latest published policy (:mod:`.weights`), steps the env, and streams the transitions to the
learner (:mod:`.outbox`). It never waits for the learner, except that a sim actor pauses while the learner owes more
than ``runtime.update_lag_bound()`` env steps of updates, and a robot actor with
``runtime.catch_up_between_episodes`` waits after each episode's reset until the learner caught up (:mod:`.pace`).
"""

from __future__ import annotations

import copy
import gc
import os
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robot_rl.envs.contract import LABELS, drives_hardware
from robot_rl.envs.make import make_batched_env
from robot_rl.runtime.actor.acting import Acting, row
from robot_rl.runtime.actor.episodes import EpisodeNumbers
from robot_rl.runtime.actor.outbox import Outbox
from robot_rl.runtime.actor.pace import LearnerPace
from robot_rl.runtime.actor.view import ActorView
from robot_rl.runtime.actor.weights import PolicySwap
from robot_rl.runtime.transport import shm
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.agents import build_agent
from robot_rl.training.config import TrainConfig
from robot_rl.training.env_stages import training_stages
from robot_rl.training.seeds import Seeds
from robot_rl.utils.log import get_logger
from robot_rl.utils.process import set_realtime

log = get_logger(__name__)


def make_actor_env(cfg: TrainConfig, index: int = 0) -> Any:
    """Actor ``index``'s ``runtime.num_envs`` training envs (the env pipeline with the learned reward and the teleop
    device when they are set) as one batched env."""
    seeds = Seeds(cfg.seed)
    return make_batched_env(cfg.env, cfg.runtime.num_envs, lambda i: training_stages(cfg, seeds.teleop(index, i)))


class Actor:
    """One actor process's work; :meth:`step` is one control period, :meth:`run` loops until told to stop."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path, index: int = 0, incarnation: int = 0) -> None:
        cfg.validate()
        self.cfg, self.rt, self.run_dir = cfg, cfg.runtime, Path(run_dir)
        if cfg.runtime.processes:
            # Inference of one observation gains nothing from intra-op threads; spinning ones steal the learner's.
            torch.set_num_threads(1)
        self.index = index
        self.uid = f"actor{index}-{incarnation}-{os.getpid()}-{os.urandom(3).hex()}"  # never reused
        seeds = Seeds(cfg.seed)
        self.env = make_actor_env(cfg, index)
        self.spec = ObsSpec.from_space(self.env.single_observation_space)
        self.action_dim = action_dim_of(self.env.single_action_space)
        self.n = self.env.num_envs
        on_gpu = cfg.agent.device.startswith("cuda") and torch.cuda.is_available()
        # Two copies: one acts while the other loads new weights; each explores with its own seeded noise.
        device = None if on_gpu else "cpu"
        policy, standby = (build_agent(cfg, self.spec, self.action_dim, device=device,
                                       seed=seeds.actor_policy(index, incarnation, slot)) for slot in (0, 1))
        self.outbox = Outbox(self.run_dir, self.uid, self.spec, self.action_dim, self.rt)
        self.pace = LearnerPace(cfg, self.run_dir, self.uid)
        self.acting = Acting(cfg, self.env, cfg.warmup_steps(drives_hardware(self.env)),
                             np.random.default_rng(seeds.actor_warmup(index, incarnation)))
        if index == 0 and incarnation == 0 and self.acting.random_steps > 0:  # what the first minute is
            log.info("actor 0: %s actions for the first %d env steps (warm-up); the learner updates from env step %d",
                     cfg.runtime.warmup, self.acting.random_steps, cfg.learning_starts)
        self.episodes = EpisodeNumbers(index, self.n)
        self.steps = 0
        self._periods: deque[float] = deque(maxlen=2000)
        self._jitter: deque[float] = deque(maxlen=2000)
        self._timing = (0, 0, 0)  # jitter p99, period, inference (us), refreshed each second
        self._last_stats = 0.0
        self._paused_us = 0
        self._operator_stop = False  # the operator pressed stop: nothing more is stepped; the learner ends the run
        self._stop = threading.Event()
        self.outbox.register(index, self.n)
        self.obs = self.env.reset(seed=seeds.actor_env(index, incarnation))
        warm_obs = copy.deepcopy(self.obs)  # a batch the weights thread runs new policies on once
        if self.acting.executors:
            warm_obs.update(base_action=np.zeros((self.n, self.action_dim), np.float32),
                            chunk_index=np.zeros(self.n, np.int64))
        self.weights = PolicySwap(self.run_dir, policy, standby, warm_obs, self.acting.base, self.rt.actor_rt_priority,
                                  self.uid)
        self.view = ActorView(cfg.view, self.run_dir) if cfg.view.enabled and index == 0 else None
        self.weights.start()

    @property
    def policy(self) -> Any:
        """The policy acting now."""
        return self.weights.policy

    @property
    def version(self) -> int:
        """The acting policy's weights version (0: none yet)."""
        return self.weights.version

    @version.setter
    def version(self, value: int) -> None:  # a test or benchmark acting without a learner
        self.weights.version = value

    @property
    def random_actions(self) -> int:
        return self.acting.random_actions

    def should_stop(self) -> bool:
        return self.weights.stop_requested()

    # ---------------------------------------------------------------- control
    def step(self) -> bool:
        """One control period: act, step, collect. False when it could not act (no weights yet / paused)."""
        if self._operator_stop:
            return False
        self.weights.swap()
        learner, steps = self.pace.run_steps(self.weights.board, self.steps, self.outbox.not_taken())
        held = self.pace.update(learner, steps)
        if self.outbox.spool_full(holds=bool(self.rt.update_lag_bound())):
            self.pace.held = True  # held (and counted as paused) until a checkpoint trims the spool
            return False
        if held:
            # sim: let the learner catch up so the UTD stays what was configured; what it owes updates for must
            # reach it now (a partial chunk held back would leave both waiting for the flush timer)
            self.outbox.flush()
            return False
        if learner is not None and steps >= self.cfg.total_env_steps:
            self.outbox.flush()
            return False  # the run has all the data it asked for
        actions, version, base = self.acting.choose(self.obs, steps, self.weights.policy, self.weights.version)
        if version < 0:
            self.outbox.flush_if_due()
            return False
        b = self.env.step_batch(actions)
        if self.view is not None:
            self.view.show(actions, b, int(self.episodes.step[0]), {
                "env_steps": steps, "episodes": self.episodes.ended, "policy_version": version})
        self._collect(b, version, base)
        self.obs = b.obs
        self.steps += self.n - int(np.count_nonzero(b.paused))  # held (paused) steps are not env steps of the run
        if any(op is not None and op.stop for op in b.operator):
            log.info("actor %s: the operator pressed stop; ending the run", self.uid)
            self._operator_stop = True
            self.outbox.flush()  # in the ring before the stop request is reported (publish_stats, after this step)
        self.outbox.flush_if_due()
        return True

    def _collect(self, b: Any, version: int, base: Any) -> None:
        """Every env's transition of this period into the outbox."""
        builder, eps = self.outbox.builder, self.episodes
        for i in range(self.n):
            if b.paused[i]:  # the robot held still (pause key / device gone): nothing to learn from
                builder.break_stream(i)
            else:
                nxt = row(b.final_obs, i) if b.done[i] else row(b.obs, i)
                builder.add(i, row(self.obs, i), b.executed_action[i], float(b.reward[i]), bool(b.terminated[i]),
                            bool(b.truncated[i]), nxt, policy_version=version,
                            source="intervention" if b.intervened[i] else "online", episode_id=eps.episode_id(i),
                            step=int(eps.step[i]), success=bool(b.success[i]),
                            base_action=None if base is None else base.action[i],
                            chunk_index=-1 if base is None else int(base.index[i]),
                            label=LABELS.index(b.operator[i].label) if b.operator and b.operator[i] else 0)
                eps.stepped(i)
            if b.done[i]:
                self.acting.episode_ended(i)
                eps.end(i)
                self.pace.episode_ended()
            if builder.full:
                self.outbox.flush()

    def publish_stats(self) -> None:
        """Heartbeat and statistics on the ring's header (the learner logs them)."""
        now = time.perf_counter()
        if now - self._last_stats > 1.0:
            self._last_stats = now
            jitter = int(np.percentile(np.abs(self._jitter), 99) * 1e6) if self._jitter else 0
            period = int(np.mean(self._periods) * 1e6) if self._periods else 0
            infer = self.acting.inference
            self._timing = (jitter, period, int(np.mean(infer) * 1e6) if infer else 0)
        jitter, period, infer = self._timing
        out = self.outbox
        out.ring.report(shm.ActorStats(env_steps=self.steps, version=self.weights.version, jitter_p99_us=jitter,
                                       infer_us=infer, period_us=period, episodes=self.episodes.ended,
                                       next_seq=out.seq, paused_us=self._paused_us, sent=out.sent,
                                       spool_kb=out.spool_kb(), stop_requested=int(self._operator_stop),
                                       **self.acting.base_stats()))
        out.ring.beat()

    def run(self, max_seconds: float | None = None) -> None:
        """Loops at ``runtime.control_hz`` (0 = flat out) until the learner sets the stop flag."""
        period = 1.0 / self.rt.control_hz if self.rt.control_hz else 0.0
        gc.collect()
        gc.freeze()  # start-up objects (torch, MuJoCo, zarr) leave the GC's view: no long full collections later
        sys.setswitchinterval(0.001)  # the control loop gets the GIL back from the helper threads within 1 ms
        if self.rt.actor_rt_priority:
            set_realtime(self.rt.actor_rt_priority, "runtime.actor_rt_priority")
        start = time.perf_counter()
        scheduled = start
        last = None
        try:
            while not self.should_stop():
                if max_seconds is not None and time.perf_counter() - start > max_seconds:
                    break
                now = time.perf_counter()
                if period:
                    self._jitter.append(now - scheduled)
                if last is not None:
                    self._periods.append(now - last)
                last = now
                acted = self.step()
                self.publish_stats()
                if not acted and not period:
                    time.sleep(0.001)
                if period:
                    scheduled += period
                    if scheduled < time.perf_counter():  # overran: re-anchor instead of bursting to catch up
                        scheduled = time.perf_counter()
                    sleep_until(scheduled)
                if self.pace.held:  # the whole held period, paced (control_hz) or not
                    self._paused_us += int((time.perf_counter() - now) * 1e6)
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        self.outbox.close(self.publish_stats)
        self.weights.close()
        if self.view is not None:
            self.view.close()
        self.acting.close()
        self.env.close()


def sleep_until(deadline: float) -> None:
    """Sleeps to ~0.5 ms before ``deadline``, then spins: keeps control-period jitter well under 1 ms."""
    remaining = deadline - time.perf_counter()
    if remaining > 0.0015:
        time.sleep(remaining - 0.001)
    while time.perf_counter() < deadline:
        pass
