"""The one interface every teleoperation device implements, and the events its buttons/keys raise.

A device is polled once per control period by :class:`robot_rl.teleop.intervention.InterventionWrapper`:
``read()`` returns at once (devices read their hardware on a thread of their own) with the latest
:class:`TeleopReading`. ``active`` means "the human is steering now": the human's action replaces the policy's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

EVENTS = ("success", "failure", "reset", "pause", "ready", "stop")
"""Episode events a device can raise: label the episode a success / failure (ends it), reset it (truncates;
recording demos: discard it and record it again), pause (the robot holds still and nothing is recorded while
paused; press again to resume), ready (the operator is ready: the next episode starts; a success press counts as
ready too, for devices with few buttons), stop (end the recording session, keeping what was recorded)."""


@dataclass
class TeleopReading:
    """What a device says this control period."""

    action: np.ndarray
    """float32 ``[A]`` in [-1, 1], the env's action convention (zeros when the human gives no input)."""
    active: bool = False
    """The human is steering: the wrapper executes ``action`` instead of the policy's."""
    events: frozenset[str] = field(default_factory=frozenset)
    """Events raised since the last read (a subset of :data:`EVENTS`); each press is reported once."""
    connected: bool = True
    """False once the device is gone (unplugged, node silent): the wrapper then holds the robot still."""


@runtime_checkable
class TeleopDevice(Protocol):
    """A teleoperation device. Implementations: keyboard, gamepad, spacemouse, ROS 2 (Joy/Twist), scripted."""

    action_dim: int

    def read(self) -> TeleopReading:
        """The latest reading; never blocks the control loop."""
        ...

    def close(self) -> None:
        """Stops the device's thread and releases the hardware."""
        ...


def hold_reading(action_dim: int, connected: bool = True) -> TeleopReading:
    """A reading that asks for nothing (zero action, inactive)."""
    return TeleopReading(np.zeros(action_dim, np.float32), active=False, connected=connected)


def apply_deadzone(values: np.ndarray, deadzone: float) -> np.ndarray:
    """Zeroes axes with ``|v| < deadzone`` and rescales the rest so the output stays continuous from 0 to 1."""
    v = np.asarray(values, np.float32)
    if not 0.0 <= deadzone < 1.0:
        raise ValueError(f"deadzone must be in [0, 1), got {deadzone}")
    mag = np.clip((np.abs(v) - deadzone) / (1.0 - deadzone), 0.0, None)
    return (np.sign(v) * mag).astype(np.float32)
