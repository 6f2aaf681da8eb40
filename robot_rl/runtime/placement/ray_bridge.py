"""Ray transport: a bridge between the local shared-memory world of each actor machine and the learner's.

Actor and learner are the unchanged local ones; Ray only carries bytes between two machines:

* :class:`~robot_rl.runtime.placement.ray_gateway.Gateway` (a Ray actor pinned to the learner's node) acts
  toward the learner exactly like a local actor for every remote actor uid: it writes each chunk it receives first
  to the learner run's spool (``<run>/spool/<uid>/<seq>.safetensors``, atomically), then into a chunk ring it
  creates for that uid, and registers ``<run>/actors/<uid>.json`` with its own pid. It acks the highest contiguous
  seq it has spooled, serves the latest weights (safetensors bytes, read from the learner's weight board) and the
  learner's status, and closes a uid's ring once its remote side has been silent for
  ``runtime.heartbeat_timeout`` (or said goodbye), so the learner retires it. A new uid can join at any time.
* :class:`RemoteActor` (a Ray actor placed by the custom resource ``runtime.actor_resource``) runs the unchanged
  :class:`~robot_rl.runtime.actor.Actor` against a node-local run folder, plus a :class:`Bridge` thread that is
  the local learner's stand-in: it consumes the local ring (filling gaps from the local spool), pushes chunks to
  the gateway with a few in flight, resends what was not acked, trims the local spool up to the ack, and is the
  writer of the local weight board, mirroring weights and status words from the gateway.
* :class:`~robot_rl.runtime.placement.ray_launcher.RayLauncher`: how ``robot-rl train`` starts all this with
  ``runtime.transport: ray``.

What crosses the network is bytes, ints and strings only: chunks and weights as safetensors, validated on arrival
(:func:`~robot_rl.replay.rows.check_block`, names/shapes/dtypes of the policy); no code here
unpickles. Ray's own protocol can carry pickled objects, so the cluster must run with token authentication
(``RAY_AUTH_MODE=token``), which this module turns on and refuses to run without.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save as save_np
from safetensors.torch import load
from safetensors.torch import load as load_torch

from robot_rl.runtime.placement.ray_gateway import config_from_text
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, board_name
from robot_rl.runtime.transport.spool import spool_file, trim
from robot_rl.utils.log import get_logger
from robot_rl.utils.process import reset_niceness

log = get_logger(__name__)



class Bridge:
    """Actor side: stands in for the learner toward a local :class:`~robot_rl.runtime.actor.Actor`."""

    def __init__(self, gateway: Any, actor: Any, board: shm.WeightBoard, window: int = 4) -> None:
        self.gateway, self.actor, self.board, self.window = gateway, actor, board, window
        self.uid = actor.uid
        ring = actor.outbox.ring
        self.ring = shm.ChunkRing(ring.name, ring.specs)  # the consumer's own view of the ring
        self.spool = actor.run_dir / "spool" / actor.uid
        self.keys, self.template = board.keys, {k: (board.shapes[k], board.dtypes[k]) for k in board.keys}
        self.acked = self.sent = 0
        self.go = False
        self.error: BaseException | None = None
        self.draining = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray-bridge", daemon=True)

    def start(self) -> None:
        import ray  # optional: ray

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
        if reply["weights"] is not None:
            state = load(reply["weights"])
            bad = [k for k in self.keys
                   if k not in state or (tuple(state[k].shape), state[k].dtype) != self.template[k]]
            if bad or len(state) != len(self.keys):
                raise ValueError(f"weights from the gateway do not match this policy (keys/shapes/dtypes: {bad})")
            self.board.publish(state, int(reply["version"]))
        age = min(float(reply["learner_age_s"]), 1e6)
        self.board.mirror(shm.LearnerStatus(beat_ns=time.time_ns() - int(age * 1e9), pid=0,
                                            updates=int(reply["updates"]), env_steps=int(reply["env_steps"]),
                                            stop=bool(reply["stop"]), version=self.board.version))
        self.actor.outbox.ring.taken_seq = int(reply["taken"])
        self.go = self.go or bool(reply["go"])

    def _run(self) -> None:
        import ray  # optional: ray

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
                    stats = self.actor.outbox.ring.stats().values()
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
                    log.warning("ray bridge %s: %s; resending from chunk %d", self.uid, exc, self.acked)
                    inflight.clear()
                    sync_ref, self.sent = None, self.acked
                    time.sleep(0.2)
                if time.monotonic() - last_ok > timeout:
                    raise RuntimeError(f"no answer from the learner gateway for {timeout} s")
                if now - last_trim > 1.0:  # what the gateway spooled is safe on the learner's disk
                    last_trim = now
                    trim(self.spool, self.acked - 1)
                if self.draining.is_set() and not inflight and self.acked >= self.actor.outbox.seq:
                    break
                if not ready and not inflight:
                    time.sleep(0.002)
            self.gateway.leave.remote(self.uid)
        except BaseException as exc:  # noqa: BLE001 - handed to the actor's thread, which stops
            self.error = exc
            self.board.request_stop()
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
        reset_niceness("ray actor")  # the control loop runs at normal priority, not at Ray's worker nice 15
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
            self._board.request_stop()

    def run(self) -> dict[str, Any]:
        import ray  # optional: ray

        from robot_rl.runtime.actor import Actor  # lazy: the actor's stack (torch, envs) loads in the Ray actor only

        self._clean()
        self.local.mkdir(parents=True)
        cfg = config_from_text(self.config_text)
        # The local spool is what the bridge resends from.
        cfg = dataclasses.replace(cfg, runtime=dataclasses.replace(cfg.runtime, spool=True))
        (self.local / "config.yaml").write_text(self.config_text)
        # The local board exists before the actor, whose weights thread would otherwise attach to a half-made one.
        template = load_torch(ray.get(self.gateway.policy_template.remote()))
        board = self._board = shm.WeightBoard(board_name(self.local), template, create=True)
        if self._stop.is_set():
            board.request_stop()
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
            return {"uid": actor.uid, "steps": actor.steps, "chunks": actor.outbox.seq, "acked": bridge.acked,
                    "version": actor.version}
        finally:
            if actor is not None:
                actor.outbox.ring.close(unlink=True)
            board.close(unlink=True)
            shutil.rmtree(self.local, ignore_errors=True)
            try:
                self.local.parent.rmdir()  # the run's folder on this node, once its last actor is gone
            except OSError:
                pass
