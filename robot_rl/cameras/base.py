"""The camera base class: a capture thread per camera, a short history of processed frames behind a lock, and the
reconnect loop every source shares.

The control loop only ever calls ``read()`` (latest frame, never blocks) or, through the rig, ``nearest()`` and
``wait_newer()`` (bounded waits). Everything slow — device I/O, decoding, crop/resize — happens on the capture
thread. Timestamps are seconds on ``time.monotonic()``: the capture time when the source reports one on the host
clock (ROS header stamps, RealSense system/global time), else the arrival time on the capture thread.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from robot_rl.robots.camera import CameraConfig

# A source stamp further than this from the arrival time is on another clock (sim time, device clock): ignored.
_MAX_CLOCK_GAP = 2.0


class CameraError(RuntimeError):
    """A camera could not be opened, delivered no frame in time, or a rig set could not be assembled."""


class CameraDisconnected(CameraError):
    """Raised by a source's ``_grab`` when the device went away (unplugged, end of file, stream closed)."""


class FrameRejected(CameraError):
    """Raised by a source's ``_grab`` for one bad frame (undecodable, unsupported encoding): counted as dropped."""


@dataclass
class CameraStats:
    """Counters of one camera since ``start()``."""

    frames: int = 0
    """Frames accepted (processed and stored)."""
    skipped: int = 0
    """Frames never delivered to a reader because newer ones replaced them (camera faster than the reader)."""
    dropped: int = 0
    """Frames lost or rejected: gaps in the source's frame numbers, non-increasing timestamps, failed decodes."""
    disconnects: int = 0
    """Times a streaming camera stopped (unplugged, end of file, no frame for ``frame_timeout``)."""
    reconnects: int = 0
    """Times frames came back after a disconnect."""
    failed_opens: int = 0
    """Attempts to (re)open the camera that failed or produced no frame."""
    connected: bool = False
    """Frames are arriving now."""
    last_error: str = ""
    """Why the camera last failed to open or disconnected (empty if it never did)."""


@dataclass
class Grab:
    """One raw frame from a source, before crop/resize."""

    image: np.ndarray
    """uint8 ``[H, W, 3]`` (or ``[H, W]`` grey)."""
    stamp: float | None = None
    """Capture time on ``time.monotonic()``; None: use the arrival time."""
    bgr: bool = False
    """Channels are BGR (OpenCV's order) and are swapped to RGB after resizing (cheaper on the small image)."""
    depth: np.ndarray | None = None
    """uint16 ``[H, W]`` depth aligned with nothing (RealSense raw units, ``Camera.depth_scale`` metres each)."""
    number: int | None = None
    """The source's frame counter, to count frames lost before they reached us."""


_offset = [math.nan, -math.inf]  # wall - monotonic, and when it was measured


def _clock_offset() -> float:
    """``time.time() - time.monotonic()`` from the tightest of three readings (a thread preempted between the
    two clock reads would otherwise be off by the preemption, milliseconds on a loaded machine)."""
    best = (math.inf, 0.0)
    for _ in range(3):
        a = time.monotonic()
        w = time.time()
        b = time.monotonic()
        best = min(best, (b - a, w - (a + b) / 2))
    return best[1]


def wall_to_monotonic(t_wall: float) -> float:
    """A wall-clock time (``time.time()`` seconds, e.g. a ROS header stamp) on the ``time.monotonic()`` clock.

    The offset between the clocks is re-measured once a second and only moves when it changed by more than
    0.1 ms (clock slew): equal source stamps of different cameras then map to equal timestamps."""
    now = time.monotonic()
    if now - _offset[1] > 1.0:
        offset = _clock_offset()
        if not abs(offset - _offset[0]) <= 1e-4:  # also true for the first (nan) measurement
            _offset[0] = offset
        _offset[1] = now
    return t_wall - _offset[0]


def crop_resize(image: np.ndarray, crop: tuple[int, int, int, int] | None, out_hw: tuple[int, int],
                nearest: bool = False) -> np.ndarray:
    """Crops ``(x, y, w, h)`` then resizes to ``out_hw``; always returns a new contiguous array (never a view of
    the source buffer, which the device may reuse)."""
    src = image
    if crop is not None:
        x, y, w, h = crop
        if x + w > image.shape[1] or y + h > image.shape[0]:
            raise CameraError(f"crop {crop} lies outside the {image.shape[1]}x{image.shape[0]} frame")
        image = image[y:y + h, x:x + w]
    if image.shape[:2] != tuple(out_hw):
        import cv2  # optional: cameras

        if nearest:
            interp = cv2.INTER_NEAREST  # depth: never blend distances across edges
        elif out_hw[0] * out_hw[1] < image.shape[0] * image.shape[1]:
            interp = cv2.INTER_AREA
        else:
            interp = cv2.INTER_LINEAR
        image = cv2.resize(np.ascontiguousarray(image), (out_hw[1], out_hw[0]), interpolation=interp)
    if image is src or image.base is not None or not image.flags.c_contiguous:
        image = np.array(image, order="C", copy=True)
    return image


