"""Several cameras read together as ``obs['pixels']``: frames matched by timestamp with a bound on their skew.

``read()`` takes the newest frame of the camera that is furthest behind as the reference and, from every other
camera's short history, the frame closest to it. If the spread of the chosen timestamps exceeds ``max_skew`` or
the reference is older than a camera's ``max_staleness``, it waits (at most ``sync_timeout``) for the lagging
camera's next frame and tries again; after that it counts the lagging cameras late and either raises
(``strict``) or returns the set with them flagged. It never waits longer than ``sync_timeout``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.cameras.base import Camera, CameraError, CameraStats
from robot_rl.cameras.config import RigConfig
from robot_rl.cameras.opencv import OpenCVCamera
from robot_rl.cameras.realsense import RealSenseCamera
from robot_rl.cameras.ros import RosCamera
from robot_rl.robots.camera import CameraConfig


class SkewError(CameraError):
    """No camera set within the skew/staleness bounds arrived within ``sync_timeout`` (strict rigs)."""


def make_camera(cfg: CameraConfig, **kwargs: Any) -> Camera:
    """The camera for ``cfg.source`` (not started). Each source's library is imported when its camera opens."""
    if cfg.source == "opencv":
        return OpenCVCamera(cfg, **kwargs)
    if cfg.source == "realsense":
        return RealSenseCamera(cfg, **kwargs)
    if cfg.source == "ros":
        return RosCamera(cfg, **kwargs)
    raise ValueError(f"unknown camera source {cfg.source!r}")


def pixels_space(shapes: dict[str, tuple[int, int, int]]) -> gym.spaces.Dict:
    """``obs['pixels']`` space: camera name -> uint8 Box ``[H, W, 3]`` (the same the sims declare)."""
    return gym.spaces.Dict({name: gym.spaces.Box(0, 255, shape, np.uint8) for name, shape in shapes.items()})


@dataclass
class RigReading:
    """One synchronised set of frames."""

    pixels: dict[str, np.ndarray]
    """Camera name -> uint8 ``[H, W, 3]`` RGB: the ``obs['pixels']`` dict."""
    stamps: dict[str, float]
    """Camera name -> capture timestamp (``time.monotonic()`` seconds) of its frame."""
    skew: float
    """Max minus min of ``stamps``."""
    age: float
    """Seconds between the oldest frame of the set and the return of ``read()``."""
    late: tuple[str, ...] = ()
    """Cameras that broke the skew or staleness bound when ``read()`` gave up waiting (empty when in bound)."""
    depth: dict[str, np.ndarray] = field(default_factory=dict)
    """Camera name -> uint16 depth of the same frame, for cameras streaming depth."""


@dataclass
class RigStats:
    """Counters of a rig since it started."""

    reads: int = 0
    """Sets returned or refused."""
    waited: int = 0
    """Reads that had to wait for a lagging camera."""
    out_of_bound: int = 0
    """Reads that gave up after ``sync_timeout`` (returned flagged, or raised when strict)."""
    late: dict[str, int] = field(default_factory=dict)
    """Camera name -> reads in which it was the late one."""
    max_skew_seen: float = 0.0
    """Largest skew of a returned set."""


