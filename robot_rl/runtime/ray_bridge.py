"""Ray transport: a bridge between the local shared-memory world of each actor machine and the learner's.

Actor and learner are the unchanged local ones; Ray only carries bytes between two machines:

* :class:`Gateway` (a Ray actor pinned to the learner's node) acts toward the learner exactly like a local actor
  for every remote actor uid: it writes each chunk it receives first to the learner run's spool
  (``<run>/spool/<uid>/<seq>.safetensors``, atomically), then into a :class:`~robot_rl.runtime.shm.ChunkRing` it
  creates for that uid, and registers ``<run>/actors/<uid>.json`` with its own pid. It acks the highest contiguous
  seq it has spooled, serves the latest weights (safetensors bytes, read from the learner's weight board) and the
  board's status words, and marks a uid's ring CLOSED once its remote side has been silent for
  ``runtime.heartbeat_timeout`` (or said goodbye), so the learner retires it. A new uid can join at any time.
* :class:`RemoteActor` (a Ray actor placed by the custom resource ``runtime.actor_resource``) runs the unchanged
  :class:`~robot_rl.runtime.actor.Actor` against a node-local run folder, plus a :class:`Bridge` thread that is
  the local learner's stand-in: it consumes the local ring (filling gaps from the local spool), pushes chunks to
  the gateway with a few in flight, resends what was not acked, trims the local spool up to the ack, and is the
  writer of the local weight board, mirroring weights and status words from the gateway.
* :class:`RaySupervisor`: ``robot-rl train`` with ``runtime.transport: ray``.

What crosses the network is bytes, ints and strings only: chunks and weights as safetensors, validated on arrival
(:func:`~robot_rl.runtime.chunks.check_chunk`, names/shapes/dtypes of the policy); no code here unpickles. Ray's own
protocol can carry pickled objects, so the cluster must run with token authentication (``RAY_AUTH_MODE=token``),
which this module turns on and refuses to run without.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from safetensors.numpy import load as load_np
from safetensors.numpy import save as save_np

from robot_rl.runtime import shm
from robot_rl.runtime.chunks import check_chunk, chunk_specs
from robot_rl.runtime.config import TrainConfig
from robot_rl.runtime.names import actor_dir, board_name, ring_name, run_key
from robot_rl.runtime.spool import spool_file, trim
from robot_rl.runtime.supervisor import Supervisor
from robot_rl.utils.state_io import atomic_write

READY_TIMEOUT = 120.0  # seconds the first actors wait for each other before they start acting anyway
UID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")  # uids name files: no path tricks
# Ring header words a remote actor reports through the gateway (the learner logs them).
STATS = (shm.ENV_STEPS, shm.VERSION, shm.JITTER_P99_US, shm.INFER_US, shm.PERIOD_US, shm.EPISODES, shm.NEXT_SEQ,
         shm.PAUSED_US, shm.SENT)


def config_from_text(text: str) -> TrainConfig:
    from robot_rl.config import from_dict

    return from_dict(TrainConfig, yaml.safe_load(text) or {})


def _policy_template(cfg: TrainConfig) -> tuple[Any, int, dict]:
    from robot_rl.agents.sac import SACAgent
    from robot_rl.envs.make import make_env
    from robot_rl.spaces import ObsSpec, action_dim_of

    env = make_env(cfg.env)
    spec, action_dim = ObsSpec.from_space(env.observation_space), action_dim_of(env.action_space)
    env.close()
    cfg.agent.device = "cpu"
    return spec, action_dim, SACAgent(spec, action_dim, cfg.agent).policy_state()


def require_token_auth() -> None:
    """Token authentication on for this process and the Ray processes it starts (DESIGN: no open clusters)."""
    mode = os.environ.setdefault("RAY_AUTH_MODE", "token")
    if mode.lower() != "token":
        raise RuntimeError(f"RAY_AUTH_MODE={mode}: the Ray transport runs only with token authentication "
                           "(RAY_AUTH_MODE=token on every node; see README, Multi-machine (Ray))")
    if "ray" in sys.modules:  # Ray reads its config at import: refresh it, as Ray does when it turns auth on
        try:
            from ray._raylet import Config

            Config.initialize("")
        except (ImportError, AttributeError):
            pass


class Gateway:
    """Learner side (plain Python; :class:`RaySupervisor` runs it as a Ray actor on the learner's node)."""

    def __init__(self, config_text: str, run_dir: str) -> None:
        self.cfg, self.run_dir = config_from_text(config_text), Path(run_dir)
        self.spec, self.action_dim, self.template = _policy_template(self.cfg)
        self.specs = chunk_specs(self.spec, self.action_dim)
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
            rows = 2 * self.cfg.runtime.chunk_steps  # what a ChunkBuilder's chunk can hold
            ring = shm.ChunkRing(ring_name(self.run_dir, uid), self.specs, self.cfg.runtime.ring_slots, rows,
                                 create=True)
            ring.header[shm.PID], ring.header[shm.HEARTBEAT] = os.getpid(), time.time_ns()
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
        from safetensors.torch import save

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
                rows = check_chunk(chunk, self.spec, self.action_dim)
            except Exception as exc:  # noqa: BLE001 - any malformed payload is the peer's error
                raise ValueError(f"chunk {seq} from {uid} rejected: {exc}") from None
            if rows > peer["ring"].rows:
                raise ValueError(f"chunk {seq} from {uid} rejected: {rows} rows, a chunk holds at most "
                                 f"{peer['ring'].rows}")
            final = spool_file(peer["spool"], seq)  # the spool first: a chunk the learner reads is always spooled
            tmp = final.with_name(f".{final.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, final)
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
        """Heartbeat of ``uid`` with its ring statistics; returns the learner's status words, the seq the learner
        has taken of this uid and, when newer than ``version``, the policy as safetensors bytes."""
        with self._lock:
            h = self._peer(uid)["ring"].header
            h[shm.HEARTBEAT] = time.time_ns()
            for word, value in zip(STATS, stats[:len(STATS)]):
                h[word] = int(value)
            go = len(self.peers) >= self._expected[0] or time.monotonic() > self._expected[1]
            out: dict[str, Any] = {"taken": int(h[shm.TAKEN_SEQ]), "version": 0, "weights": None, "go": go,
                                   "updates": 0, "env_steps": 0, "stop": False, "learner_age_s": float("inf")}
            board = self._attach_board()
            if board is None:
                return out
            b = board.header
            out.update(updates=int(b[shm.W_UPDATES]), env_steps=int(b[shm.W_ENV_STEPS]), stop=bool(b[shm.W_STOP]),
                       learner_age_s=(time.time_ns() - int(b[shm.W_LEARNER_BEAT])) / 1e9, version=board.version)
            if board.version > self._weights[0]:
                got = board.read()
                if got is not None:
                    from safetensors.torch import save

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
        peer["ring"].header[shm.CLOSED] = 1  # the learner drains it, then unlinks it and retires the uid
        peer["ring"].close()

    def _watchdog(self) -> None:
        while not self._stop.wait(0.25):
            with self._lock:
                limit = time.monotonic() - self.cfg.runtime.heartbeat_timeout
                for uid in [u for u, p in self.peers.items() if not p["gone"] and p["seen"] < limit]:
                    print(f"[gateway] actor {uid}: no call for {self.cfg.runtime.heartbeat_timeout} s, marking it "
                          "gone", file=sys.stderr)
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


class Bridge:
    """Actor side: stands in for the learner toward a local :class:`~robot_rl.runtime.actor.Actor`."""

    def __init__(self, gateway: Any, actor: Any, board: shm.WeightBoard, window: int = 4) -> None:
        self.gateway, self.actor, self.board, self.window = gateway, actor, board, window
        self.uid = actor.uid
        self.ring = shm.ChunkRing(actor.ring.name, actor.ring.specs)  # the consumer's own view of the ring
        self.spool = actor.run_dir / "spool" / actor.uid
        self.keys, self.template = board.keys, {k: (board.shapes[k], board.dtypes[k]) for k in board.keys}
        self.acked = self.sent = 0
        self.go = False
        self.error: BaseException | None = None
        self.draining = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray-bridge", daemon=True)

    def start(self) -> None:
        import ray

        self.acked = self.sent = ray.get(self.gateway.join.remote(self.uid, self.actor.index, self.actor.n))
        self._thread.start()

    def _next(self, seq: int) -> bytes | None:
        """Chunk ``seq`` as safetensors bytes: from the local ring, else (ring overflowed, resend) the local spool."""
        while (item := self.ring.peek()) is not None and item[0] < seq:
            self.ring.release()
        if item is not None and item[0] == seq:
            data = save_np({k: np.ascontiguousarray(v) for k, v in item[1].items()})
            self.ring.release()
            return data
        path = spool_file(self.spool, seq)
        return path.read_bytes() if path.is_file() else None

    def _apply(self, reply: dict[str, Any]) -> None:
        h = self.board.header
        if reply["weights"] is not None:
            from safetensors.torch import load

            state = load(reply["weights"])
            bad = [k for k in self.keys
                   if k not in state or (tuple(state[k].shape), state[k].dtype) != self.template[k]]
            if bad or len(state) != len(self.keys):
                raise ValueError(f"weights from the gateway do not match this policy (keys/shapes/dtypes: {bad})")
            self.board.publish(state, int(reply["version"]))
        h[shm.W_UPDATES], h[shm.W_ENV_STEPS] = int(reply["updates"]), int(reply["env_steps"])
        age = min(float(reply["learner_age_s"]), 1e6)
        h[shm.W_LEARNER_BEAT] = time.time_ns() - int(age * 1e9)
        self.actor.ring.header[shm.TAKEN_SEQ] = int(reply["taken"])
        if reply["stop"]:
            h[shm.W_STOP] = 1
        self.go = self.go or bool(reply["go"])

    def _run(self) -> None:
        import ray

        inflight: deque[tuple[int, Any]] = deque()
        sync_ref, last_sync, last_ok, last_trim = None, 0.0, time.monotonic(), 0.0
        timeout = self.actor.rt.heartbeat_timeout
        try:
            while True:
                while len(inflight) < self.window and (data := self._next(self.sent)) is not None:
                    inflight.append((self.sent, self.gateway.push.remote(self.uid, self.sent, data)))
                    self.sent += 1
                now = time.monotonic()
                if sync_ref is None and now - last_sync > 0.1:
                    stats = [int(self.actor.ring.header[w]) for w in STATS]
                    sync_ref, last_sync = self.gateway.sync.remote(self.uid, self.board.version, stats), now
                refs = [r for r in ([inflight[0][1]] if inflight else []) + ([sync_ref] if sync_ref else [])]
                ready = ray.wait(refs, num_returns=1, timeout=0.005)[0] if refs else []
                try:
                    if inflight and inflight[0][1] in ready:
                        seq, ref = inflight.popleft()
                        self.acked = max(self.acked, ray.get(ref))
                        if self.acked <= seq:  # refused (a gap): resend from the ack, the rest is refused too
                            if inflight:
                                ray.wait([r for _, r in inflight], num_returns=len(inflight), timeout=timeout)
                            inflight.clear()
                            self.sent = self.acked
                        last_ok = now
                    if sync_ref is not None and sync_ref in ready:
                        reply, sync_ref = ray.get(sync_ref), None
                        self._apply(reply)
                        last_ok = now
                except ValueError:  # the gateway refused this actor (retired) or its data: fatal
                    raise
                except ray.exceptions.ActorDiedError as exc:
                    raise RuntimeError(f"lost the learner gateway: {exc}") from exc
                except ray.exceptions.RayError as exc:  # transient (unreachable for a while): resend what is not acked
                    print(f"[ray-bridge] {self.uid}: {exc}; resending from chunk {self.acked}", file=sys.stderr)
                    inflight.clear()
                    sync_ref, self.sent = None, self.acked
                    time.sleep(0.2)
                if time.monotonic() - last_ok > timeout:
                    raise RuntimeError(f"no answer from the learner gateway for {timeout} s")
                if now - last_trim > 1.0:  # what the gateway spooled is safe on the learner's disk
                    last_trim = now
                    trim(self.spool, self.acked - 1)
                if self.draining.is_set() and not inflight and self.acked >= self.actor.seq:
                    break
                if not ready and not inflight:
                    time.sleep(0.002)
            self.gateway.leave.remote(self.uid)
        except BaseException as exc:  # noqa: BLE001 - handed to the actor's thread, which stops
            self.error = exc
            self.board.header[shm.W_STOP] = 1
        finally:
            self.done.set()

    def finish(self, timeout: float = 5.0) -> None:
        """After the actor closed: deliver its last chunks, then say goodbye."""
        self.draining.set()
        self.done.wait(timeout)
        self.ring.close()


class RemoteActor:
    """Runs on an actor node (Ray places it by ``runtime.actor_resource``): the local actor + its bridge."""

    def __init__(self, config_text: str, run_name: str, index: int, incarnation: int, gateway: Any) -> None:
        os.environ.setdefault("MUJOCO_GL", "egl")
        root = Path(os.environ.get("ROBOT_RL_ACTOR_DIR", Path(tempfile.gettempdir()) / "robot_rl"))
        self.local = root / run_name / f"actor{index}"
        self.config_text, self.index, self.incarnation, self.gateway = config_text, index, incarnation, gateway
        self._stop = threading.Event()
        self._board: shm.WeightBoard | None = None

    def _clean(self) -> None:
        """Leftovers of an earlier incarnation of this index (killed): its ring, board and folder."""
        if actor_dir(self.local).is_dir():
            for path in actor_dir(self.local).glob("*.json"):
                shm.unlink_shm(json.loads(path.read_text())["ring"])
        shm.unlink_shm(board_name(self.local))
        shutil.rmtree(self.local, ignore_errors=True)

    def pid(self) -> int:
        return os.getpid()

    def stop(self) -> None:
        """Asks :meth:`run` (running on another thread of this Ray actor) to end cleanly, as the learner's stop
        flag would: its last chunks are delivered and its shared memory and folder removed."""
        self._stop.set()
        if self._board is not None and self._board.header is not None:
            self._board.header[shm.W_STOP] = 1

    def run(self) -> dict[str, Any]:
        import ray
        import torch
        from safetensors.torch import load as load_torch

        from robot_rl.runtime.actor import Actor

        self._clean()
        self.local.mkdir(parents=True)
        cfg = config_from_text(self.config_text)
        cfg.runtime.spool = True  # the local spool is what the bridge resends from
        if cfg.agent.device.startswith("cuda") and not torch.cuda.is_available():
            cfg.agent.device = "cpu"
        (self.local / "config.yaml").write_text(self.config_text)
        # The local board exists before the actor, whose weights thread would otherwise attach to a half-made one.
        template = load_torch(ray.get(self.gateway.policy_template.remote()))
        board = self._board = shm.WeightBoard(board_name(self.local), template, create=True)
        if self._stop.is_set():
            board.header[shm.W_STOP] = 1
        actor = None
        try:
            actor = Actor(cfg, self.local, index=self.index, incarnation=self.incarnation)
            mine = {k: (tuple(v.shape), v.dtype) for k, v in actor.policy.policy_state().items()}
            if mine != {k: (tuple(v.shape), v.dtype) for k, v in template.items()}:
                raise ValueError("this actor's policy differs from the learner's (same robot_rl version and config "
                                 "on both machines?)")
            bridge = Bridge(self.gateway, actor, board)
            bridge.start()
            while not (bridge.go and board.version or bridge.done.is_set() or self._stop.is_set()):  # Gateway.expect
                time.sleep(0.02)
            actor.run()
            bridge.finish()
            if bridge.error is not None:
                raise RuntimeError(f"actor {actor.uid}: {bridge.error}") from bridge.error
            return {"uid": actor.uid, "steps": actor.steps, "chunks": actor.seq, "acked": bridge.acked,
                    "version": actor.version}
        finally:
            if actor is not None:
                actor.ring.close(unlink=True)
            board.close(unlink=True)
            shutil.rmtree(self.local, ignore_errors=True)
            try:
                self.local.parent.rmdir()  # the run's folder on this node, once its last actor is gone
            except OSError:
                pass


class RayActorProcess:
    """A remote actor seen through the ``subprocess.Popen`` methods :class:`Supervisor` uses."""

    def __init__(self, handle: Any, ref: Any) -> None:
        self.handle, self.ref, self.returncode = handle, ref, None

    def poll(self) -> int | None:
        import ray

        if self.returncode is None and ray.wait([self.ref], timeout=0)[0]:
            try:
                ray.get(self.ref)
                self.returncode = 0
            except ray.exceptions.RayError as exc:
                print(f"[supervisor] remote actor failed: {exc}", file=sys.stderr)
                self.returncode = 1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import ray

        if not ray.wait([self.ref], timeout=timeout)[0]:
            raise subprocess.TimeoutExpired("remote actor", timeout or 0)
        return self.poll()  # type: ignore[return-value]

    def terminate(self) -> None:
        """A clean stop (see :meth:`RemoteActor.stop`); :meth:`kill` if it has not ended within ``wait``."""
        self.handle.stop.remote()

    def kill(self) -> None:
        import ray

        ray.kill(self.handle, no_restart=True)
        self.returncode = -9 if self.returncode is None else self.returncode


class RaySupervisor(Supervisor):
    """``robot-rl train`` with ``runtime.transport: ray``: the learner a local process, the gateway a Ray actor on
    this node, the actors Ray actors on nodes with ``runtime.actor_resource``."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, resume: bool) -> None:
        super().__init__(cfg, run_dir, resume)
        self.gateway: Any = None
        self.config_text = (run_dir / "config.yaml").read_text()
        self._owns_ray = False

    def run(self) -> dict[str, float]:
        require_token_auth()
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        rt = self.cfg.runtime
        if not ray.is_initialized():
            if rt.ray_address == "local":
                ray.init(address="local", resources={rt.actor_resource: rt.num_actors}, include_dashboard=False,
                         _node_ip_address="127.0.0.1")
            else:
                ray.init(address=rt.ray_address)
            self._owns_ray = True
        try:
            here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
            self.gateway = ray.remote(Gateway).options(num_cpus=0, scheduling_strategy=here).remote(
                self.config_text, str(self.run_dir.resolve()))
            self.gateway.expect.remote(rt.num_actors, READY_TIMEOUT)
            for i in range(rt.num_actors):  # they start up while the gateway and the learner do
                self.start_actor(i)
            ray.get(self.gateway.status.remote())  # fail here, with its error, if it cannot start
            return super().run()  # starts the learner
        finally:
            if self.gateway is not None:
                ray.kill(self.gateway)
            if self._owns_ray:
                ray.shutdown()

    def _actor_died(self, index: int, code: int) -> None:
        import ray

        try:  # a dead gateway takes every remote actor with it: say so instead of burning the restarts
            ray.get(self.gateway.status.remote(), timeout=30)
        except ray.exceptions.RayError as exc:
            raise RuntimeError(f"the learner gateway died ({type(exc).__name__}); what it acked is in "
                               f"{self.run_dir / 'spool'}: continue with --resume {self.run_dir}") from exc
        super()._actor_died(index, code)

    def start_actor(self, index: int) -> None:
        import ray

        if index in self.actors and self.actors[index].poll() is None:
            return  # started before the learner and still running
        rt = self.cfg.runtime
        handle = ray.remote(RemoteActor).options(num_cpus=0, resources={rt.actor_resource: 1},
                                                 max_concurrency=2).remote(  # run() + stop()
            self.config_text, run_key(self.run_dir), index, self.incarnations[index], self.gateway)
        self.actors[index] = RayActorProcess(handle, handle.run.remote())
