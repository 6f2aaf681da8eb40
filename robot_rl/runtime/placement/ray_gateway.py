"""Ray transport, learner side: the :class:`Gateway` that remote actors push chunks to and pull weights from
(see :mod:`robot_rl.runtime.placement.ray_bridge` for the whole picture), and the token-auth guard both sides run."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from safetensors.numpy import load as load_np
from safetensors.torch import save

from robot_rl.config import from_dict
from robot_rl.envs.make import make_env
from robot_rl.replay.rows import check_block, row_specs
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, board_name, ring_name
from robot_rl.runtime.transport.spool import spool_file
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.agents import build_agent
from robot_rl.training.config import TrainConfig
from robot_rl.utils.log import get_logger
from robot_rl.utils.process import reset_niceness
from robot_rl.utils.state_io import atomic_write

log = get_logger(__name__)

UID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")  # uids name files: no path tricks


def config_from_text(text: str) -> TrainConfig:
    return from_dict(TrainConfig, yaml.safe_load(text) or {})


def _policy_template(cfg: TrainConfig) -> tuple[Any, int, dict]:
    """The run's spaces and the names, shapes and dtypes of its policy (initial values; never used to act)."""
    env = make_env(cfg.env)
    spec, action_dim = ObsSpec.from_space(env.observation_space), action_dim_of(env.action_space)
    env.close()
    agent = build_agent(cfg, spec, action_dim, device="cpu")
    return spec, action_dim, agent.policy_state()


def require_token_auth() -> None:
    """Token authentication on for this process and the Ray processes it starts (DESIGN: no open clusters)."""
    mode = os.environ.setdefault("RAY_AUTH_MODE", "token")
    if mode.lower() != "token":
        raise RuntimeError(f"RAY_AUTH_MODE={mode}: the Ray transport runs only with token authentication "
                           "(RAY_AUTH_MODE=token on every node; see docs/guides/multi-machine.md)")
    if "ray" in sys.modules:  # Ray reads its config at import: refresh it, as Ray does when it turns auth on
        try:
            from ray._raylet import Config  # optional: ray

            Config.initialize("")
        except (ImportError, AttributeError):
            pass


