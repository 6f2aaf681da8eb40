"""Camera configuration: one ``CameraConfig`` per camera (defined in :mod:`robot_rl.robots.camera`, below the robot
profiles that name cameras), a ``RigConfig`` for the set an env observes.

Plain dataclasses with documented fields, filled from YAML by ``robot_rl.config.from_dict`` like every other config.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.robots.camera import CameraConfig


@dataclass
class RigConfig:
    """The cameras one env observes, read together as ``obs['pixels']``."""

    cameras: tuple[CameraConfig, ...] = ()
    """Every camera; names must be unique (they are the keys of ``obs['pixels']``)."""
    max_skew: float = 0.02
    """Bound in seconds on the spread of the capture timestamps of the frames returned together."""
    sync_timeout: float = 0.1
    """How long ``read()`` may wait for a set within the skew and staleness bounds before it gives up."""
    strict: bool = False
    """On giving up: raise ``SkewError`` (True) or return the best set with the late cameras flagged (False).
    Either way the late cameras are counted."""

    def __post_init__(self) -> None:
        names = [c.name for c in self.cameras]
        if len(set(names)) != len(names):
            raise ValueError(f"camera names must be unique, got {names}")
        if self.max_skew < 0 or self.sync_timeout < 0:
            raise ValueError("max_skew and sync_timeout must be >= 0")
