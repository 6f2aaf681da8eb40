"""Shared by the device tests: waiting on a device's reader thread, collecting events across reads."""

from __future__ import annotations

import time
from collections.abc import Callable

from robot_rl.teleop.base import TeleopReading


def wait_for(device, check: Callable[[TeleopReading], bool], timeout: float = 3.0,
             events: set[str] | None = None) -> TeleopReading:
    """Reads ``device`` until ``check(reading)`` holds (events seen meanwhile are added to ``events``)."""
    deadline = time.monotonic() + timeout
    while True:
        reading = device.read()
        if events is not None:
            events |= reading.events
        if check(reading):
            return reading
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; last reading {reading}")
        time.sleep(0.005)


def collect_events(device, until: str, timeout: float = 3.0, settle: float = 0.15) -> list[str]:
    """Every event ``device`` reports until ``until`` shows up and for ``settle`` seconds after (a press must be
    reported exactly once, however long it is held)."""
    out: list[str] = []
    deadline, end = time.monotonic() + timeout, None
    while end is None or time.monotonic() < end:
        out.extend(sorted(device.read().events))
        if end is None and until in out:
            end = time.monotonic() + settle
        if time.monotonic() > deadline:
            raise AssertionError(f"no {until!r} event in {timeout} s (saw {out})")
        time.sleep(0.005)
    return out
