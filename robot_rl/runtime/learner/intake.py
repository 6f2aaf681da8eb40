"""The learner's intake: every actor's chunks into the replay, exactly once and in order, plus the statistics of
the episodes they carry.

Delivery is exactly-once per actor: chunks carry a per-actor sequence number; the intake takes them in order from
the actor's ring, fills gaps (ring overflow, learner restart) from the actor's spool, skips duplicates, and keeps
the next expected sequence per actor in :class:`~robot_rl.runtime.learner.counters.LearnerCounters` (saved in
every checkpoint).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from robot_rl.replay.buffer import ReplayBuffer
from robot_rl.replay.rows import check_block, row_specs
from robot_rl.runtime.learner.counters import LearnerCounters
from robot_rl.runtime.learner.episode_stats import EpisodeStats
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir
from robot_rl.runtime.transport.spool import has_chunks, read_chunk
from robot_rl.spaces import ObsSpec
from robot_rl.utils.process import pid_alive

STREAMS_PER_ACTOR = 1 << 16


class Intake:
    """Finds the run's actors (``<run>/actors/<uid>.json``) and their spools, and moves their chunks into the
    replay (:meth:`take`)."""

    def __init__(self, run_dir: Path, spec: ObsSpec, action_dim: int, replay: ReplayBuffer,
                 counters: LearnerCounters, spool: bool, announce: Callable[[], None],
                 published_at: dict[int, int] | None = None) -> None:
        """``announce``: makes the counters visible to the actors (the weight board's beat); called after each
        chunk and before the ring says the chunk was taken, so an actor that sees a chunk taken also sees it
        counted (it never undercounts the run's env steps, which would let it run past the rate limit).
        ``published_at``: the publisher's version -> env steps map (for the policy lag in env steps)."""
        self.published_at = published_at
        self.run_dir, self.spec, self.action_dim = run_dir, spec, action_dim
        self.replay, self.counters, self.spool, self.announce = replay, counters, spool, announce
        self.specs = row_specs(spec, action_dim)
        self.rings: dict[str, shm.ChunkRing | None] = {}
        self.actor_info: dict[str, dict] = {}
        self.retired: set[str] = set()
        self.episodes = EpisodeStats()
        self._last_scan = 0.0

    def _scan(self) -> None:
        """Finds actors registered in the run folder and spools left by actors of an earlier life."""
        self._last_scan = time.perf_counter()
        # Spools first, registrations second: an actor registers before it spools its first chunk, so a spool with
        # chunks but no registration is an earlier life's. An empty spool without one may be an actor halfway
        # through starting up (it makes its spool folder before it registers): left for a later scan.
        spool_root = self.run_dir / "spool"
        spooled = {p.name for p in spool_root.iterdir() if has_chunks(p)} if spool_root.is_dir() else set()
        folder = actor_dir(self.run_dir)
        uids = {p.stem: p for p in folder.glob("*.json")} if folder.is_dir() else {}
        for uid in (set(uids) | spooled) - set(self.rings) - self.retired:
            info = json.loads(uids[uid].read_text()) if uid in uids else {}
            ring = None
            if info:
                try:
                    ring = shm.ChunkRing(info["ring"], self.specs)
                except FileNotFoundError:
                    ring = None
            self.rings[uid], self.actor_info[uid] = ring, info
            if uid not in self.counters.streams:
                self.counters.streams[uid] = (len(self.counters.streams) + 1) * STREAMS_PER_ACTOR

    def _add(self, uid: str, seq: int, chunk: dict[str, np.ndarray]) -> int:
        check_block(chunk, self.spec, self.action_dim)
        base = self.counters.streams[uid]
        n = self.replay.extend(chunk, base)
        self.counters.ingested[uid] = seq + 1
        self.counters.episodes += self.episodes.add(chunk, base, self.counters.version, self.counters.env_steps,
                                                    self.published_at)
        if "label" in chunk:  # chunks spooled by an older robot_rl have no labels
            labels = chunk["label"][chunk["valid"]]
            self.counters.labelled_success += int(np.count_nonzero(labels == 1))
            self.counters.labelled_failure += int(np.count_nonzero(labels == 2))
        self.counters.env_steps += n
        return n

    def take(self, held: Callable[[], bool] | None = None) -> int:
        """Takes in every chunk available now, in sequence order per actor; returns transitions taken. ``held``
        is asked before each chunk: True leaves the rest for a later call (the learner paces what it takes in)."""
        if time.perf_counter() - self._last_scan > 0.5:
            self._scan()
        total = 0
        for uid, ring in list(self.rings.items()):
            nxt = int(self.counters.ingested.get(uid, 0))
            paced = False
            while True:
                if held is not None and held():
                    paced = True
                    break
                item = ring.peek() if ring is not None else None
                if item is not None and item[0] < nxt:  # already taken (from the spool)
                    ring.release()
                    continue
                if item is not None and item[0] == nxt:
                    total += self._add(uid, nxt, item[1])
                    ring.release()
                    nxt += 1
                    self.announce()
                    ring.taken_seq = nxt
                    continue
                chunk = read_chunk(self.run_dir / "spool" / uid, nxt) if self.spool else None
                if chunk is None:
                    if item is not None and not self.spool:  # no spool: the gap is lost; say so and move on
                        self.counters.lost_chunks += item[0] - nxt
                        nxt = item[0]
                        self.counters.ingested[uid] = nxt
                        continue
                    break
                total += self._add(uid, nxt, chunk)
                nxt += 1
                self.announce()
                if ring is not None:
                    ring.taken_seq = nxt
            if not paced:  # an earlier life's spool left half-read is not gone
                self._retire_if_gone(uid, ring)
        return total

    def _retire_if_gone(self, uid: str, ring: shm.ChunkRing | None) -> None:
        info = self.actor_info.get(uid, {})
        alive = ring is not None and not ring.closed and pid_alive(int(info.get("pid", 0)))
        if alive or (ring is not None and ring.pending()):
            return
        if ring is not None:
            if not self.spool or read_chunk(self.run_dir / "spool" / uid, self.counters.ingested.get(uid, 0)):
                return  # its last chunks may still be arriving
            ring.close(unlink=True)
        (actor_dir(self.run_dir) / f"{uid}.json").unlink(missing_ok=True)
        self.rings.pop(uid)
        self.retired.add(uid)

    def stop_requested(self) -> str | None:
        """The live actor whose operator pressed stop (its uid), or None."""
        return next((uid for uid, ring in self.rings.items()
                     if ring is not None and ring.header is not None and ring.stop_requested), None)

    def spool_mb(self) -> float:
        """The largest spool among the live actors, in megabytes (what they report)."""
        return max((ring.status().stats.spool_kb / 1024 for ring in self.rings.values()
                    if ring is not None and ring.header is not None), default=0)

    def actor_metrics(self) -> dict[str, float]:
        """Per live actor: jitter, inference time, paused time and ring drops (for the logs)."""
        out = {}
        for uid, ring in self.rings.items():
            if ring is not None and ring.header is not None:
                status = ring.status()
                out[f"actor/{uid}/jitter_p99_ms"] = status.stats.jitter_p99_us / 1000
                out[f"actor/{uid}/inference_ms"] = status.stats.infer_us / 1000
                out[f"actor/{uid}/paused_s"] = status.stats.paused_us / 1e6
                out[f"actor/{uid}/dropped_chunks"] = float(status.dropped)
                out[f"actor/{uid}/spool_mb"] = status.stats.spool_kb / 1024
                if status.stats.base_infer_us:
                    out[f"actor/{uid}/base_inference_ms"] = status.stats.base_infer_us / 1000
                    out[f"actor/{uid}/base_missed_steps"] = float(status.stats.base_missed)
                    out[f"actor/{uid}/base_late_chunks"] = float(status.stats.base_late)
        return out

    def close(self, unlink: bool = False) -> None:
        for ring in self.rings.values():
            if ring is not None:
                ring.close(unlink=unlink)
