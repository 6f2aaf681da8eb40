"""The safety node's e-stop as a robot env sees it: while it is latched the safety node rejects every command and
the robot holds, so each control period is a held period (nothing recorded, not a step of the episode, see
envs/held.py), and an episode's reset waits for the person to reset the e-stop (``~/reset_estop``) instead of
failing: the run goes on where the person left it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class EstopLatch:
    """Reads the latch from ``state()`` (the safety node's ``safety_state``: ``estop`` when latched); a reset waits
    ``wait_s`` at most."""

    def __init__(self, state: Callable[[], str], wait_s: float) -> None:
        self.state, self.wait_s = state, wait_s
        self._seen = False  # latched at the last look (each change is logged once)

    def latched(self) -> bool:
        latched = self.state() == "estop"
        if latched != self._seen:
            log.warning("the e-stop is latched: the robot holds, nothing is recorded until it is reset" if latched
                        else "the e-stop was reset: the episode goes on")
            self._seen = latched
        return latched

    def wait_reset(self) -> None:
        """Returns once the e-stop is not latched; RuntimeError after ``wait_s``."""
        if self.state() != "estop":
            self._seen = False
            return
        log.warning("the e-stop is latched: the episode starts once it is reset (the safety node's ~/reset_estop)")
        deadline = time.monotonic() + self.wait_s
        while self.state() == "estop":
            if time.monotonic() > deadline:
                raise RuntimeError(f"reset: the safety node's e-stop stayed latched for {self.wait_s} s (call its "
                                   "~/reset_estop service)")
            time.sleep(0.1)
        log.info("the e-stop was reset")
        self._seen = False