class Gateway:
    """Learner side (plain Python; the Ray launcher runs it as a Ray actor on the learner's node)."""

    def __init__(self, config_text: str, run_dir: str) -> None:
        reset_niceness("ray gateway")  # every actor's chunks pass here: not at Ray's worker nice 15
        self.cfg, self.run_dir = config_from_text(config_text), Path(run_dir)
        self.spec, self.action_dim, self.template = _policy_template(self.cfg)
        self.specs = row_specs(self.spec, self.action_dim)
        self.peers: dict[str, dict[str, Any]] = {}  # uid -> ring, acked, seen, gone
        self.board: shm.WeightBoard | None = None
        self._weights: tuple[int, bytes] = (0, b"")
        self._expected = (0, 0.0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._watchdog, name="gateway-watchdog", daemon=True).start()

    def _peer(self, uid: str) -> dict[str, Any]:
        peer = self.peers.get(uid)
        if peer is None:
            raise ValueError(f"unknown actor uid {uid!r}: join() first")
        if peer["gone"]:
            raise ValueError(f"actor {uid} was silent for more than {self.cfg.runtime.heartbeat_timeout} s and "
                             "has been retired; start a new actor (new uid)")
        peer["seen"] = time.monotonic()
        return peer

    def join(self, uid: str, index: int, num_envs: int) -> int:
        """Registers a remote actor with the learner (or re-attaches a known one); returns its acked seq."""
        if not isinstance(uid, str) or not UID.match(uid):
            raise ValueError(f"actor uid {uid!r} is not a plain name ([A-Za-z0-9_.-], at most 128 characters)")
        with self._lock:
            if uid in self.peers:
                return self._peer(uid)["acked"]
            spool = self.run_dir / "spool" / uid
            spool.mkdir(parents=True, exist_ok=True)
            rows = 2 * self.cfg.runtime.chunk_steps  # what a BlockBuilder's chunk can hold
            ring = shm.ChunkRing(ring_name(self.run_dir, uid), self.specs, self.cfg.runtime.ring_slots, rows,
                                 create=True)  # this process answers for it
            ring.beat()
            info = {"uid": uid, "index": int(index), "pid": os.getpid(), "ring": ring.name, "num_envs": int(num_envs),
                    "spool": True, "remote": True}
            path = actor_dir(self.run_dir) / f"{uid}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda f: f.write_text(json.dumps(info)))
            self.peers[uid] = {"ring": ring, "acked": 0, "seen": time.monotonic(), "gone": False, "spool": spool,
                               "max_bytes": 4096 + ring.shm.size // max(1, ring.slots)}
            return 0

    def policy_template(self) -> bytes:
        """The policy's tensors (initial values) as safetensors: an actor lays out its weight board from it."""
        return save(self.template)

    def expect(self, n: int, timeout: float) -> None:
        """Holds the remote actors (``go`` false in :meth:`sync`) until ``n`` have joined or ``timeout`` passed, so
        the first ones start acting together (and not one alone while the others still start up). Later actors
        (replacements, robots that come up later) join a running run at once."""
        with self._lock:
            self._expected = (int(n), time.monotonic() + float(timeout))

    def push(self, uid: str, seq: int, data: bytes) -> int:
        """Takes chunk ``seq`` of ``uid`` (safetensors bytes); returns the acked seq (next one it expects).
        A duplicate is ignored and a gap is refused (the sender resends from the returned ack)."""
        with self._lock:
            peer = self._peer(uid)
            if seq != peer["acked"]:
                return peer["acked"]
            if not isinstance(data, bytes) or len(data) > peer["max_bytes"]:
                raise ValueError(f"chunk {seq} from {uid}: not bytes or larger than a ring slot "
                                 f"({peer['max_bytes']} bytes)")
            try:
                chunk = load_np(data)
                rows = check_block(chunk, self.spec, self.action_dim)
            except Exception as exc:  # noqa: BLE001 - any malformed payload is the peer's error
                raise ValueError(f"chunk {seq} from {uid} rejected: {exc}") from None
            if rows > peer["ring"].rows:
                raise ValueError(f"chunk {seq} from {uid} rejected: {rows} rows, a chunk holds at most "
                                 f"{peer['ring'].rows}")
            # the spool first, fsynced: a chunk the learner reads, or the peer saw acknowledged, is on disk
            atomic_write(spool_file(peer["spool"], seq), lambda tmp: tmp.write_bytes(data))
            peer["ring"].put(chunk, seq)  # full ring: counted as dropped, the learner reads the spool instead
            peer["acked"] = seq + 1
            return peer["acked"]

    def _attach_board(self) -> shm.WeightBoard | None:
        if self.board is None:
            try:
                self.board = shm.WeightBoard(board_name(self.run_dir), self.template)
            except FileNotFoundError:
                return None
        return self.board

    def sync(self, uid: str, version: int, stats: list[int]) -> dict[str, Any]:
        """Heartbeat of ``uid`` with its statistics (the fields of :class:`~robot_rl.runtime.transport.shm.ActorStats`
        in order); returns the learner's status, the seq the learner has taken of this uid and, when newer than
        ``version``, the policy as safetensors bytes."""
        with self._lock:
            ring = self._peer(uid)["ring"]
            n = len(dataclasses.fields(shm.ActorStats))
            ring.report(shm.ActorStats(*(int(v) for v in list(stats)[:n])))
            ring.beat()
            go = len(self.peers) >= self._expected[0] or time.monotonic() > self._expected[1]
            out: dict[str, Any] = {"taken": ring.taken_seq, "version": 0, "weights": None, "go": go,
                                   "updates": 0, "env_steps": 0, "stop": False, "learner_age_s": float("inf")}
            board = self._attach_board()
            if board is None:
                return out
            learner = board.status()
            out.update(updates=learner.updates, env_steps=learner.env_steps, stop=learner.stop,
                       learner_age_s=learner.beat_age_s, version=learner.version)
            if board.version > self._weights[0]:
                got = board.read()
                if got is not None:
                    self._weights = (got[0], save({k: v.clone() for k, v in got[1].items()}))
            out["version"] = self._weights[0]
            if self._weights[0] > version:
                out["weights"] = self._weights[1]
            return out

    def leave(self, uid: str) -> None:
        with self._lock:
            if uid in self.peers and not self.peers[uid]["gone"]:
                self._retire(uid)

    def _retire(self, uid: str) -> None:
        peer = self.peers[uid]
        peer["gone"] = True
        peer["ring"].mark_closed()  # the learner drains it, then unlinks it and retires the uid
        peer["ring"].close()

    def _watchdog(self) -> None:
        while not self._stop.wait(0.25):
            with self._lock:
                limit = time.monotonic() - self.cfg.runtime.heartbeat_timeout
                for uid in [u for u, p in self.peers.items() if not p["gone"] and p["seen"] < limit]:
                    log.warning("gateway: actor %s: no call for %s s, marking it gone", uid,
                                self.cfg.runtime.heartbeat_timeout)
                    self._retire(uid)

    def status(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {u: {"acked": p["acked"], "gone": p["gone"]} for u, p in self.peers.items()}

    def close(self) -> None:
        """Stops the watchdog and lets go of the rings (the learner or the supervisor unlinks them)."""
        self._stop.set()
        with self._lock:
            for peer in self.peers.values():
                if not peer["gone"]:
                    peer["gone"] = True
                    peer["ring"].close()
            if self.board is not None:
                self.board.close()
                self.board = None