class CameraRig:
    """Starts, reads and stops the cameras of a ``RigConfig``; ``read()`` returns a ``RigReading``."""

    def __init__(self, cfg: RigConfig, cameras: dict[str, Camera] | None = None) -> None:
        self.cfg = cfg
        self.cameras = cameras if cameras is not None else {c.name: make_camera(c) for c in cfg.cameras}
        self._stats = RigStats(late={name: 0 for name in self.cameras})

    def start(self) -> CameraRig:
        started: list[Camera] = []
        try:
            for cam in self.cameras.values():
                started.append(cam.start())
        except Exception:
            for cam in started:
                cam.stop()
            raise
        return self

    def stop(self) -> None:
        for cam in self.cameras.values():
            cam.stop()

    def __enter__(self) -> CameraRig:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def observation_space(self) -> gym.spaces.Dict:
        """The ``pixels`` entry of the observation space."""
        return pixels_space({name: cam.shape for name, cam in self.cameras.items()})

    @property
    def stats(self) -> RigStats:
        s = self._stats
        return RigStats(s.reads, s.waited, s.out_of_bound, dict(s.late), s.max_skew_seen)

    def camera_stats(self) -> dict[str, CameraStats]:
        return {name: cam.stats for name, cam in self.cameras.items()}

    def read(self, after: float | None = None, timeout: float | None = None) -> RigReading:
        """The newest set of frames within the skew and staleness bounds (waits at most ``sync_timeout``).

        ``after`` (``time.monotonic()`` seconds): only frames captured at or after it, as a reset's first observation
        needs (a camera's frames arrive tens of ms after their capture: without it, the newest frame can still show
        the scene before the reset). Waits for them at most ``timeout`` (default ``sync_timeout``), then raises
        ``CameraError``: an episode never starts from a frame of before its reset."""
        cfg = self.cfg
        wait = cfg.sync_timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        self._stats.reads += 1
        waited = False
        while True:
            latest = {name: cam.latest_stamp() for name, cam in self.cameras.items()}
            missing = [name for name, t in latest.items() if t is None or (after is not None and t < after)]
            if not missing:
                ref_name = min(latest, key=lambda n: latest[n])  # type: ignore[arg-type, return-value]
                picked = {name: cam.nearest(latest[ref_name]) for name, cam in self.cameras.items()}
                if after is not None:  # the frame nearest the reference may be older than ``after``; the newest is not
                    picked = {name: p if p[1] >= after else self.cameras[name].nearest(latest[name])  # type: ignore[index]
                              for name, p in picked.items()}
                stamps = {name: p[1] for name, p in picked.items()}  # type: ignore[index]
                skew = max(stamps.values()) - min(stamps.values())
                now = time.monotonic()
                late = [name for name, cam in self.cameras.items()  # stale: the camera itself fell behind
                        if now - latest[name] > cam.cfg.max_staleness]  # type: ignore[operator]
                if skew > cfg.max_skew:
                    late.append(ref_name)  # its next frame is the one that can close the gap
                if not late:
                    return self._reading(picked, stamps, skew, ())
            else:
                late = missing
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not waited:
                waited = True
                self._stats.waited += 1
            # Wait for the camera furthest behind to deliver a newer frame, then look again.
            lag = min(late, key=lambda n: -math.inf if latest[n] is None else latest[n])
            t = latest[lag]
            self.cameras[lag].wait_newer(-math.inf if t is None else t, left)
        if after is not None and missing:
            ages = {n: "no frame" if latest[n] is None else f"newest captured {after - latest[n]:.3f} s before"
                    for n in missing}
            raise CameraError(f"no frame from camera(s) {missing} captured after the requested time within {wait} s: "
                              f"{ages}")
        self._stats.out_of_bound += 1
        late = sorted(set(late))
        for name in late:
            self._stats.late[name] += 1
        if missing:
            errors = {n: self.cameras[n].stats.last_error or "no frame yet" for n in missing}
            raise CameraError(f"no frame from camera(s) {missing} within {cfg.sync_timeout} s: {errors}")
        if cfg.strict:
            ages = {n: round(time.monotonic() - t, 3) for n, t in stamps.items()}
            raise SkewError(f"cameras {late} out of bound after {cfg.sync_timeout} s: skew {skew * 1e3:.1f} ms "
                            f"(max {cfg.max_skew * 1e3:.1f}), frame ages {ages}")
        return self._reading(picked, stamps, skew, tuple(late))

    def _reading(self, picked: dict[str, Any], stamps: dict[str, float], skew: float,
                 late: tuple[str, ...]) -> RigReading:
        self._stats.max_skew_seen = max(self._stats.max_skew_seen, skew)
        # Copies: the camera's arrays are shared read-only; an observation is the caller's to keep or modify.
        pixels = {name: np.array(p[0]) for name, p in picked.items()}
        depth = {name: np.array(p[2]) for name, p in picked.items() if p[2] is not None}
        return RigReading(pixels, stamps, skew, time.monotonic() - min(stamps.values()), late, depth)