class _Entry:
    __slots__ = ("stamp", "rgb", "depth", "delivered")

    def __init__(self, stamp: float, rgb: np.ndarray, depth: np.ndarray | None) -> None:
        self.stamp, self.rgb, self.depth, self.delivered = stamp, rgb, depth, False


class Camera:
    """Base of every source. Subclasses implement ``_open`` (raise on failure), ``_grab(timeout)`` (a ``Grab``,
    None when nothing arrived within ``timeout``, ``CameraDisconnected`` when the device went away) and
    ``_close``. Frames returned by ``read``/``nearest`` are read-only arrays shared between readers."""

    def __init__(self, cfg: CameraConfig) -> None:
        self.cfg = cfg
        self.depth_scale = 0.0
        """Metres per raw depth unit (RealSense with ``depth: true``), 0 without depth."""
        self._shape = cfg.output_shape()
        self._cond = threading.Condition()
        self._history: deque[_Entry] = deque(maxlen=cfg.history)
        self._stats = CameraStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ever_connected = False
        self._last_stamp = -math.inf
        self._last_number: int | None = None
        self._last_depth: tuple[np.ndarray, float] | None = None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> Camera:
        """Starts the capture thread; waits up to ``open_timeout`` for the first frame (CameraError if none)."""
        if self._thread is not None:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"camera:{self.cfg.name}", daemon=True)
        self._thread.start()
        if self.cfg.open_timeout > 0 and not self.wait_newer(-math.inf, self.cfg.open_timeout):
            reason = self.stats.last_error or "no frame arrived"
            self.stop()
            raise CameraError(f"{self.cfg.source} camera {self.cfg.name!r} ({self.describe()}): no frame within "
                              f"{self.cfg.open_timeout} s: {reason}")
        return self

    def stop(self) -> None:
        """Stops the capture thread and releases the device (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(2.0, 2 * self.cfg.frame_timeout))
            self._thread = None
        with self._cond:
            self._stats.connected = False
            self._cond.notify_all()

    def __enter__(self) -> Camera:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def describe(self) -> str:
        """Where the frames come from, for messages."""
        return {"opencv": self.cfg.device, "realsense": f"serial {self.cfg.serial or 'any'}",
                "ros": self.cfg.topic}[self.cfg.source]

    # ----------------------------------------------------------------- readers (any thread, never block long)
    def read(self) -> tuple[np.ndarray | None, float | None]:
        """The latest frame (uint8 ``[H, W, 3]`` RGB, read-only) and its timestamp; ``(None, None)`` before the
        first frame. Never blocks on the device."""
        with self._cond:
            if not self._history:
                return None, None
            entry = self._history[-1]
            entry.delivered = True
            return entry.rgb, entry.stamp

    def read_depth(self) -> tuple[np.ndarray | None, float | None]:
        """The latest depth frame (uint16 ``[H, W]``, ``depth_scale`` metres per unit) and its timestamp."""
        with self._cond:
            return self._last_depth if self._last_depth is not None else (None, None)

    def latest_stamp(self) -> float | None:
        with self._cond:
            return self._history[-1].stamp if self._history else None

    def staleness(self) -> float:
        """Age in seconds of the latest frame (``inf`` before the first)."""
        t = self.latest_stamp()
        return math.inf if t is None else max(0.0, time.monotonic() - t)

    def nearest(self, t: float) -> tuple[np.ndarray, float, np.ndarray | None] | None:
        """The kept frame whose timestamp is closest to ``t``: ``(rgb, stamp, depth)``; None before any frame."""
        with self._cond:
            if not self._history:
                return None
            entry = min(self._history, key=lambda e: abs(e.stamp - t))
            entry.delivered = True
            return entry.rgb, entry.stamp, entry.depth

    def wait_newer(self, t: float, timeout: float) -> bool:
        """Waits up to ``timeout`` for a frame stamped after ``t``; False on timeout or when stopped."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (self._history and self._history[-1].stamp > t):
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return False
                self._cond.wait(left)
            return True

    @property
    def stats(self) -> CameraStats:
        with self._cond:
            return replace(self._stats)

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(H, W, 3)`` of every delivered frame."""
        return self._shape

    # ----------------------------------------------------------------- source hooks
    def _open(self) -> None:
        raise NotImplementedError

    def _grab(self, timeout: float) -> Grab | None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    # ----------------------------------------------------------------- capture thread
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._open()
            except Exception as exc:  # any library error: report it and retry
                self._note(failed_open=True, error=f"cannot open: {exc}")
                self._close_quietly()
                self._stop.wait(self.cfg.reconnect_interval)
                continue
            self._serve()
            self._close_quietly()
            if not self._stop.is_set():
                self._stop.wait(self.cfg.reconnect_interval)

    def _serve(self) -> None:
        """Grabs frames until the device goes away, goes silent for ``frame_timeout``, or ``stop()``."""
        cfg, streaming = self.cfg, False
        last = time.monotonic()
        self._last_number = None  # a reopened device may restart its frame counter
        while not self._stop.is_set():
            try:
                grab = self._grab(min(0.1, cfg.frame_timeout))
            except FrameRejected as exc:
                last = time.monotonic()  # frames do arrive: not a disconnect
                with self._cond:
                    self._stats.dropped += 1
                    self._stats.last_error = f"frame rejected: {exc}"
                continue
            except Exception as exc:  # unplug surfaces as arbitrary library errors
                self._note(failed_open=not streaming, error=str(exc) or type(exc).__name__)
                return
            now = time.monotonic()
            if grab is None:
                if now - last > cfg.frame_timeout:
                    self._note(failed_open=not streaming, error=f"no frame for {cfg.frame_timeout} s")
                    return
                continue
            last = now
            if self._accept(grab, now) and not streaming:
                streaming = True
                with self._cond:
                    self._stats.connected = True
                    if self._ever_connected:
                        self._stats.reconnects += 1
                    self._ever_connected = True

    def _note(self, failed_open: bool, error: str) -> None:
        with self._cond:
            if failed_open:
                self._stats.failed_opens += 1
            else:
                self._stats.disconnects += 1
            self._stats.connected = False
            self._stats.last_error = error

    def _close_quietly(self) -> None:
        try:
            self._close()
        except Exception:  # closing an unplugged device fails; nothing left to release
            pass

    def _accept(self, grab: Grab, now: float) -> bool:
        """Processes one frame and stores it; False when it was rejected (counted as dropped)."""
        stamp = grab.stamp if grab.stamp is not None and abs(grab.stamp - now) < _MAX_CLOCK_GAP else now
        lost = 0
        if grab.number is not None:
            if self._last_number is not None and grab.number > self._last_number + 1:
                lost = grab.number - self._last_number - 1
            self._last_number = grab.number
        try:
            if stamp <= self._last_stamp:
                raise CameraError(f"timestamp {stamp:.6f} not after the previous {self._last_stamp:.6f}")
            hw = self._shape[:2]
            rgb = crop_resize(grab.image, self.cfg.crop, hw)
            if rgb.ndim == 2:
                rgb = np.repeat(rgb[..., None], 3, axis=2)
            elif grab.bgr:
                rgb = np.ascontiguousarray(rgb[..., 2::-1])
            elif rgb.shape[2] == 4:
                rgb = np.ascontiguousarray(rgb[..., :3])
            depth = None if grab.depth is None else crop_resize(grab.depth, self.cfg.crop, hw, nearest=True)
        except Exception as exc:  # a bad frame must not stop the stream
            with self._cond:
                self._stats.dropped += lost + 1
                self._stats.last_error = f"frame rejected: {exc}"
            return False
        rgb.flags.writeable = False
        if depth is not None:
            depth.flags.writeable = False
        self._last_stamp = stamp
        with self._cond:
            if len(self._history) == self._history.maxlen and not self._history[0].delivered:
                self._stats.skipped += 1
            self._history.append(_Entry(stamp, rgb, depth))
            if depth is not None:
                self._last_depth = (depth, stamp)
            self._stats.frames += 1
            self._stats.dropped += lost
            self._cond.notify_all()
        return True

    def _count_skipped(self, n: int) -> None:
        """For sources that discard frames themselves before ``_grab`` sees them (newest-only hand-over)."""
        with self._cond:
            self._stats.skipped += n
