"""The actor: steps one env or a batched sim at a fixed rate, acts with the latest published policy and streams
transitions to the learner in chunks. It never waits for the learner, except that a sim actor pauses while the
learner owes more than ``runtime.update_lag_bound()`` env steps of updates (``max_update_lag``: the update-to-data
ratio then holds from the first update on), and a robot actor with ``runtime.catch_up_between_episodes`` waits
after each episode's reset until the learner caught up.

New weights are copied from the weight board and loaded into a standby policy on a background thread; the
control loop only swaps two references between steps. Every chunk goes to the shared-memory ring and, when
``runtime.spool`` is on, to the spool (write-ahead log), so nothing is lost while the learner is down.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import os
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robot_rl.agents.registry import capabilities, make_agent
from robot_rl.envs.contract import LABELS, BatchStep, drives_hardware
from robot_rl.policies.evaluate import state_predictor
from robot_rl.policies.executor import ChunkExecutor
from robot_rl.policies.loader import load_policy
from robot_rl.replay.rows import BlockBuilder, row_specs
from robot_rl.runtime.env_pipeline import make_batched_env
from robot_rl.runtime.progress import run_progress
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, board_name, ring_name
from robot_rl.runtime.transport.spool import SpoolWriter
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.config import TrainConfig
from robot_rl.training.seeds import Seeds
from robot_rl.utils.log import get_logger
from robot_rl.utils.process import set_realtime
from robot_rl.utils.state_io import atomic_write
from robot_rl.view.live import OperatorView, ViewFrame, copy_cameras

log = get_logger(__name__)


def row(tree: Any, i: int) -> Any:
    """Env ``i``'s observation out of a batched observation tree."""
    if isinstance(tree, dict):
        return {k: row(v, i) for k, v in tree.items()}
    return tree[i]


