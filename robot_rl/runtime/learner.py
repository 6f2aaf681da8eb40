"""The learner: owns the replay and the agent, takes in the actors' chunks, updates at the configured UTD,
publishes versioned weights, evaluates, checkpoints and logs.

Rate limiting: one ``agent.update`` call (``agent.utd`` critic steps) is due per env step past
``learning_starts``. A learner that is ahead waits for data; one that falls behind never blocks a robot actor
(the lag is logged as ``utd/owed_updates``), while sim actors pause at ``runtime.max_update_lag``.

Delivery is exactly-once per actor: chunks carry a per-actor sequence number, the learner takes them in order
from the actor's ring, fills gaps (ring overflow, learner restart) from the actor's spool, skips duplicates, and
records the next expected sequence per actor in every checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.agents.sac import SACAgent
from robot_rl.envs.make import make_env
from robot_rl.replay.buffer import ReplayBuffer
from robot_rl.runtime import shm
from robot_rl.runtime.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from robot_rl.runtime.chunks import check_chunk, chunk_specs, ingest_chunk
from robot_rl.runtime.config import TrainConfig
from robot_rl.runtime.evaluation import evaluate
from robot_rl.runtime.names import actor_dir, board_name
from robot_rl.runtime.run_logger import RunLogger
from robot_rl.runtime.spool import read_chunk, trim
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.utils.process import pid_alive
from robot_rl.utils.state_io import atomic_write

STREAMS_PER_ACTOR = 1 << 16



class Learner:
    def __init__(self, cfg: TrainConfig, run_dir: str | Path, resume: bool = False) -> None:
        cfg.validate()
        self.cfg, self.rt, self.run_dir = cfg, cfg.runtime, Path(run_dir)
        self.eval_env = make_env(cfg.env)
        self.spec = ObsSpec.from_space(self.eval_env.observation_space)
        self.action_dim = action_dim_of(self.eval_env.action_space)
        cfg.agent.seed, cfg.replay.seed = cfg.seed, cfg.seed
        self.agent = SACAgent(self.spec, self.action_dim, cfg.agent)
        self.specs = chunk_specs(self.spec, self.action_dim)
        self.counters: dict[str, Any] = {"env_steps": 0, "episodes": 0, "updates": 0, "version": 0,
                                         "ingested": {}, "streams": {}}
        self.replay: ReplayBuffer
        if resume:
            replay, counters = load_checkpoint(latest_checkpoint(self.run_dir), self.agent, cfg.replay, self.spec,
                                               self.action_dim)
            self.replay = replay or ReplayBuffer(self.spec, self.action_dim, cfg.replay)
            counters.pop("rng", None)
            self.counters.update(counters)
        else:
            self.replay = ReplayBuffer(self.spec, self.action_dim, cfg.replay)
            for entry in cfg.demos:
                self.replay.add_dataset(str(self._demo_path(entry)), "demos")
        self.logger = RunLogger(self.run_dir)
        self.board = self._open_board()
        # Versions only grow, also across restarts: actors ignore anything not newer than what they hold.
        self.counters["version"] = max(int(self.counters["version"]), self.board.version)
        self.rings: dict[str, shm.ChunkRing | None] = {}
        self.actor_info: dict[str, dict] = {}
        self.retired: set[str] = set()
        # stream -> [return, length, intervened steps, takeovers, last step intervened]
        self._episode = defaultdict(lambda: [0.0, 0, 0, 0, False])
        self._window: dict[str, list[float]] = defaultdict(list)
        self._last_scan = 0.0
        self._last_publish = 0.0
        self._updates_at_publish = -1
        self._marks = {k: self.counters["env_steps"] // max(1, getattr(cfg, f"{k}_every") or 1)
                       for k in ("log", "eval", "checkpoint")}
        self._perf = (time.perf_counter(), self.counters["env_steps"], self.counters["updates"])
        self._started = self._perf[0]
        self.last_metrics: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        self.finished = False
        self.publish()

    def _demo_path(self, entry: str) -> Path:
        """A demo dataset path, or ``scripted:N``: N scripted-expert demos of this task, recorded on first use."""
        if not entry.startswith("scripted:"):
            return Path(entry)
        from robot_rl.datasets.record import ensure_demos

        try:
            n = int(entry.split(":", 1)[1])
        except ValueError:
            raise ValueError(f"demos: {entry!r} is neither a path nor 'scripted:<number of episodes>'") from None
        return ensure_demos(self.cfg.env.id, n, seed=self.cfg.seed, env_kwargs=self.cfg.env.kwargs)

    # ---------------------------------------------------------------- weights
    def _open_board(self) -> shm.WeightBoard:
        name, template = board_name(self.run_dir), self.agent.policy_state()
        try:
            return shm.WeightBoard(name, template)  # a restarted learner keeps the board its actors hold
        except FileNotFoundError:
            return shm.WeightBoard(name, template, create=True)

    def publish(self) -> None:
        """Publishes the policy (actor + shared encoder) under the next version number."""
        self.counters["version"] += 1
        self.board.publish(self.agent.policy_state(), self.counters["version"])
        self._last_publish, self._updates_at_publish = time.perf_counter(), self.counters["updates"]

    def _heartbeat(self) -> None:
        h = self.board.header
        h[shm.W_LEARNER_BEAT] = time.time_ns()
        h[shm.W_LEARNER_PID] = os.getpid()
        h[shm.W_UPDATES] = self.counters["updates"]
        h[shm.W_ENV_STEPS] = self.counters["env_steps"]

    # ----------------------------------------------------------------- intake
    def _scan_actors(self) -> None:
        """Finds actors registered in the run folder and spools left by actors of an earlier life."""
        self._last_scan = time.perf_counter()
        uids = {p.stem: p for p in actor_dir(self.run_dir).glob("*.json")} if actor_dir(self.run_dir).is_dir() else {}
        spool_root = self.run_dir / "spool"
        spooled = {p.name for p in spool_root.iterdir() if p.is_dir()} if spool_root.is_dir() else set()
        for uid in (set(uids) | spooled) - set(self.rings) - self.retired:
            info = json.loads(uids[uid].read_text()) if uid in uids else {}
            ring = None
            if info:
                try:
                    ring = shm.ChunkRing(info["ring"], self.specs)
                except FileNotFoundError:
                    ring = None
            self.rings[uid], self.actor_info[uid] = ring, info
            streams = self.counters["streams"]
            if uid not in streams:
                streams[uid] = (len(streams) + 1) * STREAMS_PER_ACTOR

    def _take(self, uid: str, seq: int, chunk: dict[str, np.ndarray]) -> int:
        check_chunk(chunk, self.spec, self.action_dim)
        base = self.counters["streams"][uid]
        n = ingest_chunk(self.replay, chunk, base)
        self.counters["ingested"][uid] = seq + 1
        self.counters["env_steps"] += n
        valid = chunk["valid"]
        self._window["policy_lag"].extend(self.counters["version"] - chunk["policy_version"][valid])
        self._window["intervened"].extend(chunk["intervened"][valid].astype(float))
        for i in np.flatnonzero(valid):  # episode statistics for the logs
            ep = self._episode[base + int(chunk["stream"][i])]
            ep[0] += float(chunk["reward"][i])
            ep[1] += 1
            human = bool(chunk["intervened"][i])
            ep[2] += human
            ep[3] += human and not ep[4]
            ep[4] = human
            if chunk["terminated"][i] or chunk["truncated"][i]:
                self.counters["episodes"] += 1
                self._window["episode_return"].append(ep[0])
                self._window["episode_length"].append(ep[1])
                self._window["episode_success"].append(float(chunk["success"][i]))
                self._window["episode_interventions"].append(ep[3])
                self._window["episode_intervention_rate"].append(ep[2] / ep[1])
                ep[:] = [0.0, 0, 0, 0, False]
        return n

    def ingest(self) -> int:
        """Takes in every chunk available now, in sequence order per actor; returns transitions taken."""
        if time.perf_counter() - self._last_scan > 0.5:
            self._scan_actors()
        total = 0
        for uid, ring in list(self.rings.items()):
            nxt = int(self.counters["ingested"].get(uid, 0))
            while True:
                item = ring.peek() if ring is not None else None
                if item is not None and item[0] < nxt:  # already taken (from the spool)
                    ring.release()
                    continue
                if item is not None and item[0] == nxt:
                    total += self._take(uid, nxt, item[1])
                    ring.release()
                    nxt += 1
                    ring.header[shm.TAKEN_SEQ] = nxt
                    continue
                chunk = read_chunk(self.run_dir / "spool" / uid, nxt) if self.rt.spool else None
                if chunk is None:
                    if item is not None and not self.rt.spool:  # no spool: the gap is lost; say so and move on
                        self.counters.setdefault("lost_chunks", 0)
                        self.counters["lost_chunks"] += item[0] - nxt
                        nxt = item[0]
                        self.counters["ingested"][uid] = nxt
                        continue
                    break
                total += self._take(uid, nxt, chunk)
                nxt += 1
                if ring is not None:
                    ring.header[shm.TAKEN_SEQ] = nxt
            self._retire_if_gone(uid, ring)
        return total

    def _retire_if_gone(self, uid: str, ring: shm.ChunkRing | None) -> None:
        info = self.actor_info.get(uid, {})
        alive = ring is not None and not ring.header[shm.CLOSED] and pid_alive(int(info.get("pid", 0)))
        if alive or (ring is not None and ring.pending()):
            return
        if ring is not None:
            if not self.rt.spool or read_chunk(self.run_dir / "spool" / uid, self.counters["ingested"].get(uid, 0)):
                return  # its last chunks may still be arriving
            ring.close(unlink=True)
        (actor_dir(self.run_dir) / f"{uid}.json").unlink(missing_ok=True)
        self.rings.pop(uid)
        self.retired.add(uid)

    # ----------------------------------------------------------------- learn
    def owed_updates(self) -> int:
        due = max(0, self.counters["env_steps"] - self.cfg.learning_starts)
        return due - self.counters["updates"]

    def step(self) -> bool:
        """Ingest, then at most one update; returns False once the run is complete."""
        c, cfg = self.counters, self.cfg
        taken = self.ingest()
        updated = False
        if self.owed_updates() > 0 and len(self.replay) > 0:
            self._fit_normalizer_once()
            batch = self.replay.sample(cfg.agent.batch_size, utd=cfg.agent.utd, reuse_output=True)
            self.last_metrics = self.agent.update(batch)
            c["updates"] += 1
            updated = True
        if (c["updates"] - self._updates_at_publish >= self.rt.publish_every_updates
                or (updated and time.perf_counter() - self._last_publish > self.rt.publish_every_seconds)):
            self.publish()
        self._heartbeat()
        self._periodic()
        if c["env_steps"] >= cfg.total_env_steps and self.owed_updates() <= 0:
            self.finish()
            return False
        if not taken and not updated:
            time.sleep(0.0005)  # waiting for data
        return True

    def _fit_normalizer_once(self) -> None:
        """Before the first update: fit the agent's state standardisation on everything in the replay (demos
        and warm-up data); it is then frozen (and restored from checkpoints, never refitted)."""
        encoder = self.agent.encoder
        if not self.cfg.agent.encoder.normalize_state or encoder.normalizer_fitted:
            return
        states = [p.arrays["state"][p.arrays["valid"]] for p in self.replay.partitions.values()]
        states = np.concatenate([s for s in states if len(s)])
        encoder.fit_state_normalizer(states)

    def _crossed(self, key: str, every: int) -> bool:
        if not every:
            return False
        mark = self.counters["env_steps"] // every
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
        if self._crossed("checkpoint", cfg.checkpoint_every):
            self.checkpoint()

    def log(self) -> None:
        c, now = self.counters, time.perf_counter()
        t0, steps0, updates0 = self._perf
        dt = max(now - t0, 1e-9)
        metrics = {f"train/{k}": v for k, v in self.last_metrics.items()}
        since = c["env_steps"] - self.cfg.learning_starts
        metrics.update({
            "perf/env_steps_per_s": (c["env_steps"] - steps0) / dt,
            "perf/updates_per_s": (c["updates"] - updates0) * self.cfg.agent.utd / dt,
            "utd/target": float(self.cfg.agent.utd),
            "utd/actual": c["updates"] * self.cfg.agent.utd / since if since > 0 else float("nan"),
            "utd/owed_updates": float(self.owed_updates()),
            "replay/size": float(len(self.replay)),
        })
        for key, values in self._window.items():
            if values:
                name = {"policy_lag": "actor/policy_lag", "intervened": "actor/intervention_rate"}.get(
                    key, f"train/{key}")
                metrics[name] = float(np.mean(values))
        for uid, ring in self.rings.items():
            if ring is not None and ring.header is not None:
                h = ring.header
                metrics[f"actor/{uid}/jitter_p99_ms"] = h[shm.JITTER_P99_US] / 1000
                metrics[f"actor/{uid}/inference_ms"] = h[shm.INFER_US] / 1000
                metrics[f"actor/{uid}/paused_s"] = h[shm.PAUSED_US] / 1e6
                metrics[f"actor/{uid}/dropped_chunks"] = float(h[shm.DROPPED])
        self._window.clear()
        self._perf = (now, c["env_steps"], c["updates"])
        self.logger.log(metrics, c["env_steps"])
        self._write_status(metrics)

    def _write_status(self, metrics: dict[str, float] | None = None) -> None:
        """``status.json``: a small summary the supervisor's progress line reads."""
        c = self.counters
        status = {"env_steps": c["env_steps"], "updates": c["updates"], "version": c["version"]}
        if metrics:
            status["utd_actual"] = metrics["utd/actual"]
        if self.last_eval:
            status["eval_return"] = self.last_eval["return_mean"]
            status["eval_success"] = self.last_eval["success_rate"]
        atomic_write(self.run_dir / "status.json", lambda f: f.write_text(json.dumps(status)))

    def evaluate(self) -> dict[str, float]:
        if getattr(self.eval_env.unwrapped, "drives_hardware", False):
            return self.last_eval  # a robot is driven by its actor only; evaluate it with `robot-rl eval RUN_DIR`
        self.last_eval = evaluate(self.agent, self.eval_env, self.cfg.eval_episodes, seed=10_000 + self.cfg.seed)
        row = {f"eval/{k}": v for k, v in self.last_eval.items()}
        row["eval/updates"] = self.counters["updates"]
        row["eval/learner_wall_s"] = time.perf_counter() - self._started  # since this learner process started
        self.logger.log(row, self.counters["env_steps"])
        self.logger.plot()
        self._write_status()
        return self.last_eval

    def checkpoint(self) -> Path:
        path = save_checkpoint(self.run_dir, self.agent, self.replay, dict(self.counters))
        if self.rt.spool:  # what a checkpoint holds is no longer needed in the spools
            for uid, nxt in self.counters["ingested"].items():
                directory = self.run_dir / "spool" / uid
                trim(directory, int(nxt) - 1)
                if uid in self.retired and directory.is_dir() and not any(directory.iterdir()):
                    shutil.rmtree(directory, ignore_errors=True)
        return path

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        if not self.last_eval or not self.cfg.eval_every or self.counters["env_steps"] % self.cfg.eval_every:
            self.evaluate()
        self.log()
        self.checkpoint()
        self.publish()
        self.board.header[shm.W_STOP] = 1
        (self.run_dir / "final_eval.json").write_text(json.dumps(self.last_eval, indent=2))

    def run(self) -> dict[str, float]:
        while self.step():
            pass
        return self.last_eval

    def close(self, unlink: bool = False) -> None:
        self.logger.close()
        for ring in self.rings.values():
            if ring is not None:
                ring.close(unlink=unlink)
        self.board.close(unlink=unlink)
