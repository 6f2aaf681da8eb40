"""The actor's policy swap: a background thread copies newer published weights into a standby copy of the policy
and runs it once; the control loop only swaps the two references between control periods."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from robot_rl.agents.registry import capabilities
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import board_name
from robot_rl.utils.log import get_logger
from robot_rl.utils.process import set_realtime

log = get_logger(__name__)


class PolicySwap:
    """Two copies of the policy: ``policy`` acts while ``standby`` loads the next published weights."""

    def __init__(self, run_dir: Path, policy: Any, standby: Any, warm_obs: Any, base: Any, rt_priority: int,
                 uid: str) -> None:
        """``warm_obs``: a batch each new standby acts on once (its first-call costs off the control loop);
        ``base``: a base policy the learner fine-tunes too (its weights follow the policy's), or None."""
        self.run_dir, self.uid, self.rt_priority = run_dir, uid, rt_priority
        self.policy, self.standby, self.warm_obs, self.base = policy, standby, warm_obs, base
        self.caps = capabilities(type(policy))
        self.version = 0
        self.standby_version = 0
        self.board: shm.WeightBoard | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="weights", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def attach_board(self) -> shm.WeightBoard | None:
        """The run's weight board, once the learner made it."""
        if self.board is None:
            try:
                self.board = shm.WeightBoard(board_name(self.run_dir), self.policy.policy_state())
            except FileNotFoundError:
                return None
        return self.board

    def _loop(self) -> None:
        reported = False
        if self.rt_priority:  # just below the control loop: fresh weights load without a scheduler stall
            set_realtime(max(1, self.rt_priority - 1), "runtime.actor_rt_priority")
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - keep the control loop's weight source alive; retry
                if not reported:
                    log.warning("actor %s: weights: %s; retrying", self.uid, exc)
                    reported = True
                self._stop.wait(0.5)
            self._stop.wait(0.005)

    def poll(self) -> None:
        """Loads a newer published policy into the standby copy."""
        board = self.attach_board()
        if board is not None and board.version > max(self.version, self.standby_version):
            got = board.read()
            if got is not None:
                with self._lock:
                    self.standby.load_policy_state(got[1])
                    if self.base is not None and self.caps.trains_base:
                        self.base.load_weights(self.standby.base_weights())  # the learner fine-tunes the base
                    self.standby.act(self.warm_obs, deterministic=True)  # first-call costs here (no RNG draw)
                    self.standby_version = got[0]

    def swap(self) -> None:
        """Between two control periods: the standby acts from now on if it holds newer weights."""
        if self.standby_version > self.version and self._lock.acquire(blocking=False):
            try:
                self.policy, self.standby = self.standby, self.policy
                if self.caps.keeps_acting_state:  # the control loop's memory (ibrl's held choices) stays
                    # with the acting copy; the standby keeps its own, which warming new weights up overwrites
                    self.policy.acting_state, self.standby.acting_state = (self.standby.acting_state,
                                                                          self.policy.acting_state)
                self.version, self.standby_version = self.standby_version, self.version
            finally:
                self._lock.release()

    def stop_requested(self) -> bool:
        """The learner set the run's stop flag."""
        return self.board is not None and self.board.status().stop

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