def make_actor_env(cfg: TrainConfig, index: int = 0) -> Any:
    """Actor ``index``'s ``runtime.num_envs`` training envs (the env pipeline with the learned reward and the teleop
    device when they are set) as one batched env."""
    seeds = Seeds(cfg.seed)
    return make_batched_env(cfg.env, cfg.runtime.num_envs, reward=cfg.reward if cfg.reward.path else None,
                            teleop=cfg.teleop, teleop_seeds=[seeds.teleop(index, i)
                                                             for i in range(cfg.runtime.num_envs)])


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
        agent_cfg = cfg.agent_config() if on_gpu else dataclasses.replace(cfg.agent_config(), device="cpu")
        # Two copies: one acts while the other loads new weights; each explores with its own seeded noise.
        self.policy, self._standby = (make_agent(agent_cfg, self.spec, self.action_dim,
                                                 seed=seeds.actor_policy(index, incarnation, slot)) for slot in (0, 1))
        self._caps = capabilities(type(self.policy))
        self.version = 0
        self._standby_version = 0
        self._lock = threading.Lock()
        self.builder = BlockBuilder(self.spec, self.action_dim, self.rt.chunk_steps)
        self.ring = shm.ChunkRing(ring_name(self.run_dir, self.uid), row_specs(self.spec, self.action_dim),
                                  self.rt.ring_slots, self.builder.capacity, create=True)
        self.spool = SpoolWriter(self.run_dir / "spool" / self.uid) if self.rt.spool else None
        self.board: shm.WeightBoard | None = None
        self.seq = 0
        self.steps = 0
        # the run's steps and updates before this actor (its folder: checkpoint + spools), while no learner is up
        self._before = run_progress(self.run_dir)
        self.random_steps = cfg.warmup_steps(drives_hardware(self.env))
        self.random_actions = 0  # uniformly random actions taken by this actor (warm-up)
        self._added = 0  # transitions sent so far
        self._sent_steps: dict[int, int] = {}  # chunk seq -> transitions sent up to and including it
        self.episodes = 0
        self.rng = np.random.default_rng(seeds.actor_warmup(index, incarnation))
        # episode ids unique across this actor's lives, a resumed run's included (one replay holds them all):
        # 22 random bits, the actor's index, then the episode count of this life
        self._episode_base = (int.from_bytes(os.urandom(3), "little") & 0x3FFFFF) << 41 | (index & 0x1FF) << 32
        self._ep_ids = np.arange(self.n, dtype=np.int64)
        self._next_ep = self.n
        self._ep_step = np.zeros(self.n, np.int64)
        self._periods: deque[float] = deque(maxlen=2000)
        self._jitter: deque[float] = deque(maxlen=2000)
        self._infer: deque[float] = deque(maxlen=2000)
        self._timing = (0, 0, 0)  # jitter p99, period, inference (us), refreshed each second
        self._last_flush = time.perf_counter()
        self._last_stats = 0.0
        self._learner_silent = False
        self._paused_us = 0
        self._rate_limited = False  # the last step() held for the learner (max_update_lag)
        # an episode ended (catch_up_between_episodes), or a never-blocked actor resumes a run: hold, robot at rest
        # after its reset, until the learner caught up (the update-to-data ratio holds from the first window)
        self._catching_up = self._before.env_steps > 0 and not self.rt.update_lag_bound()
        self._operator_stop = False  # the operator pressed stop: nothing more is stepped; the learner ends the run
        self._spool_warned = -float("inf")  # when a never-blocked actor last warned of a spool past its bound
        self._stop = threading.Event()
        self._register()
        self.base, self.executors = self._make_executors()
        self.obs = self.env.reset(seed=seeds.actor_env(index, incarnation))
        self._warm_obs = copy.deepcopy(self.obs)  # a batch the weights thread runs new policies on once
        if self.executors:
            self._warm_obs.update(base_action=np.zeros((self.n, self.action_dim), np.float32),
                                  chunk_index=np.zeros(self.n, np.int64))
        self.view = self._make_view()
        self._thread = threading.Thread(target=self._weights_loop, name="weights", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- set-up
    def _make_executors(self) -> tuple[Any, list[Any]]:
        """The base policy (``base_policy.path``) and one chunk executor per env, or (None, [])."""
        if not self.cfg.base_policy.path:
            return None, []

        base = load_policy(self.cfg.base_policy)
        period = 1.0 / self.rt.control_hz if self.rt.control_hz else None
        future = self.cfg.execution.mode == "future"
        return base, [ChunkExecutor(base, self.cfg.execution, period, state_predictor(env) if future else None)
                      for env in self.env.envs]

    def _make_view(self) -> OperatorView | None:
        """The operator view of env 0 of actor 0 (``view.enabled``): recordings in ``<run>/view``."""
        if not self.cfg.view.enabled or self.index != 0:
            return None
        folder = Path(self.cfg.view.save_dir) if self.cfg.view.save_dir else self.run_dir / "view"
        view = OperatorView(self.cfg.view, "robot_rl train", folder)
        view.begin_episode(f"episode_{self.episodes:05d}")
        self._view_began = time.monotonic()
        return view

    def _show(self, actions: np.ndarray, b: BatchStep, version: int, steps: int) -> None:
        """Env 0's control period to the operator view (copies only: the view logs on its own thread)."""
        view, op, done = self.view, b.operator[0] if b.operator else None, bool(b.done[0])
        now = time.monotonic()
        control = op.control if op is not None else ("held" if b.paused[0] else "policy")
        view.frame(ViewFrame(
            control=control, episode_s=now - self._view_began, step=-1 if b.paused[0] else int(self._ep_step[0]),
            cameras=copy_cameras(b.final_obs if done else b.obs, 0), policy_action=np.array(actions[0]),
            person_action=None if op is None else op.action, reward=float(b.reward[0]), success=bool(b.success[0]),
            seconds_left=None if op is None else op.seconds_left,
            progress={"env_steps": steps, "episodes": self.episodes, "policy_version": version}))
        if done:
            outcome = "success" if b.success[0] else ("truncated" if b.truncated[0] else "failure")
            by = " (labelled by the operator)" if op is not None and op.label else ""
            view.end_episode(f"episode {self.episodes} ended: {outcome}{by}")
            view.begin_episode(f"episode_{self.episodes + 1:05d}")
            self._view_began = now

    def _register(self) -> None:
        path = actor_dir(self.run_dir) / f"{self.uid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        info = {"uid": self.uid, "index": self.index, "pid": os.getpid(), "ring": self.ring.name,
                "num_envs": self.n, "spool": self.spool is not None}
        atomic_write(path, lambda f: f.write_text(json.dumps(info)))

    def _attach_board(self) -> shm.WeightBoard | None:
        if self.board is None:
            try:
                self.board = shm.WeightBoard(board_name(self.run_dir), self.policy.policy_state())
            except FileNotFoundError:
                return None
        return self.board

    def _weights_loop(self) -> None:
        """Background: copy a newer published policy into the standby agent (the control loop swaps)."""
        reported = False
        if self.rt.actor_rt_priority:  # just below the control loop: fresh weights load without a scheduler stall
            set_realtime(max(1, self.rt.actor_rt_priority - 1), "runtime.actor_rt_priority")
        while not self._stop.is_set():
            try:
                self._poll_weights()
            except Exception as exc:  # noqa: BLE001 - keep the control loop's weight source alive; retry
                if not reported:
                    log.warning("actor %s: weights: %s; retrying", self.uid, exc)
                    reported = True
                self._stop.wait(0.5)
            self._stop.wait(0.005)

    def _poll_weights(self) -> None:
        board = self._attach_board()
        if board is not None and board.version > max(self.version, self._standby_version):
            got = board.read()
            if got is not None:
                with self._lock:
                    self._standby.load_policy_state(got[1])
                    if self.base is not None and self._caps.trains_base:
                        self.base.load_weights(self._standby.base_weights())  # the learner fine-tunes the base
                    self._standby.act(self._warm_obs, deterministic=True)  # first-call costs here (no RNG draw)
                    self._standby_version = got[0]

    def _swap_policy(self) -> None:
        if self._standby_version > self.version and self._lock.acquire(blocking=False):
            try:
                self.policy, self._standby = self._standby, self.policy
                if self._caps.keeps_acting_state:  # the control loop's memory (ibrl's held choices) stays
                    # with the acting copy; the standby keeps its own, which warming new weights up overwrites
                    self.policy.acting_state, self._standby.acting_state = (self._standby.acting_state,
                                                                            self.policy.acting_state)
                self.version, self._standby_version = self._standby_version, self.version
            finally:
                self._lock.release()

    # ---------------------------------------------------------------- control
    def _learner(self) -> tuple[shm.LearnerStatus | None, int]:
        """The learner's status and this run's env steps: the learner's count plus what this actor sent that the
        learner has not taken in yet. The ring's taken mark is read first: the learner counts a chunk before it
        marks it taken, so the sum never undercounts."""
        taken = self.ring.taken_seq
        learner = self.board.status() if self.board is not None else None
        for seq in [q for q in self._sent_steps if q < taken - 1]:
            del self._sent_steps[seq]
        # the run's folder counts what a learner not up yet (or not yet through the spools) does not
        on_disk = self._before.env_steps + self.steps
        if learner is None:
            return None, on_disk
        return learner, max(on_disk, learner.env_steps + self.steps - self._sent_steps.get(taken - 1, 0))

    def _owed_updates(self, learner: shm.LearnerStatus | None, steps: int) -> int:
        """Updates the learner owes: one per env step past learning_starts. No learner yet = the updates of the
        run's latest checkpoint, so a sim actor that starts before its learner stops at the same bound as one beside
        a slow learner, on a resumed run too."""
        due = max(0, steps - self.cfg.learning_starts)
        return due - (learner.updates if learner is not None else self._before.updates)

    def _check_learner(self, learner: shm.LearnerStatus | None) -> None:
        silent = learner is not None and learner.beat_ns > 0 and learner.beat_age_s > self.rt.heartbeat_timeout
        if silent and not self._learner_silent:
            log.warning("actor %s: no learner heartbeat for %.0f s", self.uid, learner.beat_age_s)
        self._learner_silent = silent

    def should_stop(self) -> bool:
        return self.board is not None and self.board.status().stop

    def _base_steps(self) -> BaseSteps | None:
        """Every env's base-policy step (its executor advances one control step), or None without a base."""
        if not self.executors:
            return None
        steps = [ex.step(row(self.obs, i), self.env.instructions[i]) for i, ex in enumerate(self.executors)]
        return BaseSteps(np.stack([s.action for s in steps]), np.array([s.chunk_index for s in steps], np.int64))

    def _actions(self, steps: int) -> tuple[np.ndarray, int, BaseSteps | None]:
        warmup = steps < self.random_steps
        if warmup or self.version == 0:
            if not warmup:  # past warm-up without weights: wait for the learner rather than act randomly
                return np.empty(0), -1, None
            base = self._base_steps()
            if base is not None:  # warm-up with a base policy: its rollouts, not random motion
                return self._warmup_with_base(base.action), 0, base
            if self.rt.warmup == "scripted":
                return self.env.expert_actions(0.1), 0, None
            self.random_actions += self.n
            return self.rng.uniform(-1, 1, (self.n, self.action_dim)).astype(np.float32), 0, None
        base = self._base_steps()
        obs = self.obs if base is None else {**self.obs, "base_action": base.action, "chunk_index": base.index}
        t0 = time.perf_counter()
        actions = self.policy.act(obs)
        self._infer.append(time.perf_counter() - t0)
        return actions.astype(np.float32, copy=False), self.version, base

    def _warmup_with_base(self, proposals: np.ndarray) -> np.ndarray:
        """The base's proposals, each env's replaced by a uniform random action with probability
        warmup_random_share."""
        share = self.cfg.warmup_random_share
        if share <= 0.0:
            return proposals
        swap = self.rng.random(self.n) < share
        random = self.rng.uniform(-1, 1, (self.n, self.action_dim)).astype(np.float32)
        return np.where(swap[:, None], random, proposals).astype(np.float32, copy=False)

    def step(self) -> bool:
        """One control period: act, step, collect. False when it could not act (no weights yet / paused)."""
        if self._operator_stop:
            return False
        self._swap_policy()
        learner, steps = self._learner()
        self._check_learner(learner)
        bound = self.rt.update_lag_bound()
        owed = self._owed_updates(learner, steps)
        self._rate_limited = bool(bound) and owed > bound
        if self._catching_up:
            self._catching_up = owed > self.rt.derived_lag_bound()
            self._rate_limited |= self._catching_up
        if self._spool_full(bound):
            self._rate_limited = True  # held (and counted as paused) until a checkpoint trims the spool
            return False
        if self._rate_limited:
            # sim: let the learner catch up so the UTD stays what was configured; what it owes updates for must
            # reach it now (a partial chunk held back would leave both waiting for the flush timer)
            self._flush()
            return False
        if learner is not None and steps >= self.cfg.total_env_steps:
            self._flush()
            return False  # the run has all the data it asked for
        actions, version, base = self._actions(steps)
        if version < 0:
            self._flush_if_due()
            return False
        b = self.env.step_batch(actions)
        done = b.done
        if self.view is not None:
            self._show(actions, b, version, steps)
        for i in range(self.n):
            if b.paused[i]:  # the robot held still (pause key / device gone): nothing to learn from
                self.builder.break_stream(i)
            else:
                nxt = row(b.final_obs, i) if done[i] else row(b.obs, i)
                self.builder.add(i, row(self.obs, i), b.executed_action[i], float(b.reward[i]),
                                 bool(b.terminated[i]), bool(b.truncated[i]), nxt, policy_version=version,
                                 source="intervention" if b.intervened[i] else "online",
                                 episode_id=self._episode_base + int(self._ep_ids[i]), step=int(self._ep_step[i]),
                                 success=bool(b.success[i]), base_action=None if base is None else base.action[i],
                                 chunk_index=-1 if base is None else int(base.index[i]),
                                 label=LABELS.index(b.operator[i].label) if b.operator and b.operator[i] else 0)
                self._ep_step[i] += 1  # a held period is not a step of the episode (envs/held.py)
            if done[i]:
                if self.executors:
                    self.executors[i].reset()
                self._ep_ids[i], self._ep_step[i] = self._next_ep, 0
                self._next_ep += 1
                self.episodes += 1
                self._catching_up = self.rt.catch_up_between_episodes
            if self.builder.full:
                self._flush()
        self.obs = b.obs
        self.steps += self.n - int(np.count_nonzero(b.paused))  # held (paused) steps are not env steps of the run
        if any(op is not None and op.stop for op in b.operator):
            log.info("actor %s: the operator pressed stop; ending the run", self.uid)
            self._operator_stop = True
            self._flush()  # in the ring before the stop request is reported (publish_stats, after this step)
        self._flush_if_due()
        return True

    def _spool_full(self, bound: int) -> bool:
        """At ``runtime.spool_max_mb``: a sim actor (``bound`` > 0) holds; a never-blocked one warns once a minute
        and goes on (its chunks are still spooled: a dropped chunk would be lost data)."""
        if self.spool is None or self.spool.nbytes <= self.rt.spool_max_mb * 2**20:
            return False
        if bound:
            return True
        now = time.monotonic()
        if now - self._spool_warned > 60.0:
            self._spool_warned = now
            log.warning("actor %s: its spool holds %.0f MB, past runtime.spool_max_mb %.0f: no checkpoint has "
                        "trimmed it (is the learner down?); still spooling until the disk is full", self.uid,
                        self.spool.nbytes / 2**20, self.rt.spool_max_mb)
        return False

    def _flush_if_due(self) -> None:
        if time.perf_counter() - self._last_flush > self.rt.flush_seconds:
            self._flush()

    def _flush(self) -> None:
        self._last_flush = time.perf_counter()
        if len(self.builder) == 0:
            return
        chunk = self.builder.take()
        if self.spool is not None:
            self.spool.write(self.seq, chunk)  # before the ring: a chunk the learner reads is always spooled
        self.ring.put(chunk, self.seq)
        self._added += int(np.count_nonzero(chunk["valid"]))
        self._sent_steps[self.seq] = self._added
        self.seq += 1

    def publish_stats(self) -> None:
        """Heartbeat and statistics on the ring's header (the learner logs them)."""
        now = time.perf_counter()
        if now - self._last_stats > 1.0:
            self._last_stats = now
            jitter = int(np.percentile(np.abs(self._jitter), 99) * 1e6) if self._jitter else 0
            period = int(np.mean(self._periods) * 1e6) if self._periods else 0
            infer = int(np.mean(self._infer) * 1e6) if self._infer else 0
            self._timing = (jitter, period, infer)
        jitter, period, infer = self._timing
        base = {}
        if self.executors:
            lat = [x for ex in self.executors for x in list(ex.latencies)]
            base = {"base_missed": sum(ex.missed_steps for ex in self.executors),
                    "base_late": sum(ex.late_chunks for ex in self.executors),
                    "base_infer_us": int(np.median(lat) * 1e6) if lat else 0}
        self.ring.report(shm.ActorStats(env_steps=self.steps, version=self.version, jitter_p99_us=jitter,
                                        infer_us=infer, period_us=period, episodes=self.episodes,
                                        next_seq=self.seq, paused_us=self._paused_us, sent=self._added,
                                        spool_kb=self.spool.nbytes // 1024 if self.spool else 0,
                                        stop_requested=int(self._operator_stop), **base))
        self.ring.beat()

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
                if self._rate_limited:  # the whole held period, paced (control_hz) or not
                    self._paused_us += int((time.perf_counter() - now) * 1e6)
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        self._flush()
        if self.spool is not None:
            self.spool.flush()
            self.spool.close()
        if self.ring.header is not None:
            self.publish_stats()
            self.ring.mark_closed()
        self._thread.join(timeout=5)
        if self.view is not None:
            self.view.close()
        for ex in self.executors:
            ex.close()
        if self.base is not None:
            self.base.close()
        self.env.close()


@dataclass(frozen=True)
class BaseSteps:
    """One control step of the base policy in every env: what runs (``action [N, A]``) and its index in its chunk
    (``index [N]``, -1 where the robot held because the next chunk was late)."""

    action: np.ndarray
    index: np.ndarray


def sleep_until(deadline: float) -> None:
    """Sleeps to ~0.5 ms before ``deadline``, then spins: keeps control-period jitter well under 1 ms."""
    remaining = deadline - time.perf_counter()
    if remaining > 0.0015:
        time.sleep(remaining - 0.001)
    while time.perf_counter() < deadline:
        pass
