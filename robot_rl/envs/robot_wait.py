"""A robot that stopped answering in the middle of a person's recording: wait for it, then start the episode again.

A training run has the supervisor for this (the actor ends, a new actor life reconnects). A recording has a person
at the robot and the recording so far: a robot graph that stalls for a few seconds (a loaded robot PC, a driver
restarting) must not end the session, and one that never comes back must not take the recording with it.
"""

from __future__ import annotations

import time
from typing import Any

from robot_rl.envs.contract import RobotUnavailable
from robot_rl.utils.log import get_logger

log = get_logger(__name__)

DEFAULT_WAIT_S = 30.0
"""How long to wait for an env without a ``connect_timeout`` of its own."""
RETRY_PAUSE_S = 0.5
"""Between two reset attempts (a reset that fails at once must not spin)."""


def robot_wait_s(env: Any) -> float:
    """How long ``env`` (possibly wrapped) waits for its robot: its config's ``connect_timeout``, else 30 s."""
    cfg = getattr(getattr(env, "unwrapped", env), "cfg", None)
    return float(getattr(cfg, "connect_timeout", DEFAULT_WAIT_S))


def reset_when_back(env: Any, cause: RobotUnavailable, **reset_kwargs: Any) -> tuple[Any, dict]:
    """Resets ``env`` as soon as its robot answers again, trying for :func:`robot_wait_s`; returns ``reset``'s
    ``(obs, info)``. Raises :class:`RobotUnavailable` naming ``cause`` and the wait when the robot stays away.
    A reset that times out (the arm does not settle while its state stream is stalled) counts as not answering."""
    wait = robot_wait_s(env)
    log.warning("the robot stopped answering (%s): waiting up to %.0f s for it; the episode starts again",
                cause, wait)
    began = time.monotonic()
    while True:
        try:
            out = env.reset(**reset_kwargs)
        except TimeoutError as exc:  # RobotUnavailable is one
            if time.monotonic() - began >= wait:
                raise RobotUnavailable(f"{cause}; still not answering after {wait:.0f} s ({exc})") from None
            time.sleep(RETRY_PAUSE_S)
            continue
        log.info("the robot answers again after %.1f s", time.monotonic() - began)
        return out
